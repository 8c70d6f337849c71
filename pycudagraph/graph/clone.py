"""Cloning a graph (``cudaGraphClone``) and finding a node's copy in the clone.

Mixed into :class:`~pycudagraph.Graph`. A clone's node objects carry the original's
Python-side parameters (argument packs, callables, events), so a clone's kernel nodes can be
updated like the original's.
"""

from __future__ import annotations

from .._cuda import call, rt
from ..errors import ArgumentError, CudaError, PyCudaGraphError
from ..nodes import Node
from ..nodes.table import node_arg
from ..runtime.user_objects import holding as _holding_user_objects

__all__ = ["GraphClone"]


def _clone_refusal(table) -> str:
    """Why CUDA refuses to clone the graph of ``table``, as its nodes say
    (:attr:`Node.clone_refusal`, over the one walk); "" where none says."""
    try:
        return next((n.clone_refusal for n, _, _ in table.walk() if n.clone_refusal), "")
    except PyCudaGraphError:  # the graph cannot be read: no hint
        return ""


class GraphClone:
    """``clone`` and ``find`` of :class:`~pycudagraph.Graph`."""

    __slots__ = ()

    def clone(self):
        """A copy of the graph (``cudaGraphClone``); ``clone.find(node)`` maps nodes."""
        try:
            raw = call(rt.cudaGraphClone, self.handle)
        except CudaError as exc:
            why = _clone_refusal(self.table)
            if why:
                exc.set_hint(why)
            raise
        new = self._wrap(raw, owned=True, origin=self)
        new.table.ledger.keep_also(self.keepalive())
        if self.table in _holding_user_objects:  # a clone holds the same user objects
            _holding_user_objects.add(new.table)
        self.table.settle()  # a loaded graph's kernel nodes: their objects, names and all
        for node in list(self.table.nodes.values()):  # so clone.nodes carries what we know
            new.find(node)
        return new

    @property
    def origin(self):
        """The graph this one is a clone of (``None`` for a graph that is not). No CUDA call."""
        return self._origin

    def find(self, node: Node) -> Node:
        """The node of this clone that copies ``node`` of the original (``cudaGraphNodeFindInClone``)."""
        origin = self._origin
        node_arg(origin.table if origin is not None else None, node, "node", "find")
        if origin is None:
            raise ArgumentError(f"find: {self!r} is not a clone; call find on the graph "
                                "that Graph.clone() returned")
        table = self.table
        h = int(call(rt.cudaGraphNodeFindInClone, node.handle, table.raw))
        found = table.nodes.get(h)
        if found is None:  # the copy points at what the original does (its ArgPack too)
            found = table.register(node.copy_for(table, h), *origin.table.kept(node))
        return found
