"""Python values -> what one kernel parameter's ``struct`` format packs.

:func:`converter` gives, for one :class:`~pycudagraph.compile.signature.Param`, the
function that turns the value a user passes into what its slot packs (a device address
from an array, the bits of a bfloat16 or fp8 (:mod:`.small_floats`), the bytes of a
struct), checking it as a ``float`` or ``int`` parameter checks its value. For ints and
floats ``struct`` checks the type and range, and the converter only refuses ``True`` /
``False`` (bools are for ``bool`` parameters); :func:`fast_converter` is ``None`` there, as
the compiled route refuses bools itself. A parameter with its own ``convert`` (a kernel
made elsewhere) uses that one. No CUDA call.
"""

from __future__ import annotations

import ctypes
import operator
import struct

import numpy as np

from ..runtime.pointers import device_pointer
from . import small_floats
from .signature import VECTOR_TYPES, Param

__all__ = ["converter", "fast_converter", "pointer_value"]


def _struct_bytes(param: Param, value) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, (np.void, np.ndarray, np.generic)):  # np.float32(2.0) has its bytes
        data = np.asarray(value).tobytes()
    elif isinstance(value, (ctypes.Structure, ctypes.Union, ctypes.Array)):
        data = bytes(value)
    else:
        raise TypeError("a struct argument must be a numpy structured scalar, a ctypes "
                        "Structure or bytes (a parameter of unknown type: a numpy scalar of "
                        "its size, such as np.float32(2.0), or give signature=)")
    if param.size is not None and len(data) != param.size:
        raise ValueError(f"the value has {len(data)} bytes but the parameter has {param.size}")
    return data


def _vector_bytes(param: Param, value) -> bytes:
    if isinstance(value, (np.void, bytes)):
        return _struct_bytes(param, value)
    fmt, count, _ = VECTOR_TYPES[param.ctype]
    if isinstance(value, np.ndarray):
        if value.dtype.names is not None:
            return _struct_bytes(param, value)
        want = np.dtype(fmt)
        if value.dtype.hasobject or value.dtype.kind not in "iuf":
            raise TypeError(f"{param.ctype} takes {count} {want} values, not an array of "
                            f"{value.dtype}")
        if value.dtype.itemsize != want.itemsize or (value.dtype.kind == "f") != (fmt in "fd"):
            # a float64 array for a float4 holds other numbers than the caller sees packed
            raise TypeError(f"{param.ctype} takes {count} {want} values, not an array of "
                            f"{value.dtype} ({value.dtype.itemsize}-byte elements); convert "
                            f"it first: .astype(np.{want})")
        value = value.reshape(-1).tolist()
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{param.ctype} takes a tuple or list of {count} numbers (or its "
                        f"bytes), not {type(value).__name__}")
    if len(value) != count:
        raise ValueError(f"{param.ctype} needs {count} values, got {len(value)}")
    items = ([small_floats.real(v, param.ctype) for v in value] if fmt in "fd"
             else [operator.index(_not_bool(v, param.ctype, "int")) for v in value])  # no floats
    return struct.pack("<" + fmt * count, *items).ljust(param.size, b"\0")


def _not_bool(value, ctype: str, number: str):
    """``value``, unless it is True or False: those are for ``bool`` parameters; anywhere
    else a flag packed as 1 or 0 is most likely an argument in the wrong place."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{ctype} takes no bool (True and False are for bool parameters); "
                        f"pass {number}({value!r}) if the number is meant")
    return value


def _number_check(param: Param):
    """The check of an ``int`` or ``float`` parameter's value before ``struct`` packs it:
    ``struct`` takes True as 1 (and a numpy bool as 1.0), which the parameter must not."""
    ctype, word = param.ctype, param.kind

    def number(value):
        t = type(value)
        return value if t is int or t is float else _not_bool(value, ctype, word)
    return number


def _check_bool(value):
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise TypeError("a bool parameter takes True/False (or 0/1)")


def pointer_value(value) -> int:
    """A device address from a pointer argument; ``True``/``False`` and floats (numpy's
    too: ``np.float64(4096.0)``) are not addresses."""
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a pointer parameter takes a device array, DeviceBuffer or int "
                        f"address, not bool ({value!r})")
    if (isinstance(value, (float, complex, str, bytes, np.floating, np.complexfloating))
            or value is None):
        raise TypeError("a pointer parameter takes a device array, DeviceBuffer or int "
                        f"address, not {type(value).__name__}")
    return device_pointer(value)


# C type -> (attribute of the pycudagraph object holding the value, raw types accepted)
_HANDLES = {
    "cudaGraphConditionalHandle": ("handle", ("cudaGraphConditionalHandle",), "a ConditionalHandle"),
    "cudaGraphExec_t": ("handle", ("cudaGraphExec_t", "CUgraphExec"), "a GraphExec"),
    "cudaGraphDeviceNode_t": ("device_node", ("cudaGraphDeviceNode_t", "CUgraphDeviceNode", "int"),
                              "a device-updatable KernelNode"),
}


def _handle_converter(param: Param):
    """The value of a graph handle argument from its pycudagraph object, a raw handle or an int."""
    attr, raw_types, wanted = _HANDLES[param.ctype]

    def convert(value):
        if type(value) is int or isinstance(value, np.integer):
            return int(value)
        raw = getattr(value, attr, value)
        if type(raw).__name__ not in raw_types or isinstance(raw, bool):
            raise TypeError(f"{param.ctype} takes {wanted} (or its raw handle or an int)")
        return int(raw)
    return convert


def converter(param: Param):
    """The function that turns a Python value into what the slot's format packs, or None."""
    if param.convert is not None:
        return param.convert
    kind = param.kind
    if kind == "pointer":
        return pointer_value
    if kind == "handle":
        return _handle_converter(param)
    if kind == "bool":
        return _check_bool
    if kind == "half":
        return small_floats.half_value
    if kind == "bfloat16":
        return small_floats.bfloat16_bits
    if kind == "fp8":
        fmt = param.ctype.rsplit("_", 1)[-1]
        return lambda v, f=fmt: small_floats.fp8_bits(v, f)
    if kind == "struct":
        return lambda v, p=param: _struct_bytes(p, v)
    if kind == "vector":
        return lambda v, p=param: _vector_bytes(p, v)
    if kind in ("int", "float"):
        return _number_check(param)  # struct checks the type and range; bools are refused here
    return None


def fast_converter(param: Param, conv):
    """What the compiled route calls for this parameter: ``conv`` (its :func:`converter`),
    or ``None`` for a plain ``int`` or ``float``, which the C code packs and checks itself
    (refusing bools as the converter does)."""
    return None if param.convert is None and param.kind in ("int", "float") else conv
