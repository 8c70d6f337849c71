"""Kernel argument packing: Python values -> the bytes a kernel launch reads.

One :class:`ArgPack` is one stable buffer laid out as::

    [ CUDA_KERNEL_NODE_PARAMS_v2 (72 bytes) | void* kernelParams[n] | argument slots ]

The header's ``kernelParams`` points at the pointer array and each pointer at its
slot, so the buffer's address is directly what ``cuLaunchKernel``,
``cuGraphAddKernelNode`` and ``cuGraphExecKernelNodeSetParams`` take. A whole pack is
written by one ``struct.pack_into``; one argument by :meth:`ArgPack.write`, the one slot
writer (its C twin is ``put`` in ``pycudagraph/_cuda/_native_convert.c``). The pack keeps a
reference to every Python object its slots point into, for as long as the pack lives.

Grid, block and shared memory are normalised by :mod:`pycudagraph.compile.dims`.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from .. import _lifetime
from .._cuda import fast
from .._cuda.structs import DIMS_OFFSET, KERNEL_NODE_PARAMS_FORMAT, KERNEL_PARAMS_FIELD
from ..errors import ArgumentError, ClosedError
from ..runtime.values import short_repr
from .converters import converter, fast_converter
from .dims import dims3, shared_mem_arg
from .param_text import signature_text
from .signature import Param

__all__ = ["Layout", "ArgPack", "dims3", "shared_mem_arg", "HEADER_SIZE"]

_HEADER = struct.Struct(KERNEL_NODE_PARAMS_FORMAT)
HEADER_SIZE = _HEADER.size  #: 72: the kernelParams array starts right after the header
_DIMS = struct.Struct("<7I")  # grid xyz, block xyz, shared memory
_FUNC = struct.Struct("<Q")  # the header's first field: func
_DIMS_OFFSET = DIMS_OFFSET


class Layout(fast.LayoutBase):
    """Where each argument of one kernel lives in an :class:`ArgPack` buffer.

    Built once per kernel (structs need a known size: from the kernel image or
    given values). Holds the one ``struct.Struct`` that writes a whole pack and one
    per slot for single-argument rewrites.
    """

    # ``hot`` is the base's (fast.LayoutBase): the exec updates (GraphExec.set_arg,
    # set_params) read it there.
    __slots__ = ("__dict__", "__weakref__")

    def __init__(self, kernel_name: str, params: tuple[Param, ...], hidden: tuple[int, ...] = ()):
        for p in params:
            if p.size is None:
                raise ArgumentError(
                    f"{kernel_name}(): the size of struct parameter {p.index} '{p.name}' "
                    f"({p.ctype}) is unknown; load the kernel on a GPU or pass signature=")
        self.kernel_name = kernel_name
        self.params = params
        n = len(params)
        self.count = n
        #: Sizes of trailing kernel parameters no argument fills: always zero (Triton's
        #: scratch pointers). They follow the arguments in the pointer array and the slots.
        self.hidden = tuple(int(h) for h in hidden)
        n_ptr = sum(len(p.parts) or 1 for p in params) + len(self.hidden)
        ptr_end = HEADER_SIZE + 8 * n_ptr
        offsets, pos = [], ptr_end
        for p in params:
            pos = (pos + p.align - 1) // p.align * p.align
            offsets.append(pos)
            pos += p.size
        self.offsets = tuple(offsets)  # argument i's slot (one per argument)
        pointers, sizes = [], []  # what kernelParams points at, and its size: per kernel parameter
        for p, off in zip(params, offsets):
            pointers.extend([off + o for o, _ in p.parts] if p.parts else [off])
            sizes.extend([n for _, n in p.parts] if p.parts else [p.size])
        value_fmt, cursor = "", ptr_end
        for p, off in zip(params, offsets):
            value_fmt += f"{off - cursor}x" if off > cursor else ""
            value_fmt += p.fmt
            cursor = off + p.size
        for size in self.hidden:  # zero bytes, written with every whole pack
            align = 8 if size >= 8 else max(size, 1)
            pos = (pos + align - 1) // align * align
            pointers.append(pos)
            sizes.append(size)
            value_fmt += f"{pos - cursor + size}x"
            cursor = pos = pos + size
        self.size = max(pos, ptr_end, HEADER_SIZE)
        self.pointer_offsets = tuple(pointers)
        self.param_sizes = tuple(sizes)  # of each kernel parameter (as the image lists them)
        self.pointers_offset = HEADER_SIZE
        self.values_offset = ptr_end  # where the argument slots start
        self.full = struct.Struct(KERNEL_NODE_PARAMS_FORMAT + f"{n_ptr}Q" + value_fmt)
        self.values = struct.Struct("<" + value_fmt) if n else None
        self.slots = tuple(struct.Struct("<" + p.fmt) for p in params)
        self.converters = tuple(converter(p) for p in params)
        #: what the compiled route calls: None for plain ints and floats (C packs and checks them)
        self.fast_converters = tuple(fast_converter(p, c) for p, c in zip(params, self.converters))
        self.convert_at = tuple(i for i, c in enumerate(self.converters) if c is not None)
        #: per slot: its struct, start, end and converter (what ArgPack.write needs)
        self.writers = tuple((st, off, off + st.size, conv) for st, off, conv
                             in zip(self.slots, offsets, self.converters))
        self.fixup = struct.Struct(f"<{n_ptr}Q")
        self.buffer_type = ctypes.c_char * self.size
        self.index = {p.name: p.index for p in params}
        #: the compiled route's view (a ``fast.Plan``): its plan of these slots, the
        #: converters, name -> index. Its C packing knows one kernel parameter per argument
        #: and the usual conversions only.
        self.hot = fast.Plan(plan=fast.layout_plan(params, offsets, self.size, len(self.hidden)),
                             converters=self.fast_converters, names=self.index)

    def kernel_hot(self, func: int, limits=None):
        """What the compiled route of ``fast.launch_kernel`` / ``fast.add_kernel`` /
        ``fast.add_node`` takes for a kernel with this layout: a ``fast.Plan`` of its plan
        naming ``func`` and its :class:`~pycudagraph.compile.limits.KernelLimits`, the
        converters, and this layout (which the :class:`ArgPack` a node add makes in C names)."""
        lims = (limits.block1, limits.grid1, limits.smem) if limits is not None else ()
        return fast.Plan(plan=fast.kernel_plan(self.hot.plan, func, *lims),
                         converters=self.fast_converters, layout=self)

    def sequence(self, args) -> tuple | list:
        """``args`` as a tuple or list (an iterator is read once); a str, bytes, dict or
        non-iterable raises :class:`ArgumentError`."""
        if isinstance(args, (tuple, list)):
            return args
        if isinstance(args, (str, bytes, dict)) or not hasattr(args, "__iter__"):
            raise ArgumentError(f"{self.kernel_name}(): args must be a sequence of "
                                f"{len(self.params)} values, got {short_repr(args)} "
                                f"({type(args).__name__})")
        return tuple(args)

    def convert(self, args) -> list:
        """Values ready for the layout's formats; raises :class:`ArgumentError` when one is wrong."""
        n = len(self.params)
        args = self.sequence(args)
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
                                f"parameter name, got {short_repr(key)} ({type(key).__name__})")
        try:
            i = int(key)
        except (TypeError, ValueError):  # a numpy array, say
            raise ArgumentError(f"{self.kernel_name}(): an argument index must be an int or a "
                                f"parameter name, got {short_repr(key)}") from None
        if not 0 <= i < len(self.params):
            raise ArgumentError(f"{self.kernel_name}() has {len(self.params)} parameters; "
                                f"index {key} is out of range")
        return i

    def encode(self, i: int, value) -> bytes:
        """Argument ``i``'s slot bytes for ``value``; raises :class:`ArgumentError` naming
        kernel, parameter and value when it does not fit (:class:`ClosedError` for a freed
        buffer)."""
        conv = self.converters[i]
        try:
            return self.slots[i].pack(conv(value) if conv is not None else value)
        except ClosedError:  # a freed buffer: say so, not "cannot take"
            raise
        except Exception as exc:
            p = self.params[i]
            reason = str(exc) or type(exc).__name__
            raise ArgumentError(
                f"{self.kernel_name}(): parameter {i} '{p.name}' ({p.ctype}) cannot take "
                f"{short_repr(value)} of type {type(value).__name__}: {reason}") from None

    def diagnose(self, args) -> None:
        """Raise the error of the first value of ``args`` that does not fit."""
        for i, value in enumerate(args):
            self.encode(i, value)


