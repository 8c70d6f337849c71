"""The checked-call layer: the only module that talks to ``cuda.bindings`` and libcuda.

Naming rule: a raw call keeps its CUDA name. ``call(rt.cudaGraphCreate, 0)`` runs
``cudaGraphCreate`` and either returns its values or raises :class:`CudaError` naming
``cudaGraphCreate``. Everything above this module uses ``call`` (cold paths), the
version shims below (calls whose Python signature differs between cuda-bindings 12.x
and 13.x), or the ctypes entry points in :data:`drv` (hot paths: graph launch, kernel
node parameters, eager kernel launch), which skip the Python wrapper objects of
``cuda.bindings`` and take plain integers.

Nothing here touches CUDA at import time; the device is initialised by the first
object that needs it (:func:`ensure_device`).
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading

import cuda.bindings
from cuda.bindings import driver as dr
from cuda.bindings import nvrtc
from cuda.bindings import runtime as rt

from .errors import CudaError, CudaNotAvailableError, NotSupportedError

__all__ = ["rt", "dr", "nvrtc", "call", "error_for", "ensure_device", "drv"]


def _version_tuple(text: str) -> tuple[int, int]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


#: cuda-bindings version as (major, minor); 12.x and 13.x differ in some signatures.
BINDINGS_VERSION: tuple[int, int] = _version_tuple(cuda.bindings.__version__)
BINDINGS_MAJOR: int = BINDINGS_VERSION[0]

#: One list per active ``capture`` block; every failed raw call is appended to each.
capture_watchers: list[list] = []

#: Set by :mod:`pycudagraph.trace` while a trace is recording; ``None`` otherwise.
#: Called as ``tracer(api, args, result)``; ``args`` may be a preformatted string.
tracer = None

# Codes that mean "there is no usable CUDA here" rather than "this call was wrong".
_NOT_AVAILABLE = {
    "cudaErrorInsufficientDriver",
    "cudaErrorNoDevice",
    "cudaErrorStubLibrary",
    "cudaErrorDevicesUnavailable",
    "CUDA_ERROR_NO_DEVICE",
    "CUDA_ERROR_STUB_LIBRARY",
    "CUDA_ERROR_NOT_INITIALIZED",
}


def _decode(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _runtime_name_text(err) -> tuple[str, str]:
    name = rt.cudaGetErrorName(err)[1]
    text = rt.cudaGetErrorString(err)[1]
    return _decode(name), _decode(text)


def _driver_name_text(code: int) -> tuple[str, str]:
    try:
        name = dr.CUresult(code).name
    except ValueError:
        name = f"CUresult({code})"
    try:
        err, text = dr.cuGetErrorString(dr.CUresult(code))
        text = _decode(text) if not err else name
    except Exception:  # no driver library: the name is all we have
        text = name
    return name, text


def _nvrtc_name_text(err) -> tuple[str, str]:
    text = _decode(nvrtc.nvrtcGetErrorString(err)[1])
    return text, text


def error_for(api: str, err, hint: str = "", cls: type | None = None) -> CudaError:
    """Build the exception for a failed raw call and clear CUDA's last error.

    Parameters
    ----------
    api : str
        Name of the raw call that failed.
    err : cudaError_t, CUresult, nvrtcResult or int
        Its return code; a plain ``int`` is read as a driver ``CUresult``.
    """
    if isinstance(err, rt.cudaError_t):
        name, text = _runtime_name_text(err)
        rt.cudaGetLastError()  # the runtime keeps the last error: do not blame the next call
    elif isinstance(err, nvrtc.nvrtcResult):
        name, text = _nvrtc_name_text(err)
    else:
        name, text = _driver_name_text(int(err))
    if cls is None:
        cls = CudaNotAvailableError if name in _NOT_AVAILABLE else CudaError
    for failures in capture_watchers:
        failures.append(f"{api} ({name})")
    return cls(api, int(err), name, text, hint)


def call(fn, *args):
    """Run one raw ``cuda.bindings`` call and check its return code.

    Returns ``None``, the single value, or a tuple of the values the call returns.
    Raises :class:`CudaError` naming the call when the code is not success.
    """
    res = fn(*args)
    if tracer is not None:
        tracer(fn.__name__, args, res)
    err = res[0]
    if err:
        raise error_for(fn.__name__, err)
    n = len(res)
    if n == 1:
        return None
    if n == 2:
        return res[1]
    return res[1:]


# ----------------------------------------------------------------------------------
# Versions and device initialisation

_lock = threading.Lock()
_state: dict = {"ready": False, "device": None}


def driver_version() -> int:
    """CUDA version the driver supports, as 1000*major + 10*minor (``cudaDriverGetVersion``)."""
    err, v = rt.cudaDriverGetVersion()
    if err or v == 0:
        raise CudaNotAvailableError(
            "cudaDriverGetVersion", int(err), "cudaErrorInsufficientDriver",
            "no NVIDIA driver was found on this machine")
    return v


def runtime_version() -> int:
    """Version of the CUDA runtime in cuda-bindings (``cudaRuntimeGetVersion``)."""
    return call(rt.cudaRuntimeGetVersion)


def nvrtc_version() -> tuple[int, int]:
    """NVRTC version as (major, minor) (``nvrtcVersion``)."""
    return tuple(call(nvrtc.nvrtcVersion))


def format_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def require(feature: str, version: int) -> None:
    """Raise :class:`NotSupportedError` unless the driver supports CUDA ``version``."""
    have = driver_version()
    if have < version:
        raise NotSupportedError(feature, format_version(version), f"a CUDA {format_version(have)} driver")


def ensure_device() -> int:
    """Initialise CUDA on the current device once; return the device ordinal.

    Calls ``cudaGetDeviceCount``, ``cudaGetDevice`` and ``cudaFree(0)`` (which makes the
    device's primary context current).
    Raises :class:`CudaNotAvailableError` with one clear sentence when there is no
    driver or no device.
    """
    if _state["ready"]:
        return _state["device"]
    with _lock:
        if _state["ready"]:
            return _state["device"]
        err, count = rt.cudaGetDeviceCount()
        if err or count == 0:
            name, text = _runtime_name_text(err) if err else ("cudaErrorNoDevice", "no CUDA-capable device is detected")
            rt.cudaGetLastError()
            raise CudaNotAvailableError(
                "cudaGetDeviceCount", int(err), name, text,
                "pycudagraph needs an NVIDIA GPU and driver; none is usable on this machine")
        dev = call(rt.cudaGetDevice)
        call(rt.cudaFree, 0)
        _state.update(ready=True, device=dev)
        return dev


def cuda_available() -> bool:
    """True when a driver and at least one device are usable; never raises."""
    try:
        ensure_device()
        return True
    except Exception:
        return False


# ----------------------------------------------------------------------------------
# Signature shims: cuda-bindings 13 added edge data to these calls

def _edges_arg():
    return (None,) if BINDINGS_MAJOR >= 13 else ()


def graph_add_dependencies(graph, frm: list, to: list) -> None:
    """``cudaGraphAddDependencies`` with default edge data."""
    call(rt.cudaGraphAddDependencies, graph, frm, to, *_edges_arg(), len(frm))


def graph_remove_dependencies(graph, frm: list, to: list) -> None:
    """``cudaGraphRemoveDependencies`` with default edge data."""
    call(rt.cudaGraphRemoveDependencies, graph, frm, to, *_edges_arg(), len(frm))


def graph_get_edges(graph) -> tuple[list, list]:
    """``cudaGraphGetEdges``: the (from, to) lists, queried in two calls (count, then fill)."""
    res = call(rt.cudaGraphGetEdges, graph, 0)
    count = res[-1]
    if count == 0:
        return [], []
    res = call(rt.cudaGraphGetEdges, graph, count)
    return list(res[0][:count]), list(res[1][:count])


def _sized_list(fn, handle) -> list:
    count = call(fn, handle, 0)[-1]
    if count == 0:
        return []
    res = call(fn, handle, count)
    return list(res[0][:count])


def node_dependencies(node) -> list:
    """``cudaGraphNodeGetDependencies`` (count, then fill)."""
    return _sized_list(rt.cudaGraphNodeGetDependencies, node)


def node_dependents(node) -> list:
    """``cudaGraphNodeGetDependentNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphNodeGetDependentNodes, node)


