"""Parameters of memcpy and memset nodes, checked and resolved from Python objects.

Both graph builders (``Graph.add_memcpy`` / ``add_memcpy_3d`` / ``add_memset``) and
updates (``node.set_params`` / ``GraphExec.set_params``) resolve their arguments here, so
a copy's direction, size and a memset's value are validated the same way everywhere.

A pitched 2D/3D copy moves a box of ``width`` bytes x ``height`` rows x ``depth`` slices
from ``src`` to ``dst``. Each side is a buffer or array laid out with its own ``pitch``
(bytes from one row to the next; default: ``width``) and ``rows`` (rows per slice;
default: ``height``), and the box starts at ``pos = (x bytes, y row, z slice)`` in it.
Sizes are checked against both sides before CUDA sees them (:func:`copy3d_params`).
"""

from __future__ import annotations

import struct
import weakref

import numpy as np

from .._cuda import call, dr, rt
from ..errors import ArgumentError, ClosedError, CudaError
from ..runtime.memory import DeviceBuffer, PinnedBuffer
from ..runtime.pointers import device_pointer, host_pointer, nbytes_of
from ..runtime.values import int_arg

__all__ = ["locate", "memcpy_args", "memset_params", "copy3d_params"]

_KINDS = {(False, False): rt.cudaMemcpyKind.cudaMemcpyHostToHost,
          (False, True): rt.cudaMemcpyKind.cudaMemcpyHostToDevice,
          (True, False): rt.cudaMemcpyKind.cudaMemcpyDeviceToHost,
          (True, True): rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice}


def _bytes_to_end(ptr: int) -> int | None:
    """Bytes from ``ptr`` to the end of its device allocation (``cuMemGetAddressRange``,
    the driver's ``cudaMalloc`` bookkeeping), or None when the driver does not know."""
    try:
        base, size = call(dr.cuMemGetAddressRange, ptr)
    except CudaError:
        return None
    return int(base) + int(size) - ptr


def locate(obj, what: str = "buffer", write: bool = False) -> tuple[int, bool, int | None]:
    """(address, is_device, size in bytes or None) of a buffer, array or raw pointer.

    Raw integers are classified with ``cudaPointerGetAttributes``; a raw device address is
    sized up to the end of its allocation (``cuMemGetAddressRange``). Errors name ``what``.
    """
    if obj is None or isinstance(obj, (bool, np.bool_, float, str, bytes)):
        raise ArgumentError(f"{what} must be a buffer, array or int address, got "
                            f"{obj!r} ({type(obj).__name__})")
    try:
        return _locate(obj, write)
    except ClosedError:
        raise  # a freed buffer: its own error, not an argument error
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{what}: {exc}") from None


#: Graph allocations (``MemAllocNode``) by address: their memory is only mapped while a
#: graph runs, so ``cudaPointerGetAttributes`` cannot place an address inside one; a copy
#: or memset node of the same graph may still name it. Weak: gone with the node object.
GRAPH_ALLOCATIONS: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()


def graph_allocation(ptr: int):
    """(start, nbytes) of the graph allocation holding ``ptr``, or None."""
    for start, node in list(GRAPH_ALLOCATIONS.items()):
        nbytes = node.nbytes_at_build
        if start <= ptr < start + nbytes:
            return start, nbytes
    return None


def _locate(obj, write: bool = False) -> tuple[int, bool, int | None]:
    if getattr(obj, "type", None) == "mem_alloc" and hasattr(obj, "nbytes_at_build"):
        return obj.ptr, True, obj.nbytes_at_build  # a MemAllocNode: graph memory
    if isinstance(obj, DeviceBuffer):
        return obj.handle, True, obj.nbytes  # a freed buffer raises ClosedError
    if isinstance(obj, PinnedBuffer):
        return obj.handle, False, obj.nbytes
    if isinstance(obj, np.ndarray):
        return host_pointer(obj, writable=write), False, obj.nbytes
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        ptr = int(obj)
        inside = graph_allocation(ptr)
        if inside is not None:  # graph memory: mapped only while the graph runs
            return ptr, True, inside[0] + inside[1] - ptr
        attrs = call(rt.cudaPointerGetAttributes, ptr)
        on_device = int(attrs.type) in (int(rt.cudaMemoryType.cudaMemoryTypeDevice),
                                        int(rt.cudaMemoryType.cudaMemoryTypeManaged))
        return ptr, on_device, _bytes_to_end(ptr) if on_device else None
    return device_pointer(obj), True, nbytes_of(obj)


