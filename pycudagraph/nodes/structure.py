"""Structure nodes: a child graph, and the empty node that joins dependencies."""

from __future__ import annotations

from .._cuda import call, rt
from ..errors import ArgumentError
from .base import Node, NodeType
from .file_records import ChildGraphFile, EmptyFile

__all__ = ["ChildGraphNode", "EmptyNode"]


class ChildGraphNode(Node, ChildGraphFile):
    """A node that runs a whole graph (``cudaGraphAddChildGraphNode``)."""

    type = NodeType.CHILD_GRAPH
    exec_call = "cudaGraphExecChildGraphNodeSetParams"
    in_conditional_body = True
    __slots__ = ("_child",)  # the one Graph wrapper of the embedded graph, made on first use

    @classmethod
    def build(cls, table, deps, child) -> "ChildGraphNode":
        """``cudaGraphAddChildGraphNode``: the node runs a copy of ``child``.

        The copy points at the same memory, so everything ``child`` keeps alive is kept
        alive by this graph too.
        """
        if not isinstance(child, type(table.graph)):
            raise ArgumentError(f"add_child_graph needs a Graph, got {type(child).__name__}")
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddChildGraphNode, table.raw, raw_deps, nd, child.handle)
        return table.register(cls(table, int(raw)), child.keepalive())

    @property
    def child(self):
        """The embedded graph (``cudaGraphChildGraphNodeGetGraph``, on first use); owned by
        this node. One wrapper per node: what nodes added to it keep alive is kept by the
        parent graph too (its keepalive includes the child's)."""
        child = getattr(self, "_child", None)
        if child is not None and child.table.owner is self:  # not a clone's copy of the slot
            self.check_live()
            return child
        raw = call(rt.cudaGraphChildGraphNodeGetGraph, self.handle)
        self._child = child = self._table.child(raw, owner=self)
        return child

    def inner_graphs(self) -> tuple:
        """The embedded graph's wrapper, once made (:attr:`child`). No CUDA call."""
        child = getattr(self, "_child", None)
        return (child,) if child is not None and child.table.owner is self else ()

    @property
    def params(self) -> dict:
        """``{"graph": child}``: the embedded graph (``cudaGraphChildGraphNodeGetGraph``)."""
        return {"graph": self.child}

    def exec_set(self, rec, graph) -> None:
        """``cudaGraphExecChildGraphNodeSetParams``: same topology, new parameters."""
        if not isinstance(graph, type(self.graph)):
            raise ArgumentError(f"set_params: graph must be a Graph, got {type(graph).__name__}")
        call(rt.cudaGraphExecChildGraphNodeSetParams, rec.exec_raw, rec.node.handle, graph.handle)
        rec.hold("child", graph.keepalive())

    def describe(self) -> str:
        """One line: the child's node count (``cudaGraphChildGraphNodeGetGraph``,
        ``cudaGraphGetNodes``)."""
        return f"child_graph ({len(self.child.nodes)} nodes)"

    # Facets (:mod:`pycudagraph.nodes.facets`) ---------------------------------------

    #: The embedded graph, which an exec may replace by one of the same topology.
    exec_fields = frozenset({"graph"})

    def fields(self) -> dict:
        """``graph``: the embedded graph (``cudaGraphChildGraphNodeGetGraph``, on first use)."""
        return {"graph": self.child}

    def subgraphs(self) -> tuple:
        """The embedded graph (``cudaGraphChildGraphNodeGetGraph``, on first use)."""
        return (self.child,)

    def subgraph_names(self) -> list:
        """``["child"]`` (:meth:`record_graph_names`). No CUDA call."""
        return self.record_graph_names(None)


class EmptyNode(Node, EmptyFile):
    """A node that does nothing, for joining dependencies (``cudaGraphAddEmptyNode``)."""

    type = NodeType.EMPTY
    idle = True
    in_conditional_body = True
    __slots__ = ()

    @classmethod
    def build(cls, table, deps) -> "EmptyNode":
        """``cudaGraphAddEmptyNode``."""
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddEmptyNode, table.raw, raw_deps, nd)
        return table.register(cls(table, int(raw)))
