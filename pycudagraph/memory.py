"""Device and pinned host memory, and pointers from any array-like object.

:func:`device_pointer` turns a :class:`DeviceBuffer`, anything with
``__cuda_array_interface__`` (CuPy, PyTorch, Numba), anything with DLPack on a CUDA
device, or a raw integer into the integer device address kernels and copies take.
:func:`host_pointer` does the same for host memory (numpy arrays, :class:`PinnedBuffer`).
"""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np

from . import _cuda
from ._cuda import call, rt
from ._cuda.device import current_device, seen, thread_state
from ._lifetime import release
from .device import Device, device
from .stream import stream_handle

__all__ = ["DeviceBuffer", "PinnedBuffer", "device_pointer", "host_pointer", "nbytes_of"]

_LEGACY_STREAM = 1  # cudaStreamLegacy
_H2D = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
_D2H = rt.cudaMemcpyKind.cudaMemcpyDeviceToHost


class DeviceBuffer:
    """Linear device memory from ``cudaMalloc``.

    Parameters
    ----------
    nbytes : int
        Size in bytes (> 0).

    Notes
    -----
    Allocated on the current device (:attr:`device`). Freed with ``cudaFree`` by
    :meth:`free` or when collected. Exposes ``__cuda_array_interface__`` as bytes, so
    ``cupy.asarray(buf)`` views it.
    """

    __slots__ = ("ptr", "nbytes", "_fin", "_dev", "__weakref__")

    def __init__(self, nbytes: int):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError(f"DeviceBuffer needs a positive size in bytes, got {nbytes}")
        self._dev = current_device()
        raw = call(rt.cudaMalloc, nbytes)
        self.ptr: int = int(raw)
        self.nbytes: int = nbytes
        self._fin = release(self, rt.cudaFree, self.ptr)

    @classmethod
    def from_array(cls, array, stream=None) -> "DeviceBuffer":
        """A new buffer holding a copy of a host array (``cudaMemcpy``)."""
        arr = np.ascontiguousarray(array)
        buf = cls(max(arr.nbytes, 1))
        buf.copy_from(arr, stream=stream)
        return buf

    @property
    def handle(self) -> int:
        """The device address (what ``cudaMalloc`` returned)."""
        return self.ptr

    def __int__(self) -> int:
        return self.ptr

    @property
    def device(self) -> Device:
        """The device the memory was allocated on."""
        return Device._of(self._dev)

    def _on_own_device(self):
        """Its device current for a synchronous call (a no-op on one GPU): the legacy
        stream synchronized after ``cudaMemcpy`` / ``cudaMemset`` is the current device's."""
        if seen.multi and self._dev != thread_state.device:
            return device._trusted(self._dev)
        return contextlib.nullcontext()

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3, "strides": None}

    def _check_host(self, array, what: str) -> np.ndarray:
        if self.ptr == 0:
            raise ValueError("this DeviceBuffer was freed")
        arr = np.asarray(array)
        if not arr.flags.c_contiguous:
            raise ValueError(f"{what} needs a C-contiguous host array")
        if arr.nbytes > self.nbytes:
            raise ValueError(f"{what}: the array has {arr.nbytes} bytes but the buffer only {self.nbytes}")
        return arr

    def copy_from(self, host_array, stream=None) -> None:
        """Copy a host array into the buffer's first bytes.

        Calls ``cudaMemcpy`` then ``cudaStreamSynchronize(cudaStreamLegacy)``, so the data
        is on the device when it returns, whatever stream reads it next (a pageable
        copy may otherwise still be in flight). With ``stream`` it calls
        ``cudaMemcpyAsync`` on it; keep ``host_array`` alive until the stream gets there.
        """
        arr = self._check_host(host_array, "copy_from")
        src = arr.ctypes.data
        if stream is None:
            with self._on_own_device():
                call(rt.cudaMemcpy, self.ptr, src, arr.nbytes, _H2D)
                call(rt.cudaStreamSynchronize, _LEGACY_STREAM)
        else:
            call(rt.cudaMemcpyAsync, self.ptr, src, arr.nbytes, _H2D, stream_handle(stream))

    def copy_to(self, host_array=None, stream=None):
        """Copy the buffer's first bytes into a host array and return it.

        With ``host_array=None`` a ``uint8`` array of :attr:`nbytes` is made.
        Calls ``cudaMemcpy`` (or ``cudaMemcpyAsync`` on ``stream``). The synchronous
        form does not wait for work on non-blocking streams: synchronize those first.
        """
        if host_array is None:
            host_array = np.empty(self.nbytes, dtype=np.uint8)
        arr = self._check_host(host_array, "copy_to")
        if not arr.flags.writeable:
            raise ValueError("copy_to needs a writeable host array")
        if stream is None:
            with self._on_own_device():
                call(rt.cudaMemcpy, arr.ctypes.data, self.ptr, arr.nbytes, _D2H)
        else:
            call(rt.cudaMemcpyAsync, arr.ctypes.data, self.ptr, arr.nbytes, _D2H, stream_handle(stream))
        return host_array

    def to_numpy(self, dtype=np.float32, shape=None) -> np.ndarray:
        """A new host array with the buffer's contents (``cudaMemcpy``)."""
        dtype = np.dtype(dtype)
        count = self.nbytes // dtype.itemsize
        out = np.empty(count, dtype=dtype)
        self.copy_to(out)
        return out.reshape(shape) if shape is not None else out

    def zero(self, stream=None) -> None:
        """Set every byte to 0 (``cudaMemset`` then ``cudaStreamSynchronize(cudaStreamLegacy)``,
        or ``cudaMemsetAsync`` on ``stream``)."""
        if stream is None:
            with self._on_own_device():
                call(rt.cudaMemset, self.ptr, 0, self.nbytes)
                call(rt.cudaStreamSynchronize, _LEGACY_STREAM)
        else:
            call(rt.cudaMemsetAsync, self.ptr, 0, self.nbytes, stream_handle(stream))

    def free(self) -> None:
        """Free the memory now (``cudaFree``); idempotent."""
        self._fin()
        self.ptr = 0

    def __repr__(self) -> str:
        return f"<pycudagraph.DeviceBuffer ptr=0x{self.ptr:x} nbytes={self.nbytes}>"


