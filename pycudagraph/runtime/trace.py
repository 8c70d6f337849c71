"""Tracing: record every raw CUDA call pycudagraph makes, as C-like text.

>>> with pcg.trace() as t:
...     exe.launch(stream)
>>> print(t)
cuGraphLaunch(exec0, stream0)  -> CUDA_SUCCESS    # runtime: cudaGraphLaunch; demo.py:42

A driver call (``cu*``) made where the runtime API has the function a reader looks up
names both: the call made, then its runtime twin after the ``#`` (``runtime: ...``).

Handles are named by kind and order of first appearance (``g0``, ``n3``, ``exec0``).
When no trace is active the only cost on a hot path is one attribute read.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

from .. import _cuda
from ..errors import ArgumentError
from .values import bool_arg, short_repr

__all__ = ["trace", "TracedCall", "runtime_twin", "call_site"]

_PREFIX = {"cudaGraph_t": "g", "CUgraph": "g", "cudaGraphNode_t": "n", "CUgraphNode": "n",
           "cudaGraphExec_t": "exec", "CUgraphExec": "exec", "cudaStream_t": "stream",
           "CUstream": "stream", "cudaEvent_t": "ev", "CUevent": "ev", "cudaLibrary_t": "lib",
           "cudaKernel_t": "kern", "nvrtcProgram": "prog", "Graph": "g", "GraphExec": "exec",
           "Stream": "stream", "Event": "ev", "KernelNode": "n", "Node": "n"}
_PKG = __name__.split(".")[0]  # frames inside the package are not "the caller"


#: Driver calls whose runtime twin is not ``cuda`` + the rest of the name (``None``: the
#: runtime has none; the driver call is what a reader looks up).
_RUNTIME_TWINS = {"cuLaunchKernel": "cudaLaunchKernel", "cuFuncGetAttribute": "cudaFuncGetAttributes",
                  "cuKernelGetParamInfo": "cudaFuncGetParamInfo",
                  "cuFuncGetParamInfo": "cudaFuncGetParamInfo",
                  "cuMemGetAddressRange": None, "cuKernelGetFunction": None}


def runtime_twin(api: str) -> str | None:
    """The runtime function a reader would look up for the driver call ``api``
    (``cuGraphAddKernelNode`` -> ``cudaGraphAddKernelNode``), or ``None`` (a runtime,
    NVRTC or driver-only call). No CUDA call."""
    if not api.startswith("cu") or api.startswith(("cuda", "cuCtx")):
        return None
    base = api[:-3] if api.endswith(("_v2", "_v3")) else api
    if base in _RUNTIME_TWINS:
        return _RUNTIME_TWINS[base]
    twin = "cuda" + base[2:]
    return twin if hasattr(_cuda.rt, twin) else None


@dataclass
class TracedCall:
    """One recorded call: the API name, its C-like text, the result, and the caller.

    ``runtime`` is the runtime function a reader would look up when ``api`` is its driver
    twin (``cuGraphLaunch`` -> ``cudaGraphLaunch``), else ``None``; the text shows both.
    """

    api: str
    text: str
    result: str
    where: str
    runtime: str | None = None

    def __str__(self) -> str:
        twin = f"runtime: {self.runtime}; " if self.runtime else ""
        return f"{self.text}  -> {self.result}    # {twin}{self.where}"


class trace:
    """Context manager recording raw calls into :attr:`calls` (a list of str).

    Parameters
    ----------
    echo : bool
        Also print each call as it happens.
    file : file object, optional
        Where ``echo`` prints (``sys.stdout`` when not given).

    Notes
    -----
    No CUDA call: it records the raw calls pycudagraph makes while it is entered.
    """

    _lock = threading.Lock()

    def __init__(self, echo: bool = False, file=None):
        self.echo = bool_arg(echo, "trace: echo")
        if file is not None and not callable(getattr(file, "write", None)):
            raise ArgumentError(f"trace: file must have a write() method (a text file), got "
                                f"{short_repr(file)} ({type(file).__name__})")
        self.file = file
        self.records: list[TracedCall] = []
        self._names: dict[int, str] = {}
        self._counts: dict[str, int] = {}
        self._previous = None

    @property
    def calls(self) -> list[str]:
        """The recorded calls as text lines. No CUDA call."""
        return [str(r) for r in self.records]

    def __enter__(self) -> "trace":
        with self._lock:
            self._previous = _cuda.check.set_tracer(self._record)
        return self

    def __exit__(self, *exc) -> bool:
        with self._lock:
            _cuda.check.set_tracer(self._previous)
        return False

    def __str__(self) -> str:
        return "\n".join(self.calls)

    # Formatting ------------------------------------------------------------------

    def name_of(self, obj) -> str:
        """``g0``, ``n3``... for a handle or pycudagraph object; hex for other pointers.
        No CUDA call."""
        kind = type(obj).__name__
        prefix = _PREFIX.get(kind)
        if prefix is None and kind.endswith("Node"):
            prefix = "n"
        h = getattr(obj, "_h", None)
        if h is None:
            try:
                h = int(obj)
            except (TypeError, ValueError, OverflowError):
                return repr(obj)
        if prefix is None:
            return hex(h)
        key = (prefix, h)
        name = self._names.get(key)
        if name is None:
            n = self._counts.get(prefix, 0)
            self._counts[prefix] = n + 1
            name = self._names[key] = f"{prefix}{n}"
        return name

    def _fmt(self, value) -> str:
        if type(value).__name__ == "ArgPack":  # a packed launch (pycudagraph.compile.args)
            return self._fmt_pack(value)
        if isinstance(value, (list, tuple)):
            return "{" + ", ".join(self._fmt(v) for v in value) + "}"
        if isinstance(value, bool) or value is None:
            return {True: "1", False: "0", None: "NULL"}[value]
        if isinstance(value, float):
            return f"{value!r}f"
        if isinstance(value, int):
            return str(value) if abs(value) < 1 << 20 else hex(value)
        if isinstance(value, (str, bytes)):
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            return '"' + (text if len(text) < 48 else text[:45] + "...") + '"'
        kind = type(value).__name__
        if kind in _PREFIX or kind.endswith("Node") or hasattr(value, "_h"):
            return self.name_of(value)
        if hasattr(value, "getPtr"):  # a cuda.bindings struct: name it, do not dump it
            return f"&{kind}{{...}}"
        text = repr(value)
        return text if len(text) < 60 else text[:57] + "..."

    def _fmt_pack(self, pack) -> str:
        (g, b, smem) = pack.dims
        args = ", ".join(_arg_text(p, v) for p, v in zip(pack.layout.params, pack.values()))
        return (f"{{func={pack.kernel.name}, grid=({g[0]},{g[1]},{g[2]}), "
                f"block=({b[0]},{b[1]},{b[2]}), shared={smem}, args=({args})}}")

    def _record(self, api: str, args, result) -> None:
        where = call_site()
        if api == "cuGraphAddKernelNode" and type(args[0]).__name__ == "c_void_p":
            out, graph, deps, pack = args
            text = (f"{api}(&{self.name_of(_Named('n', out.value))}, {self.name_of(graph)}, "
                    f"{self._fmt(deps)}, {len(deps)}, {self._fmt_pack(pack)})")
        else:
            text = f"{api}({', '.join(self._fmt(a) for a in args)})"
        code = result[0] if isinstance(result, tuple) and result else result
        status = getattr(code, "name", None) or ("CUDA_SUCCESS" if code == 0 else f"error {int(code)}")
        rest = [self._fmt(r) for r in result[1:]] if isinstance(result, tuple) else []
        res_text = status + (" " + ", ".join(rest) if rest else "")
        rec = TracedCall(api, text, res_text, where, runtime_twin(api))
        self.records.append(rec)
        if self.echo:
            print(rec, file=self.file or sys.stdout)


class _Named:
    """A raw node handle to be named like a node."""

    def __init__(self, prefix: str, h: int):
        self._h = h
        self.prefix = prefix


_PREFIX["_Named"] = "n"


def _arg_text(param, value) -> str:
    if param.kind == "pointer":
        return hex(value)
    if param.kind == "float":
        return f"{value!r}f" if param.ctype == "float" else repr(value)
    return repr(value)


def call_site(depth: int = 2) -> str:
    """``file.py:line`` of the first caller outside pycudagraph, ``depth`` frames up at
    least (what the trace and the capture's fork records show). No CUDA call."""
    frame = sys._getframe(depth)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_PKG):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"