def memcpy_args(dst, src, nbytes=None) -> tuple[int, int, int, object]:
    """(dst address, src address, bytes, ``cudaMemcpyKind``) for a 1D copy.

    Raises
    ------
    ValueError
        When the size is unknown, zero, or larger than either side.
    """
    d, d_dev, d_size = locate(dst, "memcpy dst", write=True)
    s, s_dev, s_size = locate(src, "memcpy src")
    if nbytes is None:
        nbytes = s_size if s_size is not None else d_size
        if nbytes is None:
            raise ArgumentError("memcpy between raw pointers needs nbytes=")
    nbytes = int_arg(nbytes, "memcpy nbytes")
    if nbytes <= 0:
        raise ArgumentError(f"memcpy needs a positive number of bytes (nbytes), got {nbytes}")
    for side, size in (("destination", d_size), ("source", s_size)):
        if size is not None and nbytes > size:
            raise ArgumentError(f"memcpy of {nbytes} bytes (nbytes) does not fit the {side} "
                                f"({size} bytes)")
    return d, s, nbytes, _KINDS[(s_dev, d_dev)]


def _value_bits(value, element_size: int) -> int:
    if (isinstance(value, (bool, np.bool_, np.complexfloating))
            or not isinstance(value, (int, float, np.number))):
        raise ArgumentError(f"memset value must be an int or a float, got {value!r} "
                            f"({type(value).__name__})")
    if isinstance(value, (float, np.floating)):
        fmts = {4: ("<f", "<I"), 2: ("<e", "<H")}.get(element_size)
        if fmts is not None:
            try:
                return struct.unpack(fmts[1], struct.pack(fmts[0], value))[0]
            except (OverflowError, struct.error):
                raise ArgumentError(f"memset value {value} does not fit a "
                                    f"{'float' if element_size == 4 else 'half'}") from None
        raise ArgumentError("a float memset value needs element_size 2 (half) or 4 (float)")
    v = int(value)
    bits = 8 * element_size
    if not -(1 << (bits - 1)) <= v < (1 << bits):
        raise ArgumentError(f"memset value {value} does not fit {element_size} byte(s)")
    return v & ((1 << bits) - 1)


def memset_params(current=None, dst=None, value=None, count=None, element_size=None,
                  height=None, pitch=None, kept_dst=None):
    """A ``cudaMemsetParams``; fields not given come from ``current`` (a MemsetParams).

    The extent is checked against the destination: ``dst`` when given, else ``kept_dst``
    (the object the node was built or last updated with), else the raw address's
    allocation, so a new count/height/pitch cannot overrun the buffer either.
    """
    es = element_size if element_size is not None else (current.element_size if current else 1)
    es = int_arg(es, "memset element_size")
    if es not in (1, 2, 4):
        raise ArgumentError(f"memset element_size must be 1, 2 or 4, got {es}")
    count = count if count is not None else (current.count if current else None)
    if count is None or int_arg(count, "memset count") <= 0:
        raise ArgumentError(f"memset needs a positive element count, got {count}")
    count = int(count)
    height = int_arg(height if height is not None else (current.height if current else 1),
                     "memset height")
    if height < 1:
        raise ArgumentError(f"memset height must be >= 1, got {height}")
    row = count * es
    pitch = int_arg(pitch if pitch is not None
                    else (current.pitch if current and current.height > 1 else row), "memset pitch")
    if height > 1 and pitch < row:
        raise ArgumentError(f"memset pitch {pitch} is smaller than a row ({row} bytes)")
    p = rt.cudaMemsetParams()
    target = dst if dst is not None else (kept_dst if kept_dst is not None else
                                          (current.dst if current is not None else None))
    if target is None:
        raise ArgumentError("memset needs a destination (dst)")
    ptr, on_device, size = locate(target, "memset dst")
    if not on_device:
        raise ArgumentError("memset dst must be device memory")
    need = row + (height - 1) * pitch
    if size is not None and need > size:
        raise ArgumentError(f"memset of {need} bytes (count={count} x element_size={es}"
                            f"{f', height={height}, pitch={pitch}' if height > 1 else ''}) "
                            f"does not fit the destination ({size} bytes)")
    p.dst = ptr
    if value is None and current is None:
        raise ArgumentError("memset value must be an int or a float, got None")
    p.value = _value_bits(value, es) if value is not None else current.value
    p.elementSize = es
    p.width = int(count)
    p.height = height
    p.pitch = pitch if height > 1 else 0
    return p


