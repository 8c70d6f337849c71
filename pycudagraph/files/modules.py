"""The kernel images of a graph file at load: which one this GPU takes, and each loaded
once per process. No CUDA call but ``cudaLibraryLoadData`` (in :func:`load_module`).

A module is stored as a CUBIN (or fatbin) for the architecture it was saved on and, when
kept, its PTX. :func:`image_plan` picks what can run here: the CUBIN when it fits this GPU,
else the PTX (compiled by the driver); :func:`load_module` loads the first that loads, or
hands back the :class:`~pycudagraph.compile.program.Module` another load made from the same
image, so graphs loaded from several files that share a module share one load.
"""

from __future__ import annotations

import hashlib
import re
import weakref

from ..compile.program import Module
from ..errors import CudaError, GraphFileError

__all__ = ["parse_arch", "image_plan", "load_module"]

#: sha256 of (name, kind, image) -> a loaded Module: graphs loaded from several files that
#: share a module share one cudaLibraryLoadData
_MODULES: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_ARCH = re.compile(r"(?:sm|compute)_(\d)(\d+)?([af]?)$")


def parse_arch(text: str):
    """``"sm_90a"`` -> ``(9, 0, "a")``; ``None`` when it is not an architecture name. No CUDA call."""
    m = _ARCH.match(text or "")
    if m is None:
        return None
    digits = m.group(1) + (m.group(2) or "")
    return int(digits[:-1] or 0), int(digits[-1]), m.group(3)


def _ptx_target(ptx: str) -> str:
    """The ``.target`` a PTX text names, or ``""``."""
    m = re.search(r"^\s*\.target\s+(\w+)", ptx, re.M)
    return m.group(1) if m else ""


def image_plan(arch: str, has_cubin: bool, ptx: str, device: str) -> list:
    """Which stored images to try on a GPU of architecture ``device``, in order: ``"cubin"``
    when a CUBIN for ``arch`` runs there (same major version, same or newer minor; exactly
    the same for an ``a`` CUBIN), then ``"ptx"`` when its ``.target`` is not newer than the
    GPU. Unknown architectures are tried. No CUDA call."""
    d = parse_arch(device)
    plan = []
    c = parse_arch(arch)
    if has_cubin and (c is None or d is None or (
            c[:2] == d[:2] if c[2] == "a" else (c[0] == d[0] and d[1] >= c[1]))):
        plan.append("cubin")
    t = parse_arch(_ptx_target(ptx)) if ptx else None
    if ptx and (t is None or d is None or (t[:2] == d[:2] if t[2] == "a" else d[:2] >= t[:2])):
        plan.append("ptx")
    return plan


def load_module(name: str, arch: str, cubin: bytes | None, ptx: bytes, device: str) -> Module:
    """The loaded module of a stored image: the one loaded before from the same image, or
    the first of :func:`image_plan` that loads (``cudaLibraryLoadData``).

    Raises
    ------
    GraphFileError
        PTX that is not UTF-8 text; no image for this GPU (naming both architectures);
        none of them loads (each CUDA error).
    """
    try:
        text = ptx.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphFileError(f"module {name!r}: its PTX is not UTF-8 text") from None
    plan = image_plan(arch, cubin is not None, text, device)
    if not plan:
        have = f"a CUBIN for {arch or 'an unknown architecture'}" if cubin else "no CUBIN"
        have += f" and PTX for {_ptx_target(text) or '?'}" if text else " and no PTX"
        raise GraphFileError(f"module {name!r} has {have}; this GPU is {device}: save the "
                             "graph on (or compile it for) this architecture, or keep its PTX")
    errors = []
    for kind in plan:
        image = cubin if kind == "cubin" else ptx + b"\0"
        key = hashlib.sha256(name.encode() + kind.encode() + image).digest()
        mod = _MODULES.get(key)
        if mod is None:
            mod = Module(image, name=name, arch=arch if kind == "cubin" else _ptx_target(text),
                         ptx=text)
            try:
                mod.handle  # noqa: B018 - cudaLibraryLoadData now, not at the first node
            except CudaError as exc:
                errors.append(f"its {kind}: {exc}")
                continue
            _MODULES[key] = mod
        return mod
    raise GraphFileError(f"module {name!r}: this GPU ({device}) loads none of its images: "
                         + "; ".join(errors))

