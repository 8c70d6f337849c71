"""The current device and its context, per thread.

CUDA's driver calls (which the hot paths in :mod:`.fast` make) act on the context that is
current in the calling thread; a thread that has never called the runtime has none.
:func:`ensure_device` makes the current device's primary context current in this thread
once (``cudaGetDevice`` + ``cudaFree(0)``) and remembers it in a thread-local, so every
later check is one attribute read.
"""

from __future__ import annotations

import threading

from cuda.bindings import runtime as rt

from ..errors import CudaNotAvailableError
from .check import call, runtime_name_text

__all__ = ["ensure_device", "set_device", "cuda_available", "thread_state", "on_first_use"]


class _ThreadState(threading.local):
    #: The device whose primary context is current in this thread, or None before the first call.
    device = None


thread_state = _ThreadState()
_lock = threading.Lock()
_process: dict = {"checked": False}
#: Functions run once per process before the first device use (the ctypes table of .fast).
on_first_use: list = []


def _check_process() -> None:
    """Once per process: a driver and at least one device (``cudaGetDeviceCount``)."""
    with _lock:
        if _process["checked"]:
            return
        err, count = rt.cudaGetDeviceCount()
        if err or count == 0:
            name, text = (runtime_name_text(err) if err
                          else ("cudaErrorNoDevice", "no CUDA-capable device is detected"))
            rt.cudaGetLastError()
            raise CudaNotAvailableError(
                "cudaGetDeviceCount", int(err), name, text,
                "pycudagraph needs an NVIDIA GPU and driver; none is usable on this machine")
        for fn in on_first_use:
            fn()
        _process["checked"] = True


def ensure_device() -> int:
    """Make the current device's primary context current in this thread; return its ordinal.

    Calls ``cudaGetDeviceCount`` (once per process), then ``cudaGetDevice`` and
    ``cudaFree(0)`` (once per thread). Raises :class:`CudaNotAvailableError` with one clear
    sentence when there is no driver or no device.
    """
    dev = thread_state.device
    if dev is not None:
        return dev
    if not _process["checked"]:
        _check_process()
    dev = call(rt.cudaGetDevice)
    call(rt.cudaFree, 0)
    thread_state.device = dev
    return dev


def set_device(ordinal: int) -> None:
    """Make ``ordinal`` the current device of this thread (``cudaSetDevice``)."""
    if not _process["checked"]:
        _check_process()
    call(rt.cudaSetDevice, int(ordinal))
    call(rt.cudaFree, 0)
    thread_state.device = int(ordinal)


def cuda_available() -> bool:
    """True when a driver and at least one device are usable; never raises."""
    try:
        ensure_device()
        return True
    except Exception:
        return False
