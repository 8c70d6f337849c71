"""Which line of the user's code made a call: the first Python frame outside the frameworks.

A call that breaks a capture is made deep inside PyTorch, CuPy or pycudagraph; what the
user can change is their own line that led there. :func:`user_place` finds it from a live
frame (``pcg.doctor``'s CUDA callbacks run on the calling thread, so the thread's Python
frames are the ones that made the call); :func:`traceback_place` finds it in the traceback
of an exception (what ``pcg.capture`` reports when a capture fails).

A frame belongs to a framework when its module (``__name__`` of its globals: Cython
frames in tracebacks carry their module too) lies in one of :data:`FRAMEWORKS`, or when it
is frozen import machinery. No CUDA call here.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass

__all__ = ["FRAMEWORKS", "Place", "is_framework", "user_place", "traceback_place",
           "cupy_raw_name"]

#: Top-level packages whose frames are not the user's: the array frameworks and their
#: compilers, the CUDA bindings, pycudagraph itself, and the standard library's plumbing
#: (imports, ``runpy``, context managers, ``functools`` wrappers, threads).
FRAMEWORKS = frozenset({
    "torch", "cupy", "cupyx", "cupy_backends", "fastrlock", "pycudagraph", "cuda", "cupti",
    "numpy", "triton", "numba", "importlib", "runpy", "contextlib", "functools", "threading",
    "concurrent", "asyncio", "_bootstrap", "_bootstrap_external",
})


def is_framework(module: str, filename: str = "") -> bool:
    """Whether a frame of ``module`` (its ``__name__``) in ``filename`` is framework code,
    not the user's. No CUDA call."""
    if filename.startswith("<frozen"):
        return True
    return module.split(".", 1)[0] in FRAMEWORKS


@dataclass(frozen=True)
class Place:
    """A line of the user's code: ``file`` (as Python knows it), ``line``, ``function``, and
    ``inner``, the framework function that line called into when Python frames show one
    (``torch.cuda.synchronize``), else ``""``."""

    file: str
    line: int
    function: str
    inner: str = ""

    @property
    def source(self) -> str:
        """The text of the line, stripped ("" when the file cannot be read). No CUDA call."""
        return linecache.getline(self.file, self.line).strip() if self.line > 0 else ""

    @property
    def short_file(self) -> str:
        """``file`` relative to the working folder when it lies inside it. No CUDA call."""
        try:
            rel = os.path.relpath(self.file)
        except ValueError:  # another drive
            return self.file
        return self.file if rel.startswith("..") else rel

    def __str__(self) -> str:
        return f"{self.short_file}:{self.line}"


def _module(frame) -> str:
    return str(frame.f_globals.get("__name__", "") or "")


def _qualname(frame) -> str:
    code = frame.f_code
    return getattr(code, "co_qualname", None) or code.co_name


def _framework_name(frame) -> str:
    """``module.function`` of a framework frame (Cython frames name it in full already)."""
    name = _qualname(frame)
    module = _module(frame)
    return name if name.startswith(module + ".") or not module else f"{module}.{name}"


def user_place(frame, limit: int = 200) -> Place | None:
    """The first frame from ``frame`` outwards (``f_back``) that is not framework code, as a
    :class:`Place`; ``inner`` names the outermost framework frame below it. None when every
    frame is framework code (or there is none). No CUDA call."""
    inner = ""
    depth = 0
    while frame is not None and depth < limit:
        code = frame.f_code
        if not is_framework(_module(frame), code.co_filename):
            return Place(code.co_filename, frame.f_lineno or 0, _qualname(frame), inner)
        inner = _framework_name(frame)
        frame = frame.f_back
        depth += 1
    return None


def _entries(tb) -> list:
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def traceback_place(tb) -> tuple[Place | None, str]:
    """The user's line in a traceback, and the raw CUDA call CuPy's frames show failed.

    The place is the innermost entry that is not framework code (the user's line closest to
    the failing call); ``inner`` names the framework function that line called (the first
    framework entry after it). The raw call is found where the innermost entries are CuPy's
    thin layer (``cupy_backends.cuda.api.runtime.streamSynchronize`` is
    ``cudaStreamSynchronize``, :func:`cupy_raw_name`), else ``""``. No CUDA call."""
    entries = _entries(tb)
    place = None
    for i in range(len(entries) - 1, -1, -1):
        frame, line = entries[i]
        if not is_framework(_module(frame), frame.f_code.co_filename):
            inner = _framework_name(entries[i + 1][0]) if i + 1 < len(entries) else ""
            place = Place(frame.f_code.co_filename, line, _qualname(frame), inner)
            break
    raw = ""
    for frame, _line in reversed(entries):
        raw = cupy_raw_name(_module(frame), frame.f_code.co_name)
        if raw:
            break
    return place, raw


#: CuPy's thin layers and the prefix its naming rule drops (``cudaGraphLaunch`` ->
#: ``graphLaunch`` in ``cupy_backends.cuda.api.runtime``; ``cu`` in ``.driver``).
_CUPY_LAYERS = {"cupy_backends.cuda.api.runtime": "cuda", "cupy_backends.cuda.api.driver": "cu"}
_CUPY_CHECKERS = ("check_status", "_check", "check_attribute_status")


def cupy_raw_name(module: str, function: str) -> str:
    """The raw CUDA name of a function of CuPy's thin layer (``streamSynchronize`` in
    ``cupy_backends.cuda.api.runtime`` -> ``cudaStreamSynchronize``), or ``""`` for any
    other frame and for the layer's error checkers. No CUDA call."""
    prefix = _CUPY_LAYERS.get(module)
    name = function.rsplit(".", 1)[-1]
    if prefix is None or not name or name.startswith(_CUPY_CHECKERS) or name.startswith("_"):
        return ""
    return prefix + name[0].upper() + name[1:]
