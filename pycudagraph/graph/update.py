"""Whole-graph update of an exec (``cudaGraphExecUpdate``) and the pairing of its nodes.

Mixed into :class:`~pycudagraph.GraphExec`. After an update the nodes of the new graph are
paired with the exec's own in creation order (as CUDA pairs nodes built by the API), lazily,
at the next per-node update; bodies of conditional nodes are paired the same way.
"""

from __future__ import annotations

from .._cuda import error_for, fast, structs, versions
from ..errors import ArgumentError, GraphExecUpdateError
from .exec_node import find_node, watch_twins
from ..nodes import KernelNode

__all__ = ["ExecUpdate"]

_UPDATE_REASONS = {
    1: "the update failed for a reason CUDA does not classify",
    2: "topology changed (nodes or edges added or removed)",
    3: "node type changed",
    4: "function changed (a kernel node launches a different kernel)",
    5: "parameters changed in a way that cannot be updated",
    6: "this kind of node cannot be updated",
    7: "function changed in a way that cannot be updated",
    8: "node attributes changed",
}


class ExecUpdate:
    """The whole-graph update of :class:`~pycudagraph.GraphExec`."""

    __slots__ = ()

    def update(self, graph) -> None:
        """Take all node parameters from ``graph``, which has the same topology
        (``cuGraphExecUpdate``, the driver twin of ``cudaGraphExecUpdate``).

        Nodes are paired in creation order, as CUDA pairs nodes built by the API (done
        lazily, at the next per-node update). Afterwards the nodes of ``graph`` are
        accepted by :meth:`set_arg` and :meth:`set_params` as aliases of the paired nodes.

        Raises
        ------
        GraphExecUpdateError
            Naming the reason (topology changed, function changed, ...) and the node.
        """
        if not isinstance(graph, type(self.graph)):
            raise ArgumentError(f"update: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        if self._h is None:
            self._refuse()
        graph._raw  # noqa: B018 - a closed graph raises ClosedError here
        graph._execs.add(self)  # its raw graph stays until its nodes are paired with ours
        info = structs.ExecUpdateResultInfo()
        err = fast.exec_update(self, graph, info)
        if err:
            reason = _UPDATE_REASONS.get(info.result, f"result code {info.result}")
            node = find_node(graph, info.errorNode) if info.errorNode else None
            hint = reason + (f"; node: {node.describe()}" if node is not None else "")
            exc = error_for("cuGraphExecUpdate", err, hint, cls=GraphExecUpdateError)
            exc.reason, exc.node = reason, node
            raise exc
        self._retire(tuple(entry[0] for entry in self._packs.values()))
        self._packs.clear()
        old = self._pending
        if old is not None and old is not graph and old is not self.graph:
            old._execs.discard(self)  # superseded before its nodes were paired
            if old._closed:
                old.close()
        self._pending = graph  # nodes are paired on the next per-node update
        self._held = ()  # the packs the exec now has come from ``graph``, through pairing
        self._retire(self._ledger.snapshot())
        self._ledger.held = {"graph": graph.keepalive() + (graph,)}
        self._host_ids = set()
        self._host_scan = True

    def _resolve_update(self):
        """Pair the last update's nodes with the exec's (creation order, as CUDA pairs them).

        Returns the update's graph when :meth:`Graph.close` was called on it while it
        waited, else None: the caller (``GraphExec._paired``) closes it, which destroys it
        and forgets its twins, once it has read the twin of the node it came for.
        """
        graph, self._pending = self._pending, None
        if graph is None:
            return None
        self._pair(self.graph, graph)
        if graph is not self.graph:
            watch_twins(self, graph)  # its twins are forgotten when it is destroyed
            graph._execs.discard(self)  # paired: its raw graph is no longer needed here
            if graph._closed:
                return graph
        return None

    def _pair(self, old_graph, graph) -> None:
        """Pair ``graph``'s nodes with ``old_graph``'s in creation order, and so the nodes
        of the bodies of conditional nodes built here (``cudaGraphGetNodes``)."""
        old_nodes = versions.graph_nodes(old_graph._raw_handle)  # kept while we live
        new_nodes = versions.graph_nodes(graph._raw_handle)
        for old_raw, new_raw in zip(old_nodes, new_nodes):
            old_h, new = int(old_raw), graph._node(new_raw)
            if new._h != old_h:
                self._aliases[new._h] = old_h
            if type(new) is KernelNode and new._pack is not None:
                self._src[old_h] = new._pack
            if getattr(new, "_bodies", None):
                old = old_graph._node(old_raw)  # cached where _member looks for it
                for old_body, body in zip(getattr(old, "_bodies", None) or (), new._bodies):
                    self._pair(old_body, body)
