"""Pointers from any array-like object: the addresses kernels and copies take.

:func:`device_pointer` turns a :class:`~pycudagraph.DeviceBuffer`, anything with
``__cuda_array_interface__`` (CuPy, PyTorch, Numba), anything with DLPack on a CUDA
device, or a raw integer into the integer device address. :func:`host_pointer` does the
same for host memory (numpy arrays, :class:`~pycudagraph.PinnedBuffer`).
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["device_pointer", "host_pointer", "nbytes_of", "register_buffer"]

#: pycudagraph's buffer classes (:mod:`pycudagraph.runtime.memory` registers them): their
#: ``int()`` is their live address, or raises ClosedError once they are freed.
_BUFFERS: tuple = ()
_DEVICE_BUFFERS: tuple = ()


def register_buffer(cls, device: bool | None = None) -> None:
    """Treat ``cls`` objects as pycudagraph buffers (``int(obj)`` is the checked address)."""
    global _BUFFERS, _DEVICE_BUFFERS
    _BUFFERS += (cls,)
    if device is None:
        device = cls.__name__ == "DeviceBuffer"
    if device:
        _DEVICE_BUFFERS += (cls,)


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
    ClosedError
        For a :class:`DeviceBuffer` or :class:`PinnedBuffer` that was freed.
    """
    if type(obj) is int:
        return obj
    if isinstance(obj, _BUFFERS):
        ptr = obj.ptr
        return ptr if ptr else int(obj)  # int() of a freed buffer raises its ClosedError
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
    if isinstance(obj, _BUFFERS) and not isinstance(obj, _DEVICE_BUFFERS):
        return int(obj)  # a PinnedBuffer; a freed one raises its ClosedError
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
