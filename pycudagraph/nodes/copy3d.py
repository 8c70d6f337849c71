"""Pitched 2D and 3D copy nodes (``cudaGraphAddMemcpyNode`` with ``cudaMemcpy3DParms``).

A copy moves a box of ``width`` bytes x ``height`` rows x ``depth`` slices from ``src``
to ``dst``. Each side is a buffer or array laid out with its own ``pitch`` (bytes from
one row to the next; default: ``width``) and ``rows`` (rows per slice; default:
``height``), and the box starts at ``pos = (x bytes, y row, z slice)`` in it. Sizes are
checked against both sides before CUDA sees them; host<->device and device<->device
(host<->host too) follow from where the memory lives.
"""

from __future__ import annotations

from .._cuda import call, rt
from ..errors import ArgumentError
from . import MemcpyNode
from .copy_params import _KINDS, locate
from ..runtime.values import int_arg

__all__ = ["copy3d_params", "GraphCopy3D", "ExecCopy3D"]


def _pos(pos, what: str) -> tuple[int, int, int]:
    t = tuple(pos)
    if not 1 <= len(t) <= 3:
        raise ArgumentError(f"{what} must be (x bytes, y row, z slice), got {pos!r}")
    t = tuple(int_arg(v, what) for v in t) + (0,) * (3 - len(t))
    if min(t) < 0:
        raise ArgumentError(f"{what} must not be negative, got {pos!r}")
    return t


def _side(obj, name: str, width: int, height: int, depth: int, pitch, rows, pos):
    ptr, on_device, size = locate(obj, f"memcpy_3d {name}")
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


class GraphCopy3D:
    """The pitched-copy builder and setter of :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    def add_memcpy_3d(self, dst, src, width: int, height: int = 1, depth: int = 1, deps=(),
                      **layout) -> MemcpyNode:
        """A 2D/3D copy node (``cudaGraphAddMemcpyNode`` with ``cudaMemcpy3DParms``).

        Parameters
        ----------
        dst, src : buffer, array or int address
        width : int
            Bytes per row of the box.
        height, depth : int
            Rows and slices of the box.
        deps : sequence of Node
        **layout
            ``dst_pitch``, ``src_pitch``, ``dst_rows``, ``src_rows``, ``dst_pos``,
            ``src_pos`` (see :func:`copy3d_params`).

        Returns
        -------
        MemcpyNode
        """
        p = copy3d_params(dst, src, width, height, depth, **layout)
        raw_deps, n = self._dep_list(deps)
        raw = call(rt.cudaGraphAddMemcpyNode, self._raw, raw_deps, n, p)
        return self._register(MemcpyNode(self, int(raw)), dst, src)

    def set_memcpy_3d(self, node: MemcpyNode, dst, src, width: int, height: int = 1,
                      depth: int = 1, **layout) -> None:
        """Change a copy node in this graph to a 2D/3D copy (``cudaGraphMemcpyNodeSetParams``)."""
        if not isinstance(node, MemcpyNode) or not self._holds(node):
            raise ArgumentError(f"set_memcpy_3d: {node!r} is not a copy node of this graph")
        p = copy3d_params(dst, src, width, height, depth, **layout)
        call(rt.cudaGraphMemcpyNodeSetParams, node.handle, p)
        node.graph._register(node, dst, src)


class ExecCopy3D:
    """The pitched-copy setter of :class:`~pycudagraph.GraphExec` (mixed into it)."""

    __slots__ = ()

    def set_memcpy_3d(self, node: MemcpyNode, dst, src, width: int, height: int = 1,
                      depth: int = 1, **layout) -> None:
        """Change a copy node of the exec (``cudaGraphExecMemcpyNodeSetParams``).

        CUDA documents ``cudaErrorInvalidValue`` when the node's original or new memory
        operands are multidimensional; for a box the exec refuses, change the graph
        (``Graph.set_memcpy_3d``) and instantiate it again.
        """
        if not isinstance(node, MemcpyNode):
            raise ArgumentError(f"set_memcpy_3d: {node!r} is not a copy node")
        p = copy3d_params(dst, src, width, height, depth, **layout)
        target = self._member(node)
        call(rt.cudaGraphExecMemcpyNodeSetParams, self.handle, target.handle, p)
        self._hold(("memcpy", target._h), dst, src, width * height * depth)
