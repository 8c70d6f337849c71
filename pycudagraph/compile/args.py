"""Kernel argument packing: Python values -> the bytes a kernel launch reads.

One :class:`ArgPack` is one stable ctypes buffer laid out as::

    [ CUDA_KERNEL_NODE_PARAMS_v2 (72 bytes) | void* kernelParams[n] | argument slots ]

The header's ``kernelParams`` points at the pointer array and each pointer at its
slot, so the buffer's address is directly what ``cuLaunchKernel``,
``cuGraphAddKernelNode`` and ``cuGraphExecKernelNodeSetParams`` take. The whole pack is
written by one ``struct.pack_into``; one argument is rewritten in place with the
slot's own ``struct`` (no repacking of the others). The pack keeps a reference to
every Python object its slots point into, for as long as the pack lives.
"""

from __future__ import annotations

import ctypes
import operator
import struct

import numpy as np

from .. import _lifetime

from . import limits, small_floats
from .._cuda import fast
from .._cuda.structs import DIMS_OFFSET, KERNEL_NODE_PARAMS_FORMAT, KERNEL_PARAMS_FIELD
from ..errors import ArgumentError, ClosedError
from ..runtime.pointers import device_pointer
from .signature import VECTOR_TYPES, Param, signature_text

__all__ = ["Layout", "ArgPack", "dim3", "HEADER_SIZE"]

_HEADER = struct.Struct(KERNEL_NODE_PARAMS_FORMAT)
HEADER_SIZE = _HEADER.size  #: 72: the kernelParams array starts right after the header
_DIMS = struct.Struct("<7I")  # grid xyz, block xyz, shared memory
_FUNC = struct.Struct("<Q")  # the header's first field: func
_DIMS_OFFSET = DIMS_OFFSET


def dim3(value, what: str) -> tuple[int, int, int]:
    """Normalise a grid or block given as an int or a tuple of up to 3 positive ints.

    The common cases (an int, a 3-tuple of ints) are checked here in a few compares;
    everything else goes to :func:`pycudagraph.runtime.limits.dims`, which refuses strings,
    floats and bools with an :class:`ArgumentError` naming ``what``.
    """
    if type(value) is int and 0 < value < 4294967296:  # the common cases, checked cheaply
        return (value, 1, 1)
    if type(value) is tuple and len(value) == 3:
        x, y, z = value
        if (type(x) is int and type(y) is int and type(z) is int
                and 0 < x < 4294967296 and 0 < y < 4294967296 and 0 < z < 4294967296):
            return value
    return limits.dims(value, what)


def _struct_bytes(param: Param, value) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, (np.void, np.ndarray)):
        data = np.asarray(value).tobytes()
    elif isinstance(value, (ctypes.Structure, ctypes.Union, ctypes.Array)):
        data = bytes(value)
    else:
        raise TypeError("a struct argument must be a numpy structured scalar, a ctypes "
                        "Structure or bytes")
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
        if value.dtype.hasobject or value.dtype.kind not in "biuf":
            raise TypeError(f"{param.ctype} takes {count} numbers, not an array of {value.dtype}")
        value = value.reshape(-1).tolist()
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{param.ctype} takes a tuple or list of {count} numbers (or its "
                        f"bytes), not {type(value).__name__}")
    if len(value) != count:
        raise ValueError(f"{param.ctype} needs {count} values, got {len(value)}")
    items = ([small_floats.real(v, param.ctype) for v in value] if fmt in "fd"
             else [operator.index(v) for v in value])  # as an int parameter: no floats
    return struct.pack("<" + fmt * count, *items).ljust(param.size, b"\0")


def _check_bool(value):
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise TypeError("a bool parameter takes True/False (or 0/1)")


def _pointer(value) -> int:
    """A device address from a pointer argument; ``True``/``False`` are not addresses."""
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a pointer parameter takes a device array, DeviceBuffer or int "
                        f"address, not bool ({value!r})")
    if isinstance(value, (float, str, bytes)) or value is None:
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


def _converter(param: Param):
    """The function that turns a Python value into what the slot's format packs, or None."""
    kind = param.kind
    if kind == "pointer":
        return _pointer
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
    return None  # ints and floats: struct checks the type and range itself