def graph_nodes(graph) -> list:
    """``cudaGraphGetNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphGetNodes, graph)


def graph_root_nodes(graph) -> list:
    """``cudaGraphGetRootNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphGetRootNodes, graph)


# ----------------------------------------------------------------------------------
# ctypes entry points into libcuda for the hot paths

class ExecUpdateResultInfo(ctypes.Structure):
    """``CUgraphExecUpdateResultInfo``: why ``cuGraphExecUpdate`` refused, and where.

    (cuda-bindings returns ``None`` for this struct when the call fails, which is the
    one case it matters, so the update goes through :data:`drv`.)
    """

    _fields_ = [("result", ctypes.c_int), ("errorNode", ctypes.c_void_p),
                ("errorFromNode", ctypes.c_void_p)]


#: Byte layout of ``CUDA_KERNEL_NODE_PARAMS_v2`` (the struct the driver's kernel-node calls
#: take) for ``struct.pack_into``: func, grid xyz, block xyz, sharedMemBytes, (padding),
#: kernelParams, extra, kern, ctx. 72 bytes on 64-bit little-endian hosts.
KERNEL_NODE_PARAMS_FORMAT = "<Q7I4xQQQQ"
assert struct.calcsize(KERNEL_NODE_PARAMS_FORMAT) == 72


