"""One check for every raw call: return codes become exceptions, and the trace sees each call.

:func:`call` runs a ``cuda.bindings`` function and returns its values or raises the
:class:`~pycudagraph.errors.CudaError` that :func:`error_for` builds. The ctypes hot calls in
:mod:`.fast` report through :func:`report`, the same path. Nothing here touches CUDA at import.
"""

from __future__ import annotations

import sys

from cuda.bindings import driver as dr
from cuda.bindings import nvrtc
from cuda.bindings import runtime as rt

from ..errors import CudaError, CudaNotAvailableError
from .no_gpu import unavailable

__all__ = ["call", "open_driver", "DRIVER_LIBRARY", "error_for", "report", "capture_watchers",
           "capture_keeps", "set_tracer", "tracer", "tracer_hooks", "runtime_name_text",
           "decode"]

#: One list per active ``capture`` block; every failed raw call is appended to each.
capture_watchers: list[list] = []

#: One list per open ``pcg.capture`` block: what work issued through pycudagraph inside it
#: points at (argument packs, buffers, host arrays, kernels); the captured graph's ledger
#: takes it. :mod:`pycudagraph._lifetime` names it ``capture_keeps``; the compiled launch
#: appends to it (``_native_method.c``).
capture_keeps: list[list] = []

#: Set by :mod:`pycudagraph.runtime.trace` (through :func:`set_tracer`) while a trace is
#: recording; ``None`` otherwise. Called as ``tracer(api, args, result)``.
tracer = None

#: Called with no argument after :func:`set_tracer` changed the tracer (the compiled hot
#: calls of :mod:`.fast` hand every call to the traced route while one records).
tracer_hooks: list = []

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


def set_tracer(fn) -> object:
    """Install ``fn`` as the tracer (``None`` to stop); returns the previous one."""
    global tracer
    previous, tracer = tracer, fn
    for hook in tracer_hooks:
        hook()
    return previous


def decode(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def runtime_name_text(err) -> tuple[str, str]:
    """(name, description) of a ``cudaError_t`` (``cudaGetErrorName`` / ``cudaGetErrorString``)."""
    name = rt.cudaGetErrorName(err)[1]
    text = rt.cudaGetErrorString(err)[1]
    return decode(name), decode(text)


def _driver_name_text(code: int) -> tuple[str, str]:
    try:
        name = dr.CUresult(code).name
    except ValueError:
        name = f"CUresult({code})"
    try:
        err, text = dr.cuGetErrorString(dr.CUresult(code))
        text = decode(text) if not err else name
    except Exception:  # no driver library: the name is all we have
        text = name
    return name, text


def _nvrtc_name_text(err) -> tuple[str, str]:
    text = decode(nvrtc.nvrtcGetErrorString(err)[1])
    return text, text


#: The driver library's name: what :func:`open_driver` opens unless told another.
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def open_driver(name: str, hint: str):
    """``ctypes.CDLL`` of the library ``name`` (:data:`DRIVER_LIBRARY`, or a stand-in such as
    the tests' driver stub); :class:`~pycudagraph.errors.CudaNotAvailableError` with ``hint``
    when it cannot be opened (``dlopen``)."""
    import ctypes
    try:
        return ctypes.CDLL(name)
    except OSError as exc:
        raise CudaNotAvailableError("dlopen", 0, "CUDA_ERROR_NO_DEVICE",
                                    f"cannot load {name}: {exc}", hint) from exc


def error_for(api: str, err, hint: str = "", cls: type | None = None) -> CudaError:
    """Build the exception for a failed raw call and clear CUDA's sticky last error.

    Parameters
    ----------
    api : str
        Name of the raw call that failed.
    err : cudaError_t, CUresult, nvrtcResult or int
        Its return code; a plain ``int`` is read as a driver ``CUresult``.
    hint : str
        One more sentence for the message.
    cls : type, optional
        The exception class (default :class:`CudaError`, or :class:`CudaNotAvailableError`
        for "no driver / no device" codes).
    """
    if isinstance(err, rt.cudaError_t):
        name, text = runtime_name_text(err)
        rt.cudaGetLastError()  # the runtime keeps the last error: do not blame the next call
    elif isinstance(err, nvrtc.nvrtcResult):
        name, text = _nvrtc_name_text(err)
    else:
        name, text = _driver_name_text(int(err))
    for failures in capture_watchers:
        failures.append(f"{api} ({name})")
    if cls is None and name in _NOT_AVAILABLE:  # says what is missing (no driver, no GPU)
        return unavailable(api, int(err), name, text, hint)
    return (cls or CudaError)(api, int(err), name, text, hint)


def call(fn, *args):
    """Run one raw ``cuda.bindings`` call and check its return code.

    Returns ``None``, the single value, or a tuple of the values the call returns.
    Raises :class:`CudaError` naming the call when the code is not success.
    """
    try:
        res = fn(*args)
    except RuntimeError as exc:  # cuda.bindings could not load libcuda: no driver here
        name = fn.__name__
        if (type(exc).__name__ != "DynamicLibNotFoundError" or not name.startswith("cu")
                or name.startswith("cuda")):
            raise
        raise unavailable(name, 0, "CUDA_ERROR_NOT_INITIALIZED", str(exc)) from None
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


def report(api: str, rc: int, args: tuple, twin: str = "") -> None:
    """Trace and check a raw call made through ctypes (:mod:`.fast`); ``rc`` is a ``CUresult``.

    ``twin`` is the runtime function a driver call stands for: the error names both,
    ``cuGraphLaunch (cudaGraphLaunch) failed: ...``; the trace records ``api``.
    """
    if tracer is not None:
        tracer(api, args, (rc,))
    if rc:
        raise error_for(f"{api} ({twin})" if twin else api, rc)