class Layout:
    """Where each argument of one kernel lives in an :class:`ArgPack` buffer.

    Built once per kernel (structs need a known size: from the kernel image or
    given values). Holds the one ``struct.Struct`` that writes a whole pack and one
    per slot for single-argument rewrites.
    """

    def __init__(self, kernel_name: str, params: tuple[Param, ...]):
        for p in params:
            if p.size is None:
                raise ArgumentError(
                    f"{kernel_name}(): the size of struct parameter {p.index} '{p.name}' "
                    f"({p.ctype}) is unknown; load the kernel on a GPU or pass signature=")
        self.kernel_name = kernel_name
        self.params = params
        n = len(params)
        self.count = n
        ptr_end = HEADER_SIZE + 8 * n
        offsets, pos = [], ptr_end
        for p in params:
            pos = (pos + p.align - 1) // p.align * p.align
            offsets.append(pos)
            pos += p.size
        self.size = max(pos, ptr_end, HEADER_SIZE)
        self.offsets = tuple(offsets)
        self.pointers_offset = HEADER_SIZE
        value_fmt, cursor = "", ptr_end
        for p, off in zip(params, offsets):
            value_fmt += f"{off - cursor}x" if off > cursor else ""
            value_fmt += p.fmt
            cursor = off + p.size
        self.full = struct.Struct(KERNEL_NODE_PARAMS_FORMAT + f"{n}Q" + value_fmt)
        self.values = struct.Struct("<" + value_fmt) if n else None
        self.slots = tuple(struct.Struct("<" + p.fmt) for p in params)
        self.converters = tuple(_converter(p) for p in params)
        self.convert_at = tuple(i for i, c in enumerate(self.converters) if c is not None)
        self.fixup = struct.Struct(f"<{n}Q")
        self.buffer_type = ctypes.c_char * self.size
        self.index = {p.name: p.index for p in params}
        #: The compiled path's copy of this layout (None without it: ctypes path).
        self.native = fast.native_layout(params, offsets, self.size, self.converters)

    def convert(self, args) -> list:
        """Values ready for the layout's formats; raises :class:`ArgumentError` when one is wrong."""
        n = len(self.params)
        if not isinstance(args, (tuple, list)):
            if isinstance(args, (str, bytes, dict)) or not hasattr(args, "__iter__"):
                raise ArgumentError(f"{self.kernel_name}(): args must be a sequence of {n} "
                                    f"values, got {_short_repr(args)} ({type(args).__name__})")
            args = tuple(args)
        if len(args) != n:
            raise ArgumentError(f"{self.kernel_name}({signature_text(self.params)}) takes {n} "
                                f"argument{'s' if n != 1 else ''}, {len(args)} given")
        values = list(args)
        conv = self.converters
        try:
            for i in self.convert_at:
                values[i] = conv[i](values[i])
        except Exception:
            self.diagnose(args)
            raise
        return values

    def slot_index(self, key) -> int:
        """Index of a parameter given by position or name."""
        if isinstance(key, str):
            try:
                return self.index[key]
            except KeyError:
                raise ArgumentError(f"{self.kernel_name}() has no parameter named {key!r}; "
                                    f"it has {list(self.index)}") from None
        if isinstance(key, (bool, np.bool_)) or not hasattr(key, "__index__"):
            raise ArgumentError(f"{self.kernel_name}(): an argument index must be an int or a "
                                f"parameter name, got {_short_repr(key)} ({type(key).__name__})")
        try:
            i = int(key)
        except (TypeError, ValueError):  # a numpy array, say
            raise ArgumentError(f"{self.kernel_name}(): an argument index must be an int or a "
                                f"parameter name, got {_short_repr(key)}") from None
        if not 0 <= i < len(self.params):
            raise ArgumentError(f"{self.kernel_name}() has {len(self.params)} parameters; "
                                f"index {key} is out of range")
        return i

    def check_one(self, i: int, value):
        """Convert and pack one value into scratch space to find what is wrong with it."""
        p = self.params[i]
        try:
            conv = self.converters[i]
            packed = conv(value) if conv is not None else value
            self.slots[i].pack(packed)
            return packed
        except ClosedError:  # a freed buffer: say so, not "cannot take"
            raise
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            raise ArgumentError(
                f"{self.kernel_name}(): parameter {i} '{p.name}' ({p.ctype}) cannot take "
                f"{_short_repr(value)} of type {type(value).__name__}: {reason}") from None

    def diagnose(self, args) -> None:
        for i, value in enumerate(args):
            self.check_one(i, value)


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ArgPack:
    """A packed kernel launch: header, pointer array and argument values in one buffer.

    Attributes
    ----------
    address : int
        Address of the buffer: a ``CUDA_KERNEL_NODE_PARAMS_v2*``.
    refs : list
        The Python objects the arguments came from, kept alive with the pack.
    """

    __slots__ = ("layout", "buf", "address", "refs", "kernel", "__weakref__")

    def __init__(self, layout: Layout, kernel, args, grid, block, shared_mem: int = 0,
                 func: int = 0, kern: int = 0, ctx: int = 0):
        values = layout.convert(args)
        self.layout = layout
        self.kernel = kernel
        self.refs = list(args)
        buf = layout.buffer_type()
        addr = ctypes.addressof(buf)
        self.buf = buf
        self.address = addr
        g, b = dim3(grid, "grid"), dim3(block, "block")
        try:
            layout.full.pack_into(buf, 0, func, g[0], g[1], g[2], b[0], b[1], b[2],
                                  shared_mem if type(shared_mem) is int
                                  else limits.shared_mem_arg(shared_mem),
                                  addr + HEADER_SIZE, 0, kern, ctx,
                                  *[addr + o for o in layout.offsets], *values)
        except (struct.error, OverflowError, TypeError):
            limits.shared_mem_arg(shared_mem, layout.kernel_name)  # out of range: say so
            layout.diagnose(args)
            raise

    def set(self, i: int, value) -> None:
        """Rewrite argument ``i`` in place (no other slot is touched)."""
        layout = self.layout
        conv = layout.converters[i]
        try:
            layout.slots[i].pack_into(self.buf, layout.offsets[i], conv(value) if conv else value)
        except Exception:
            self.restore(i)
            layout.check_one(i, value)
            raise
        self.refs[i] = value

    def restore(self, i: int) -> None:
        """Write argument ``i`` back from its kept value (after a failed in-place write,
        which ``struct.pack_into`` may have left zeroed)."""
        layout = self.layout
        conv = layout.converters[i]
        old = self.refs[i]
        try:
            value = conv(old) if conv else old
        except ClosedError:  # freed since, its cudaFree deferred: the address stays valid
            value = old._addr
        layout.slots[i].pack_into(self.buf, layout.offsets[i], value)

    def _dims_with(self, grid, block, shared_mem) -> list:
        cur = list(_DIMS.unpack_from(self.buf, _DIMS_OFFSET))
        if grid is not None:
            cur[0:3] = dim3(grid, f"{self.layout.kernel_name}: grid")
        if block is not None:
            cur[3:6] = dim3(block, f"{self.layout.kernel_name}: block")
        if shared_mem is not None:
            cur[6] = limits.shared_mem_arg(shared_mem, self.layout.kernel_name)
        return cur

    def set_dims(self, grid=None, block=None, shared_mem=None) -> None:
        """Rewrite grid, block and/or dynamic shared memory in the header."""
        _DIMS.pack_into(self.buf, _DIMS_OFFSET, *self._dims_with(grid, block, shared_mem))

    def apply(self, args=None, grid=None, block=None, shared_mem=None) -> list:
        """Change some fields in place; everything is checked before anything is written.

        ``args`` is a full sequence, or a dict ``{index_or_name: value}``. Returns the
        objects the changed slots referred to before.
        """
        layout = self.layout
        dims = None
        if grid is not None or block is not None or shared_mem is not None:
            dims = self._dims_with(grid, block, shared_mem)
        old = list(self.refs)
        if isinstance(args, dict):
            items = [(layout.slot_index(k), v) for k, v in args.items()]
            packed = [layout.check_one(i, v) for i, v in items]
            for (i, value), p in zip(items, packed):
                layout.slots[i].pack_into(self.buf, layout.offsets[i], p)
                self.refs[i] = value
            old = [old[i] for i, _ in items]
        elif args is not None:
            values = layout.convert(args)
            if values:
                state = self.state()
                try:
                    layout.values.pack_into(self.buf, HEADER_SIZE + 8 * len(values), *values)
                except (struct.error, OverflowError, TypeError):
                    self.reset(state)  # pack_into may have written some slots already
                    layout.diagnose(args)
                    raise
            self.refs = list(args)
        else:
            old = []
        if dims is not None:
            _DIMS.pack_into(self.buf, _DIMS_OFFSET, *dims)
        return old

    def state(self) -> tuple:
        """The buffer's bytes and the kept values, to :meth:`reset` to after a failed change."""
        return bytes(self.buf), list(self.refs)

    def reset(self, state: tuple) -> None:
        """Put back what :meth:`state` returned (same buffer: the pointers stay right)."""
        data, refs = state
        ctypes.memmove(self.address, data, len(data))
        self.refs = refs

    def updated(self, args=None, grid=None, block=None, shared_mem=None) -> "ArgPack":
        """A new pack with some fields changed (:meth:`apply` on a copy); this one is unchanged."""
        new = self.copy()
        new.apply(args, grid, block, shared_mem)
        return new

    def copy(self) -> "ArgPack":
        """An independent pack with the same contents (its pointers point into itself)."""
        new = ArgPack.__new__(ArgPack)
        new.layout, new.kernel, new.refs = self.layout, self.kernel, list(self.refs)
        buf = self.layout.buffer_type.from_buffer_copy(self.buf)  # self.buf: ctypes or bytearray
        addr = ctypes.addressof(buf)
        new.buf, new.address = buf, addr
        struct.pack_into("<Q", buf, KERNEL_PARAMS_FIELD, addr + HEADER_SIZE)
        self.layout.fixup.pack_into(buf, HEADER_SIZE, *[addr + o for o in self.layout.offsets])
        return new

    # Readable views ---------------------------------------------------------------

    @property
    def func(self) -> int:
        """The ``CUfunction`` the header names (the device the launch runs on has it)."""
        return _FUNC.unpack_from(self.buf, 0)[0]

    @property
    def dims(self) -> tuple:
        d = _DIMS.unpack_from(self.buf, _DIMS_OFFSET)
        return d[0:3], d[3:6], d[6]

    def values(self) -> tuple:
        """Argument values as stored (pointers as ints, structs as bytes)."""
        layout = self.layout
        if not layout.params:
            return ()
        return layout.values.unpack_from(self.buf, HEADER_SIZE + 8 * len(layout.params))

    def raw(self) -> bytes:
        return bytes(self.buf)


_lifetime.register_contents(ArgPack, lambda pack: pack.refs)
if fast.native is not None:
    fast.native.set_pack_type(ArgPack)  # the compiled kernel-node add makes packs of this class