def _pos(pos, what: str) -> tuple[int, int, int]:
    t = tuple(pos)
    if not 1 <= len(t) <= 3:
        raise ArgumentError(f"{what} must be (x bytes, y row, z slice), got {pos!r}")
    t = tuple(int_arg(v, what) for v in t) + (0,) * (3 - len(t))
    if min(t) < 0:
        raise ArgumentError(f"{what} must not be negative, got {pos!r}")
    return t


def _side(obj, name: str, width: int, height: int, depth: int, pitch, rows, pos):
    ptr, on_device, size = locate(obj, f"memcpy_3d {name}", write=name == "dst")
    pitch = width if pitch is None else int_arg(pitch, f"{name}_pitch")
    rows = height if rows is None else int_arg(rows, f"{name}_rows")
    x, y, z = _pos(pos, f"{name}_pos")
    if pitch < x + width:
        raise ArgumentError(f"memcpy_3d {name}: pitch {pitch} is smaller than x + width "
                            f"({x} + {width})")
    if rows < y + height:
        raise ArgumentError(f"memcpy_3d {name}: {rows} rows per slice is fewer than y + height "
                            f"({y} + {height})")
    end = ((z + depth - 1) * rows + y + height - 1) * pitch + x + width
    if size is not None and end > size:
        raise ArgumentError(f"memcpy_3d {name}: the box ends at byte {end}, past the end of "
                            f"the {name} ({size} bytes)")
    return rt.make_cudaPitchedPtr(ptr, pitch, width, rows), rt.make_cudaPos(x, y, z), on_device


def copy3d_params(dst, src, width: int, height: int = 1, depth: int = 1, *, dst_pitch=None,
                  src_pitch=None, dst_rows=None, src_rows=None, dst_pos=(0, 0, 0),
                  src_pos=(0, 0, 0)):
    """A checked ``cudaMemcpy3DParms`` for a pitched copy (see the module docstring).

    Raises
    ------
    ArgumentError
        For a non-positive extent, a pitch or row count too small for the box, or a box
        past the end of either side.
    """
    width = int_arg(width, "memcpy_3d width")
    height = int_arg(height, "memcpy_3d height")
    depth = int_arg(depth, "memcpy_3d depth")
    if min(width, height, depth) < 1:
        raise ArgumentError(f"memcpy_3d needs a positive extent, got width={width}, "
                            f"height={height}, depth={depth}")
    dptr, dpos, d_dev = _side(dst, "dst", width, height, depth, dst_pitch, dst_rows, dst_pos)
    sptr, spos, s_dev = _side(src, "src", width, height, depth, src_pitch, src_rows, src_pos)
    p = rt.cudaMemcpy3DParms()
    p.dstPtr, p.dstPos, p.srcPtr, p.srcPos = dptr, dpos, sptr, spos
    p.extent = rt.make_cudaExtent(width, height, depth)
    p.kind = _KINDS[(s_dev, d_dev)]
    return p
