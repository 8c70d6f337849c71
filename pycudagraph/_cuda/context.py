"""The current device and its context, per thread.

CUDA's driver calls (which the hot paths in :mod:`.fast` make) act on the context that is
current in the calling thread; a thread that has never called the runtime has none.
:func:`ensure_device` makes the current device's primary context current in this thread
once (``cudaGetDevice`` + ``cudaFree(0)``) and remembers it in a thread-local, so every
later check is one attribute read.

:data:`seen` records the devices made current so far; while only one has been, the
multi-device checks of the objects above (:mod:`pycudagraph.runtime.device`) are skipped, so a
single-GPU program pays one attribute read for them.
"""

from __future__ import annotations

import threading

from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

from .check import call, runtime_name_text
from .no_gpu import WITHOUT_GPU, unavailable

__all__ = ["ensure_device", "set_device", "switch_device", "current_device", "stream_device",
           "cuda_available", "process_checked",
           "thread_state", "on_first_use", "seen", "multi_hooks"]


class _ThreadState(threading.local):
    #: The device whose primary context is current in this thread, or None before the first call.
    device = None


thread_state = _ThreadState()


class _Seen:
    """The device ordinals made current in this process; ``multi`` once there are two.

    Setting ``multi`` runs :data:`multi_hooks` (the compiled hot calls of :mod:`.fast`
    follow it)."""

    def __init__(self):
        self.ordinals: set[int] = set()
        self.multi = False

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name == "multi":
            for hook in multi_hooks:
                hook()

    def note(self, ordinal: int) -> None:
        if ordinal not in self.ordinals:
            self.ordinals.add(ordinal)
            self.multi = len(self.ordinals) > 1


#: Called with no argument after ``seen.multi`` is set.
multi_hooks: list = []
seen = _Seen()
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
            raise unavailable("cudaGetDeviceCount", int(err), name, text,
                              f"kernels need a GPU to load and run; {WITHOUT_GPU}")
        for fn in on_first_use:
            fn()
        _process["checked"] = True


def process_checked() -> bool:
    """Whether this process has passed its check (a driver and at least one device), with
    no CUDA call: at exit, CUDA is synchronized only where it was used."""
    return _process["checked"]


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
    thread_state.visited = {dev}
    seen.note(dev)
    return dev


def set_device(ordinal: int) -> None:
    """Make ``ordinal`` the current device of this thread (``cudaSetDevice``)."""
    if not _process["checked"]:
        _check_process()
    call(rt.cudaSetDevice, int(ordinal))
    call(rt.cudaFree, 0)
    thread_state.device = int(ordinal)
    if getattr(thread_state, "visited", None) is None:
        thread_state.visited = set()
    thread_state.visited.add(int(ordinal))
    seen.note(int(ordinal))


def switch_device(ordinal: int) -> None:
    """Make ``ordinal`` current in this thread, cheaply when switching back and forth.

    The first switch to a device in a thread is :func:`set_device`; later ones are one
    ``cudaSetDevice`` (since CUDA 12 it makes the device's primary context current
    itself), which stream capture allows, unlike ``cudaFree``.
    """
    visited = getattr(thread_state, "visited", None)
    if visited is None:
        visited = thread_state.visited = set()
    if ordinal in visited:
        call(rt.cudaSetDevice, ordinal)
        thread_state.device = ordinal
    else:
        set_device(ordinal)


def current_device() -> int:
    """The calling thread's current device as CUDA has it now (``cudaGetDevice``).

    Unlike :func:`ensure_device` this asks every time, so a switch made by another
    library (``torch.cuda.set_device``, ``cupy.cuda.Device.use``) is seen; objects that
    remember their device are created with it.
    """
    if thread_state.device is None:
        return ensure_device()
    dev = call(rt.cudaGetDevice)
    if dev != thread_state.device:
        call(rt.cudaFree, 0)  # its primary context, current in this thread
        thread_state.device = dev
        seen.note(dev)
    return dev


def stream_device(handle: int) -> int:
    """The device a stream made elsewhere belongs to (``cuStreamGetDevice``, or
    ``cuStreamGetCtx`` + ``cuCtxGetDevice`` with cuda-bindings older than 12.8)."""
    stream = dr.CUstream(handle)
    fn = getattr(dr, "cuStreamGetDevice", None)
    if fn is not None:
        return int(call(fn, stream))
    ctx = call(dr.cuStreamGetCtx, stream)
    call(dr.cuCtxPushCurrent, ctx)
    try:
        return int(call(dr.cuCtxGetDevice))
    finally:
        dr.cuCtxPopCurrent()


def cuda_available() -> bool:
    """True when a driver and at least one device are usable; never raises."""
    try:
        ensure_device()
        return True
    except Exception:
        return False
