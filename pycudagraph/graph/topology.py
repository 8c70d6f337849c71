"""The topology of a :class:`~pycudagraph.Graph`: its nodes, edges and ports, and their changes.

Mixed into :class:`~pycudagraph.Graph`. Edges are checked before CUDA sees them
(:mod:`pycudagraph.graph.node_checks`): a node of another graph, a self-edge, a duplicate
edge and an edge closing a cycle are refused with an error naming both nodes.
"""

from __future__ import annotations

from .._cuda import call, rt, versions
from ..errors import ArgumentError, CudaError
from ..nodes import Node
from ..nodes.edges import edge_data, port_hint, port_name
from ..nodes.table import node_arg
from ..runtime.values import raw_int
from .node_checks import new_edge, old_edge

__all__ = ["GraphTopology"]


class GraphTopology:
    """Nodes, edges and ports of :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    # Edges -------------------------------------------------------------------------

    def add_dependency(self, a: Node, b: Node, port: str | None = None) -> None:
        """Make ``b`` wait for ``a`` (``cudaGraphAddDependencies``).

        ``port`` (CUDA 12.3, between two kernel nodes): ``"programmatic"`` or
        ``"launch_completion"`` lets ``b`` start early (``cudaGraphEdgeData``;
        :mod:`pycudagraph.nodes.edges`).

        Refused before CUDA (:class:`ArgumentError` naming both nodes): a node of another
        graph, a self-edge, an edge that exists already (whatever its port), an edge that
        would close a cycle.
        """
        raw = self.table.raw
        data = edge_data(port)  # a bad port is refused before the edge queries
        new_edge(self, a, b)
        if data is not None and not (a.port_edges and b.port_edges):
            raise ArgumentError(f"a {port} edge joins two kernel nodes, not {a.type} -> {b.type}")
        versions.graph_add_dependencies(raw, [a.handle], [b.handle], data)

    def remove_dependency(self, a: Node, b: Node, port: str | None = None) -> None:
        """Remove the edge ``a -> b`` (``cudaGraphRemoveDependencies``); it must exist, and
        ``port`` must name the edge's port."""
        raw = self.table.raw
        old_edge(self, a, b)
        try:
            versions.graph_remove_dependencies(raw, [a.handle], [b.handle], edge_data(port))
        except CudaError as exc:
            raise port_hint(exc, self, a, b, port)

    def remove_node(self, node: Node) -> None:
        """Remove a node and its edges (``cudaGraphDestroyNode``).

        The node object refuses every later use with :class:`ClosedError` ("was removed
        from its graph"); execs made before keep running their copy of it, but it can
        no longer be updated through this node.
        """
        table = self.table
        node_arg(table, node, "node", "remove_node")
        table.dep_list((node,))
        call(rt.cudaGraphDestroyNode, node.handle)
        node.mark_removed()
        table.forget(node)  # its bodies go with it

    # Introspection ---------------------------------------------------------------

    @property
    def nodes(self) -> list[Node]:
        """All nodes, in creation order (``cudaGraphGetNodes``; ``cudaGraphNodeGetType`` for a
        node not known yet)."""
        table = self.table
        return [table.node(h) for h in versions.graph_nodes(table.raw)]

    @property
    def root_nodes(self) -> list[Node]:
        """Nodes with no dependencies (``cudaGraphGetRootNodes``)."""
        table = self.table
        return [table.node(h) for h in versions.graph_root_nodes(table.raw)]

    @property
    def edges(self) -> list[tuple[Node, Node]]:
        """``(from, to)`` pairs (``cudaGraphGetEdges``)."""
        table = self.table
        frm, to = versions.graph_get_edges(table.raw)
        return [(table.node(a), table.node(b)) for a, b in zip(frm, to)]

    @property
    def edge_data(self) -> dict:
        """``{(from, to): port}`` for every edge: ``"default"``, ``"programmatic"`` or
        ``"launch_completion"`` (``cudaGraphGetEdges`` with edge data, CUDA 12.3)."""
        table = self.table
        frm, to, data = versions.graph_get_edges_with_data(table.raw)
        return {(table.node(a), table.node(b)): port_name(d) for a, b, d in zip(frm, to, data)}

    def __len__(self) -> int:
        return len(versions.graph_nodes(self.table.raw))

    def find_node(self, raw) -> Node | None:
        """The node with handle ``raw`` in this graph or, at any depth, in a graph one of
        its nodes holds (a child graph, a conditional body), made and cached by the graph
        that holds it: the one walk (:meth:`NodeTable.walk
        <pycudagraph.nodes.table.NodeTable.walk>`: ``cudaGraphGetNodes``,
        ``cudaGraphNodeGetType`` for a node not known yet); ``None`` when none holds it."""
        h = raw_int(raw, "find_node")
        return next((node for node, _, _ in self.table.walk() if int(node) == h), None)