class _Driver:
    """Plain ctypes functions from libcuda, resolved on first use.

    Each attribute is a ctypes function returning the raw ``CUresult`` as an int;
    arguments are integers (handles and pointers) passed as ``void*``.
    """

    # name in libcuda -> (attribute, number of pointer-sized args, extra arg types)
    _SYMBOLS = {
        "cuGraphLaunch": ("cuGraphLaunch", 2),
        "cuGraphUpload": ("cuGraphUpload", 2),
        "cuGraphAddKernelNode_v2": ("cuGraphAddKernelNode", 5),
        "cuGraphKernelNodeSetParams_v2": ("cuGraphKernelNodeSetParams", 2),
        "cuGraphExecKernelNodeSetParams_v2": ("cuGraphExecKernelNodeSetParams", 3),
        "cuGraphExecUpdate_v2": ("cuGraphExecUpdate", 3),
    }

    def __init__(self):
        self._lib = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._lib is not None:
                return
            name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
            try:
                lib = ctypes.CDLL(name)
            except OSError as exc:
                raise CudaNotAvailableError(
                    "dlopen", 0, "CUDA_ERROR_NO_DEVICE", f"cannot load {name}: {exc}",
                    "pycudagraph needs an NVIDIA GPU and driver; none is usable on this machine") from exc
            vp = ctypes.c_void_p
            for sym, (attr, nptr) in self._SYMBOLS.items():
                fn = getattr(lib, sym)
                fn.restype = ctypes.c_int
                fn.argtypes = [vp] * nptr
                setattr(self, attr, fn)
            u = ctypes.c_uint
            fn = lib.cuLaunchKernel
            fn.restype = ctypes.c_int
            fn.argtypes = [vp, u, u, u, u, u, u, u, vp, vp, vp]
            self.cuLaunchKernel = fn
            self._lib = lib

    def __getattr__(self, attr):
        # Only reached before loading (afterwards the attributes exist).
        if attr.startswith("_"):
            raise AttributeError(attr)
        self._load()
        return object.__getattribute__(self, attr)


#: The hot-path entry points (``drv.cuGraphLaunch(exec, stream)`` etc.).
drv = _Driver()


def raise_driver(api: str, code: int):
    """Raise the exception for a driver call made through :data:`drv`."""
    raise error_for(api, code)