class PinnedBuffer:
    """Page-locked host memory from ``cudaMallocHost``.

    Copies between pinned memory and the device run asynchronously and can be graph
    memcpy nodes. :meth:`array` gives a numpy view of the memory.
    """

    __slots__ = ("ptr", "nbytes", "_fin", "__weakref__")

    def __init__(self, nbytes: int):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError(f"PinnedBuffer needs a positive size in bytes, got {nbytes}")
        _cuda.ensure_device()
        self.ptr: int = int(call(rt.cudaMallocHost, nbytes))
        self.nbytes: int = nbytes
        self._fin = release(self, rt.cudaFreeHost, self.ptr)

    @property
    def handle(self) -> int:
        return self.ptr

    def __int__(self) -> int:
        return self.ptr

    def array(self, dtype=np.uint8, shape=None) -> np.ndarray:
        """A numpy view of the pinned memory; it keeps this buffer alive."""
        if self.ptr == 0:
            raise ValueError("this PinnedBuffer was freed")
        dtype = np.dtype(dtype)
        raw = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        arr = np.frombuffer(raw, dtype=np.uint8)[: self.nbytes - self.nbytes % dtype.itemsize].view(dtype)
        arr = arr.reshape(shape) if shape is not None else arr
        _keep = _ViewOwner(self)
        raw._pycudagraph_owner = _keep  # the ctypes object holds the buffer alive
        return arr

    def free(self) -> None:
        """Free the memory now (``cudaFreeHost``); idempotent. Views become invalid."""
        self._fin()
        self.ptr = 0

    def __repr__(self) -> str:
        return f"<pycudagraph.PinnedBuffer ptr=0x{self.ptr:x} nbytes={self.nbytes}>"


class _ViewOwner:
    __slots__ = ("buffer",)

    def __init__(self, buffer):
        self.buffer = buffer


# ----------------------------------------------------------------------------------
# Pointers from objects

_KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 2, 3, 13


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_pointer(obj) -> int:
    dev_type, _ = obj.__dlpack_device__()
    if dev_type not in (_KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED):
        raise TypeError(f"{type(obj).__name__} lives on DLPack device type {dev_type}, not a CUDA device")
    capsule = obj.__dlpack__()
    # DLManagedTensor starts with its DLTensor; the capsule is left unconsumed, so
    # its destructor releases the producer's reference as the protocol says.
    addr = _capsule_pointer(capsule, b"dltensor")
    tensor = _DLTensor.from_address(addr)
    return (tensor.data or 0) + tensor.byte_offset


def device_pointer(obj) -> int:
    """The device address of ``obj`` as an integer.

    Accepts an ``int``, :class:`DeviceBuffer`, an object with
    ``__cuda_array_interface__`` (CuPy, PyTorch, Numba) or DLPack on a CUDA device.

    Raises
    ------
    TypeError
        For host objects (numpy arrays) and anything else without a device address.
    """
    if type(obj) is int:
        return obj
    if isinstance(obj, (DeviceBuffer, PinnedBuffer)):
        return obj.ptr
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    if isinstance(obj, np.ndarray):
        raise TypeError("a numpy array lives in host memory: copy it to a DeviceBuffer first "
                        "(DeviceBuffer.from_array) or pass a device array")
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack_pointer(obj)
    if isinstance(obj, int):  # numpy integers, IntEnum ...
        return int(obj)
    if hasattr(obj, "getPtr") or type(obj).__name__ in ("CUdeviceptr",):
        return int(obj)
    raise TypeError(f"cannot get a device pointer from {type(obj).__name__}: expected an int, "
                    "DeviceBuffer, or an object with __cuda_array_interface__ or DLPack")


def host_pointer(obj) -> int:
    """The host address of a numpy array (``__array_interface__``) or :class:`PinnedBuffer`."""
    if isinstance(obj, PinnedBuffer):
        return obj.ptr
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise ValueError("host memory for a copy must be C-contiguous")
        return obj.ctypes.data
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    raise TypeError(f"cannot get a host pointer from {type(obj).__name__}")


def nbytes_of(obj) -> int | None:
    """Size in bytes of an array-like or buffer, or ``None`` when it is unknown (raw int)."""
    n = getattr(obj, "nbytes", None)
    if n is not None:
        return int(n)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        count = 1
        for s in cai["shape"]:
            count *= int(s)
        return count * np.dtype(cai["typestr"]).itemsize
    return None
