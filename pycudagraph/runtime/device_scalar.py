"""The device scalar that steers a conditional node captured with ``cap.if_`` /
``cap.while_`` / ``cap.switch``: its address and element type.

Accepted: a PyTorch tensor on the GPU, a CuPy array, anything with
``__cuda_array_interface__`` (one element each: their element type is known), a
:class:`~pycudagraph.DeviceBuffer` or an int device address (element type ``dtype=``,
``"int32"`` when not given). The setter kernel (``set_condition_of`` in
``kernels/graph_control.cu``) reads it by the code :data:`DTYPE_CODES` gives.
Framework objects are recognised by their attributes; nothing is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from .values import short_repr
from .memory import DeviceBuffer
from .pointers import device_pointer

__all__ = ["DeviceScalar", "device_scalar", "DTYPE_CODES"]

#: element type -> (the code the setter kernel reads, bytes)
DTYPE_CODES = {"int8": (0, 1), "uint8": (1, 1), "bool": (1, 1), "int16": (2, 2),
               "uint16": (3, 2), "int32": (4, 4), "uint32": (5, 4), "int64": (6, 8),
               "uint64": (7, 8), "float16": (8, 2), "bfloat16": (9, 2), "float32": (10, 4),
               "float64": (11, 8)}


@dataclass(frozen=True)
class DeviceScalar:
    """One element in device memory: ``ptr`` (its address), ``dtype`` (a name of
    :data:`DTYPE_CODES`) and ``owner`` (the object that keeps the memory alive)."""

    ptr: int
    dtype: str
    owner: object

    @property
    def code(self) -> int:
        """The element-type code the setter kernel reads. No CUDA call."""
        return DTYPE_CODES[self.dtype][0]


def _dtype_name(dtype, where: str) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in DTYPE_CODES:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name not in DTYPE_CODES:
        raise ArgumentError(f"{where}: element type {dtype!r} is not one of "
                            f"{sorted(DTYPE_CODES)}")
    return name


def device_scalar(obj, dtype=None, where: str = "flag") -> DeviceScalar:
    """The :class:`DeviceScalar` of ``obj`` (see the module docstring). No CUDA call.

    Raises
    ------
    ArgumentError
        A host object (numpy array, CPU tensor), more than one element, an element type
        the setter cannot read, or a ``dtype`` that contradicts the object's own.
    """
    own = None
    if type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr"):
        if not obj.is_cuda:
            raise ArgumentError(f"{where}: a PyTorch tensor on {obj.device}; it must be on the GPU")
        if obj.numel() != 1:
            raise ArgumentError(f"{where}: a PyTorch tensor of {obj.numel()} elements; it must "
                                "hold one (a device scalar)")
        own, ptr = _dtype_name(obj.dtype, where), int(obj.data_ptr())
    elif isinstance(obj, np.ndarray) or isinstance(obj, (bool, float, np.generic)):
        raise ArgumentError(f"{where}: {short_repr(obj)} is a host value; give a device scalar "
                            "(a one-element PyTorch tensor or CuPy array, a DeviceBuffer, an address)")
    elif not isinstance(obj, DeviceBuffer) and getattr(obj, "__cuda_array_interface__", None) is not None:
        cai = obj.__cuda_array_interface__
        count = int(np.prod(cai.get("shape", ()) or (1,)))
        if count != 1:
            raise ArgumentError(f"{where}: an array of {count} elements; it must hold one "
                                "(a device scalar)")
        own, ptr = _dtype_name(np.dtype(cai["typestr"]), where), int(cai["data"][0])
    else:
        try:
            ptr = device_pointer(obj)
        except TypeError as exc:
            raise ArgumentError(f"{where}: {exc}") from None
    if own is not None and dtype is not None and _dtype_name(dtype, where) != own:
        raise ArgumentError(f"{where}: dtype={dtype!r}, but the object holds {own}")
    name = own or _dtype_name(dtype if dtype is not None else "int32", where)
    if not ptr:
        raise ArgumentError(f"{where}: a null device address")
    nbytes = getattr(obj, "nbytes", None)
    if own is None and isinstance(nbytes, int) and nbytes < DTYPE_CODES[name][1]:
        raise ArgumentError(f"{where}: {nbytes} bytes hold no {name}")
    return DeviceScalar(ptr, name, obj)
