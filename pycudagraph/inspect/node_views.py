"""What :func:`~pycudagraph.inspect.diff.diff` reads of a node, and how it compares values.

A kernel node is read as a :class:`KernelView` (function, dimensions, each argument's bytes,
and names and values when the kernel has a signature), the same way whether it was built
here, captured, or is an exec's own copy of a node (:meth:`KernelView.of_pack`,
:meth:`KernelView.of_captured`); other nodes as a dict of their fields (:func:`node_fields`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..compile.args import ArgPack
from ..nodes import (CapturedKernelNode, EventRecordNode, EventWaitNode, HostNode, KernelNode,
                     MemcpyNode, MemsetNode, Node)
from ..nodes.captured_args import CapturedArgs
from ..nodes.kernel_node import pack_arguments

__all__ = ["KernelView", "kernel_view", "node_fields", "settable", "same"]

_EVENT_NODES = (EventRecordNode, EventWaitNode)


@dataclass(frozen=True)
class KernelView:
    """What a kernel node launches, read the same way for every kind of kernel node.

    Attributes
    ----------
    function : int
        The ``CUfunction`` (or ``CUkernel``) handle.
    grid, block : tuple of 3 ints
    shared_mem : int
    raw : tuple of bytes
        Each argument's bytes, by index.
    names, values : tuple or None
        Parameter names and the values as stored, for a kernel with a signature.
    """

    function: int
    grid: tuple
    block: tuple
    shared_mem: int
    raw: tuple
    names: tuple | None = None
    values: tuple | None = None

    @classmethod
    def of_pack(cls, pack: ArgPack) -> "KernelView":
        """From a packed launch (a node built here, or an exec's copy of it). No CUDA call."""
        grid, block, smem = pack.dims
        return cls(pack.func, tuple(grid), tuple(block), int(smem), tuple(pack_arguments(pack)),
                   tuple(p.name for p in pack.layout.params), tuple(pack.values()))

    @classmethod
    def of_captured(cls, args: CapturedArgs) -> "KernelView":
        """From the argument bytes of a kernel node read back (No CUDA call here)."""
        p = args.params
        return cls(int(p.func) or int(p.kern), (p.gridDimX, p.gridDimY, p.gridDimZ),
                   (p.blockDimX, p.blockDimY, p.blockDimZ), int(p.sharedMemBytes),
                   tuple(args.get(i) for i in range(len(args.info))))


def kernel_view(node: KernelNode) -> KernelView:
    """The :class:`KernelView` of a kernel node: No CUDA call for a node built here;
    ``cuGraphKernelNodeGetParams`` (and ``cuFuncGetParamInfo`` once per function) for a
    node read back from the driver."""
    if isinstance(node, CapturedKernelNode) or node.kernel is None:
        return KernelView.of_captured(CapturedArgs.of(node))
    p = node.params
    return KernelView(node.function, tuple(p.grid), tuple(p.block), int(p.shared_mem),
                      tuple(node.arguments), tuple(p.args), tuple(p.args.values()))


def node_fields(node: Node) -> dict:
    """The parameters :func:`diff` compares for a node that is not a kernel, conditional
    or child graph node, by field name (each type's ``GetParams`` call, as ``node.params``)."""
    if isinstance(node, MemcpyNode):
        p = node.params
        return {"dst": p.dst, "src": p.src, "nbytes": p.nbytes, "height": p.height,
                "depth": p.depth, "kind": p.kind}
    if isinstance(node, MemsetNode):
        p = node.params
        return {"dst": p.dst, "value": p.value, "element_size": p.element_size,
                "count": p.count, "height": p.height, "pitch": p.pitch}
    if isinstance(node, HostNode):
        return dict(node.params)
    if isinstance(node, _EVENT_NODES):
        return {"event": node.event}
    params = node.params
    return {} if params is None else {"params": params}


def settable(node, key: str, fx: dict, fy: dict) -> bool:
    """Whether an exec's per-node call of ``node``'s type carries a change of ``key``."""
    if isinstance(node, MemcpyNode):  # 1D copies only (cudaGraphExecMemcpyNodeSetParams1D)
        flat = all(f.get("height") == 1 and f.get("depth") == 1 for f in (fx, fy))
        return flat and key in ("dst", "src", "nbytes")
    if isinstance(node, MemsetNode):
        return True
    if isinstance(node, HostNode):
        return key in ("fn", "args") and callable(fy.get("fn"))
    if isinstance(node, _EVENT_NODES):
        return hasattr(fy.get("event"), "record")  # an Event object, not a raw handle
    return False


def same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, float) and isinstance(b, float):  # -0.0 and NaN: by their bytes
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    handle_a, handle_b = getattr(a, "handle", None), getattr(b, "handle", None)
    if handle_a is not None and handle_b is not None:  # events, graphs: the same raw object
        try:
            return int(handle_a) == int(handle_b)
        except (TypeError, ValueError):
            pass
    try:
        same = a == b
    except Exception:  # arrays and other objects whose == is not a bool
        return False
    return same if isinstance(same, bool) else False
