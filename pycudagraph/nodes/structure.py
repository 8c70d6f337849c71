"""Structure nodes: a child graph, and the empty node that joins dependencies."""

from __future__ import annotations

from .._cuda import call, rt
from ..errors import ArgumentError
from ..runtime.hostfn import hostcall_ids
from .base import Node, NodeType

__all__ = ["ChildGraphNode", "EmptyNode"]


class ChildGraphNode(Node):
    """A node that runs a whole graph (``cudaGraphAddChildGraphNode``)."""

    type = NodeType.CHILD_GRAPH
    __slots__ = ("_child",)  # the one Graph wrapper of the embedded graph, made on first use

    @classmethod
    def _add(cls, graph, deps, child) -> "ChildGraphNode":
        """``cudaGraphAddChildGraphNode``: the node runs a copy of ``child``.

        The copy points at the same memory, so everything ``child`` keeps alive is kept
        alive by this graph too.
        """
        if not isinstance(child, type(graph)):
            raise TypeError(f"add_child_graph needs a Graph, got {type(child).__name__}")
        raw_deps, nd = graph._dep_list(deps)
        raw = call(rt.cudaGraphAddChildGraphNode, graph._raw, raw_deps, nd, child._raw)
        return graph._register(cls(graph, int(raw)), child.keepalive())

    @property
    def child(self):
        """The embedded graph (``cudaGraphChildGraphNodeGetGraph``, on first use); owned by
        this node. One wrapper per node: what nodes added to it keep alive is kept by the
        parent graph too (its keepalive includes the child's)."""
        child = getattr(self, "_child", None)
        if child is not None and child._owner is self:  # not a clone's copy of the slot
            self._check_live()
            return child
        raw = call(rt.cudaGraphChildGraphNodeGetGraph, self.handle)
        self._child = child = self.graph._wrap_child(raw, owner=self)
        return child

    @property
    def params(self) -> dict:
        """``{"graph": child}``: the embedded graph (``cudaGraphChildGraphNodeGetGraph``)."""
        return {"graph": self.child}

    def _exec_set(self, exe, target, graph) -> None:
        """``cudaGraphExecChildGraphNodeSetParams``: same topology, new parameters."""
        if not isinstance(graph, type(self.graph)):
            raise ArgumentError(f"set_params: graph must be a Graph, got {type(graph).__name__}")
        call(rt.cudaGraphExecChildGraphNodeSetParams, exe._raw, target.handle, graph._raw)
        keep = graph.keepalive()
        exe._hold(("child", target._h), keep)
        exe._host_ids |= hostcall_ids(keep)

    def describe(self) -> str:
        """One line: the child's node count (``cudaGraphChildGraphNodeGetGraph``,
        ``cudaGraphGetNodes``)."""
        return f"child_graph ({len(self.child.nodes)} nodes)"


class EmptyNode(Node):
    """A node that does nothing, for joining dependencies (``cudaGraphAddEmptyNode``)."""

    type = NodeType.EMPTY
    __slots__ = ()

    @classmethod
    def _add(cls, graph, deps) -> "EmptyNode":
        """``cudaGraphAddEmptyNode``."""
        raw_deps, nd = graph._dep_list(deps)
        raw = call(rt.cudaGraphAddEmptyNode, graph._raw, raw_deps, nd)
        return graph._register(cls(graph, int(raw)))