class ArgPack(fast.ArgPackBase):
    """A packed kernel launch: header, pointer array and argument values in one buffer.

    Attributes
    ----------
    address : int
        Address of the buffer: a ``CUDA_KERNEL_NODE_PARAMS_v2*``.
    refs : list
        The Python objects the arguments came from, kept alive with the pack.
    """

    # layout, buf, address, refs and kernel are the base's (fast.ArgPackBase)
    __slots__ = ("__weakref__",)

    def __init__(self, layout: Layout, kernel, args, grid, block, shared_mem: int = 0,
                 func: int = 0, kern: int = 0, ctx: int = 0):
        if type(args) is not tuple and type(args) is not list:
            args = layout.sequence(args)
        values = layout.convert(args)
        self.layout = layout
        self.kernel = kernel
        self.refs = list(args)
        buf = layout.buffer_type()
        addr = ctypes.addressof(buf)
        self.buf = buf
        self.address = addr
        g, b = dims3(grid, "grid"), dims3(block, "block")
        try:
            layout.full.pack_into(buf, 0, func, g[0], g[1], g[2], b[0], b[1], b[2],
                                  shared_mem if type(shared_mem) is int
                                  else shared_mem_arg(shared_mem),
                                  addr + HEADER_SIZE, 0, kern, ctx,
                                  *[addr + o for o in layout.pointer_offsets], *values)
        except (struct.error, OverflowError, TypeError):
            shared_mem_arg(shared_mem, layout.kernel_name)  # out of range: say so
            for i, value in enumerate(args):  # the slot writer names the value that does not fit
                self.write(i, value)
            raise

    def write(self, i: int, value) -> bytes | bytearray:
        """Convert ``value`` for argument ``i`` and write it into its slot: the one slot
        writer. Returns the bytes the slot held. A value that does not fit raises
        :class:`ArgumentError` (:class:`ClosedError` for a freed buffer) and leaves the slot
        unchanged. ``refs`` is not touched."""
        slot, start, end, conv = self.layout.writers[i]
        buf = self.buf
        old = buf[start:end]  # bytes (a bytearray for a pack the compiled route made)
        try:
            slot.pack_into(buf, start, conv(value) if conv is not None else value)
        except Exception:
            buf[start:end] = old  # struct may have zeroed it before refusing
            self.layout.encode(i, value)  # raises the error naming kernel, parameter and value
            raise
        return old

    def restore(self, i: int, data: bytes | bytearray) -> None:
        """Put back the bytes :meth:`write` returned (after a refused driver call)."""
        start = self.layout.offsets[i]
        self.buf[start:start + len(data)] = data

    def set(self, i: int, value) -> None:
        """Rewrite argument ``i`` in place (no other slot is touched)."""
        self.write(i, value)
        self.refs[i] = value

    def dims_with(self, grid, block, shared_mem) -> list:
        """The header's ``[gx, gy, gz, bx, by, bz, shared_mem]`` with the fields given (not
        ``None``) replaced, each checked; nothing is written. No CUDA call."""
        cur = list(_DIMS.unpack_from(self.buf, _DIMS_OFFSET))
        if grid is not None:
            cur[0:3] = dims3(grid, f"{self.layout.kernel_name}: grid")
        if block is not None:
            cur[3:6] = dims3(block, f"{self.layout.kernel_name}: block")
        if shared_mem is not None:
            cur[6] = shared_mem_arg(shared_mem, self.layout.kernel_name)
        return cur

    def set_dims(self, grid=None, block=None, shared_mem=None) -> None:
        """Rewrite grid, block and/or dynamic shared memory in the header."""
        _DIMS.pack_into(self.buf, _DIMS_OFFSET, *self.dims_with(grid, block, shared_mem))

    def apply(self, args=None, grid=None, block=None, shared_mem=None) -> list:
        """Change some fields in place; everything is checked before anything is written.

        ``args`` is a full sequence, or a dict ``{index_or_name: value}``. Returns the
        objects the changed slots referred to before.
        """
        layout = self.layout
        dims = None
        if grid is not None or block is not None or shared_mem is not None:
            dims = self.dims_with(grid, block, shared_mem)
        old = list(self.refs)
        if isinstance(args, dict):
            items = [(layout.slot_index(k), v) for k, v in args.items()]
            done = []
            try:
                for i, value in items:
                    done.append((i, self.write(i, value)))
            except Exception:
                for i, data in reversed(done):  # nothing stays half-written
                    self.restore(i, data)
                raise
            for i, value in items:
                self.refs[i] = value
            old = [old[i] for i, _ in items]
        elif args is not None:
            args = layout.sequence(args)  # an iterator is read once, for values and refs
            values = layout.convert(args)
            if values:
                state = self.state()
                try:
                    layout.values.pack_into(self.buf, layout.values_offset, *values)
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
        self.layout.fixup.pack_into(buf, HEADER_SIZE, *[addr + o for o in self.layout.pointer_offsets])
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
        return layout.values.unpack_from(self.buf, layout.values_offset)

    def raw(self) -> bytes:
        return bytes(self.buf)


_lifetime.register_contents(ArgPack, lambda pack: pack.refs)