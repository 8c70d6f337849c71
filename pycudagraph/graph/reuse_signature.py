"""Exec reuse's key: which graphs may be reused, their topology signature, and the driver
reads it takes (node and edge counts, node handles in creation order, enabled flags).

Reused are graphs of kernel and empty nodes only. Other kinds are left out because a
reused exec addresses its nodes through its origin graph's, whose parameters are the
parked exec's old ones: memset and copy nodes' per-node updates read the node's other
parameters back from that graph, host and event nodes keep objects the user may watch
go; memory, child-graph and conditional nodes hold graphs or allocations of their own.

Reads made while parking run in finalizers, at any moment (inside the user's
``pcg.trace()`` too): those are made with :func:`quiet`, checked but not traced, as a
finalizer's ``cudaGraphExecDestroy`` is. Reads made by an instantiate are traced.
"""

from __future__ import annotations

from .._cuda import call, error_for, rt, versions
from .._cuda.context import thread_state
from ..nodes.base import NodeType
from ..runtime.user_objects import holding as _holding_user_objects

__all__ = ["REUSABLE_KINDS", "signature", "quiet", "node_count", "edge_count", "node_handles",
           "enabled"]

#: The node kinds of a graph whose exec may be reused.
REUSABLE_KINDS = frozenset({NodeType.KERNEL, NodeType.EMPTY})
_kind_ok: dict = {}  # node class -> whether its kind may be reused


def quiet(fn, *args):
    """``fn(*args)`` (a ``cuda.bindings`` call) with its code checked, not traced: what a
    finalizer reads. Returns what :func:`pycudagraph._cuda.call` returns."""
    res = fn(*args)
    if res[0]:
        raise error_for(fn.__name__, res[0])
    return None if len(res) == 1 else res[1] if len(res) == 2 else res[1:]


def signature(graph, flags: int, device=None, run=call) -> tuple | None:
    """The reuse key of ``graph`` instantiated with ``flags``: ``(device, flags, nodes,
    edges, node classes in order)``, or None where it is not reused (a node kind not in
    :data:`REUSABLE_KINDS`, an empty graph, a graph holding user objects, or nodes
    pycudagraph has not read yet). From the graph's node table and two counts
    (``cudaGraphGetNodes``, ``cudaGraphGetEdges`` asked for their counts only), made with
    ``run`` (:func:`quiet` in a finalizer)."""
    table = graph.table
    if table in _holding_user_objects:  # kept, its raw graph would hold them on
        return None
    kinds = tuple(map(type, table.nodes.values()))
    for cls in frozenset(kinds):
        ok = _kind_ok.get(cls)
        if ok is None:  # a class whose type is known per node only (a property): not reused
            ok = _kind_ok[cls] = getattr(cls, "type", None) in REUSABLE_KINDS
        if not ok:
            return None
    n = len(kinds)
    raw = table.raw_handle
    if not n or node_count(raw, run) != n:  # nodes not read yet (captured): not known here
        return None
    return (thread_state.device if device is None else device, flags, n, edge_count(raw, run),
            kinds)


def node_count(raw, run=call) -> int:
    """``cudaGraphGetNodes`` asked for the count only."""
    return int(run(rt.cudaGraphGetNodes, raw, 0)[-1])


def edge_count(raw, run=call) -> int:
    """``cudaGraphGetEdges`` asked for the count only (``_v2`` on 12.x bindings)."""
    fn = rt.cudaGraphGetEdges
    if versions.BINDINGS_MAJOR < 13:  # the plain 12.x form refuses edges with data
        fn = getattr(rt, "cudaGraphGetEdges_v2", fn)
    return int(run(fn, raw, 0)[-1])


def node_handles(raw, run=call) -> tuple:
    """The graph's node handles in creation order (``cudaGraphGetNodes``, count then fill)."""
    if run is call:
        return tuple(int(h) for h in versions.graph_nodes(raw))
    count = run(rt.cudaGraphGetNodes, raw, 0)[-1]
    if not count:
        return ()
    return tuple(int(h) for h in run(rt.cudaGraphGetNodes, raw, count)[0][:count])


def enabled(exec_h: int, node_h: int, run=call) -> bool:
    """Whether the node is enabled in the exec (``cudaGraphNodeGetEnabled``)."""
    return bool(run(rt.cudaGraphNodeGetEnabled, rt.cudaGraphExec_t(exec_h),
                    rt.cudaGraphNode_t(node_h)))
