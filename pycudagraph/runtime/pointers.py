"""Pointers from any array-like object: the addresses kernels and copies take.

:func:`device_pointer` turns a :class:`~pycudagraph.DeviceBuffer`, anything with
``__cuda_array_interface__`` (CuPy, PyTorch, Numba), anything with DLPack on a CUDA
device, or a raw integer into the integer device address. :func:`host_pointer` does the
same for host memory (numpy arrays, :class:`~pycudagraph.PinnedBuffer`).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import ArgumentError
from .values import ADDRESS_MAX, address_arg, bool_arg, int_arg, is_int, short_repr

__all__ = ["device_pointer", "host_pointer", "host_array_arg", "nbytes_of", "register_buffer"]

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
    try:
        dev_type, _ = obj.__dlpack_device__()
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{type(obj).__name__}.__dlpack_device__() must give (device type, "
                            f"device id): {exc}") from None
    if dev_type not in (_KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED):
        raise ArgumentError(f"{type(obj).__name__} lives on DLPack device type {dev_type}, "
                            "not a CUDA device")
    capsule = obj.__dlpack__()
    # DLManagedTensor starts with its DLTensor; the capsule is left unconsumed, so
    # its destructor releases the producer's reference as the protocol says.
    try:
        addr = _capsule_pointer(capsule, b"dltensor")
    except (ValueError, TypeError, ctypes.ArgumentError) as exc:
        raise ArgumentError(f"{type(obj).__name__}.__dlpack__() did not give a DLPack "
                            f"capsule: {exc}") from None
    tensor = _DLTensor.from_address(addr)
    return (tensor.data or 0) + tensor.byte_offset


def _interface_pointer(obj, name: str, iface) -> int:
    """``iface["data"][0]`` of an array interface dict, checked (``name`` names the protocol)."""
    if type(iface) is dict:  # the common case, on every launch of an array: no more checks
        data = iface.get("data")
        if type(data) is tuple and len(data) == 2:
            addr = data[0]
            if type(addr) is int and 0 <= addr <= ADDRESS_MAX:
                return addr
    what = f"{type(obj).__name__}.{name}"
    if not isinstance(iface, dict):
        raise ArgumentError(f"{what} must be a dict, got {short_repr(iface)} "
                            f"({type(iface).__name__})")
    data = iface.get("data")
    if not isinstance(data, tuple) or len(data) != 2:
        raise ArgumentError(f"{what}['data'] must be a tuple (address, read_only), got "
                            f"{short_repr(data)}")
    if not is_int(data[0]):
        raise ArgumentError(f"{what}['data'][0] must be an int address, got "
                            f"{short_repr(data[0])} ({type(data[0]).__name__})")
    return address_arg(data[0], f"{what}['data'][0]")


def device_pointer(obj) -> int:
    """The device address of ``obj`` as an integer.

    Accepts an ``int`` or numpy integer in 0 .. 2**64-1, :class:`DeviceBuffer`, an object
    with ``__cuda_array_interface__`` (CuPy, PyTorch, Numba) or DLPack on a CUDA device.
    No CUDA call.

    Raises
    ------
    ArgumentError
        For host objects (numpy arrays), bools, negative or wider than 64-bit integers,
        a malformed ``__cuda_array_interface__`` and anything else without a device
        address (it is a ``TypeError`` and a ``ValueError``).
    ClosedError
        For a :class:`DeviceBuffer` or :class:`PinnedBuffer` that was freed.
    """
    if type(obj) is int and 0 <= obj <= ADDRESS_MAX:
        return obj
    if isinstance(obj, _BUFFERS):
        ptr = obj.ptr
        return ptr if ptr else int(obj)  # int() of a freed buffer raises its ClosedError
    cai = getattr(obj, "__cuda_array_interface__", None)  # CuPy, PyTorch, Numba arrays
    if cai is not None:
        return _interface_pointer(obj, "__cuda_array_interface__", cai)
    if is_int(obj):  # numpy integers, IntEnum, out-of-range ints (refused there)
        return address_arg(obj, "device pointer")
    if isinstance(obj, (bool, np.bool_)):
        raise ArgumentError(f"a device pointer cannot be a bool ({obj!r})")
    if isinstance(obj, (np.ndarray, np.generic)):
        raise ArgumentError("a numpy array lives in host memory: copy it to a DeviceBuffer "
                            "first (DeviceBuffer.from_array) or pass a device array")
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack_pointer(obj)
    if hasattr(obj, "getPtr") or type(obj).__name__ in ("CUdeviceptr",):
        return int(obj)
    raise ArgumentError(f"cannot get a device pointer from {short_repr(obj)} "
                        f"({type(obj).__name__}): expected an int, DeviceBuffer, or an object "
                        "with __cuda_array_interface__ or DLPack")


def host_pointer(obj, writable: bool = False) -> int:
    """The host address of a numpy array (``__array_interface__``) or :class:`PinnedBuffer`.

    No CUDA call.

    Parameters
    ----------
    obj : numpy.ndarray, PinnedBuffer or an object with ``__array_interface__``
    writable : bool
        The memory will be written (the destination of a copy): a read-only array is
        refused.

    Raises
    ------
    ArgumentError
        For a numpy scalar (its ``__array_interface__`` address belongs to a temporary
        array, freed at once), a non-contiguous or read-only (with ``writable``) array,
        a malformed ``__array_interface__`` and anything else.
    """
    writable = bool_arg(writable, "host_pointer: writable")
    if isinstance(obj, _BUFFERS) and not isinstance(obj, _DEVICE_BUFFERS):
        return int(obj)  # a PinnedBuffer; a freed one raises its ClosedError
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise ArgumentError("host memory for a copy must be C-contiguous "
                                "(numpy.ascontiguousarray makes a contiguous copy)")
        if writable and not obj.flags.writeable:
            raise ArgumentError("the destination of a copy is a read-only numpy array")
        return obj.ctypes.data
    if isinstance(obj, np.generic):
        raise ArgumentError(f"a numpy scalar ({short_repr(obj)}) has no memory of its own: its "
                            "__array_interface__ points into a temporary array; use a numpy "
                            "array (numpy.array([x]))")
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        data = iface.get("data") if isinstance(iface, dict) else None
        if writable and isinstance(data, tuple) and len(data) == 2 and data[1]:
            raise ArgumentError(f"the destination of a copy is read-only memory "
                                f"({type(obj).__name__}.__array_interface__ says so)")
        return _interface_pointer(obj, "__array_interface__", iface)
    raise ArgumentError(f"cannot get a host pointer from {short_repr(obj)} "
                        f"({type(obj).__name__}): expected a numpy array, a PinnedBuffer or "
                        "an object with __array_interface__")


def host_array_arg(obj, what: str, write: bool = False) -> np.ndarray:
    """A C-contiguous numpy view of host memory for ``DeviceBuffer.copy_from`` / ``copy_to``.

    For reading (``write=False``) anything numpy reads as numbers or bytes will do (a list,
    a scalar, a buffer); for writing only memory that is there to write: a writeable numpy
    array, buffer or array-like that shares its memory (a PyTorch CPU tensor); a list, a
    tuple, a scalar or ``bytes`` would be converted into a copy that nobody sees.
    """
    if write and (isinstance(obj, _COPIED) or not (
            isinstance(obj, np.ndarray) or hasattr(obj, "__array_interface__")
            or hasattr(obj, "__array__") or hasattr(obj, "__buffer__")
            or isinstance(obj, (bytearray, memoryview)))):
        raise ArgumentError(f"{what} needs a numpy array (or a writeable buffer) to write "
                            f"into, got {short_repr(obj)} ({type(obj).__name__})")
    if obj is None or isinstance(obj, (str, dict, set)):
        raise ArgumentError(f"{what} needs a host array, got {short_repr(obj)} "
                            f"({type(obj).__name__})")
    try:
        arr = np.asarray(obj)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{what}: {short_repr(obj)} is not a host array ({exc})") from None
    if arr.dtype.hasobject or arr.dtype.kind == "U":
        raise ArgumentError(f"{what} needs numbers or bytes, got an array of {arr.dtype} "
                            f"from {type(obj).__name__}")
    if not arr.flags.c_contiguous:
        raise ArgumentError(f"{what} needs a C-contiguous host array "
                            "(numpy.ascontiguousarray makes one)")
    if write and not arr.flags.writeable:
        raise ArgumentError(f"{what} needs a writeable host array; this one is read-only")
    return arr


#: Values numpy copies into a new array: nothing written there reaches the caller.
_COPIED = (list, tuple, int, float, complex, bool, str, bytes, dict, set, np.generic)


def nbytes_of(obj) -> int | None:
    """Size in bytes of an array-like or buffer, or ``None`` when it is unknown (raw int)."""
    n = getattr(obj, "nbytes", None)
    if n is not None:
        return int_arg(n, f"{type(obj).__name__}.nbytes", 0)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        what = f"{type(obj).__name__}.__cuda_array_interface__"
        try:
            count = 1
            for s in cai["shape"]:
                count *= int_arg(s, f"{what}['shape']", 0)
            return count * np.dtype(cai["typestr"]).itemsize
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ArgumentError):
                raise
            raise ArgumentError(f"{what} needs 'shape' (ints) and 'typestr' (a numpy type "
                                f"string): {exc!r}") from None
    return None
