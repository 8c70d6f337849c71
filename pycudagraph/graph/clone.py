"""Cloning a graph (``cudaGraphClone``) and finding a node's copy in the clone.

Mixed into :class:`~pycudagraph.Graph`. A clone's node objects carry the original's
Python-side parameters (argument packs, callables, events), so a clone's kernel nodes can be
updated like the original's.
"""

from __future__ import annotations

import ctypes

from .._cuda import call, rt
from ..errors import ArgumentError, CudaError
from ..nodes import KernelNode, Node, NodeType
from .node_checks import node_arg

__all__ = ["GraphClone"]


class GraphClone:
    """``clone`` and ``find`` of :class:`~pycudagraph.Graph`."""

    __slots__ = ()

    def clone(self):
        """A copy of the graph (``cudaGraphClone``); ``clone.find(node)`` maps nodes."""
        try:
            raw = call(rt.cudaGraphClone, self._raw)
        except CudaError as exc:
            if any(n.type == NodeType.CONDITIONAL for n in self._all_nodes()):
                exc.hint = "CUDA does not clone graphs with conditional nodes"
                exc.args = (exc._text(),)
            raise
        new = type(self)._wrap(raw, owned=True)
        new._origin = self
        new._ledger.hold("clone of", self.keepalive())
        for node in list(self._nodes.values()):  # so clone.nodes carries what we know
            new.find(node)
        return new

    def find(self, node: Node) -> Node:
        """The node of this clone that copies ``node`` of the original (``cudaGraphNodeFindInClone``)."""
        origin = getattr(self, "_origin", None)
        node_arg(origin, node, "node", "find")
        if origin is None:
            raise ArgumentError(f"find: {self!r} is not a clone; call find on the graph "
                                "that Graph.clone() returned")
        raw = call(rt.cudaGraphNodeFindInClone, node.handle, self._raw)
        h = int(raw)
        found = self._nodes.get(h)
        if found is None:
            found = _copy_node(node, self, h)
            self._nodes[h] = found
            keep = origin._ledger.held.get(node._h)
            if keep:  # the copy points at what the original does (its ArgPack too)
                self._ledger.hold(h, *keep)
        return found


_OWN_SLOTS = ("graph", "_h", "_raw", "_cvp", "__weakref__")


def _copy_node(original: Node, graph, h: int) -> Node:
    """The clone's node object, carrying the original's Python-side parameters."""
    cls = type(original)
    node = cls.__new__(cls)
    Node.__init__(node, graph, h)
    for base in cls.__mro__:
        for slot in getattr(base, "__slots__", ()):
            if slot not in _OWN_SLOTS and hasattr(original, slot):
                setattr(node, slot, getattr(original, slot))
    if isinstance(node, KernelNode):
        node._cvp = ctypes.c_void_p(h)
    return node
