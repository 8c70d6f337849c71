"""Which node an exec's node handle stands for: update twins, removed nodes, failing nodes.

A node handle is an address. After ``exe.update(g2)`` the nodes of ``g2`` stand for the
exec's own (``exe._aliases`` and ``exe._packs`` are keyed by their handles); once ``g2``
is destroyed (closed, collected) or loses a node, a node of another graph may be given
the same address, so the exec forgets those twins then (:func:`watch_twins`). A failing
node that CUDA names by handle is looked up in the graph that holds it, body graphs of
conditional nodes included (:func:`find_node`), never cached in an enclosing graph.
"""

from __future__ import annotations

import weakref

from .._cuda import versions
from ..nodes import Node

__all__ = ["watch_twins", "graph_gone", "forget_removed", "find_node"]


def watch_twins(exe, graph) -> None:
    """``exe`` paired the nodes of ``graph`` (and of its bodies) with its own: forget
    those twins when ``graph`` is destroyed or collected. No CUDA call."""
    handles = frozenset(n._h for n in graph._all_nodes())
    entries = graph.__dict__.get("_twin_execs")
    if entries is None:
        entries = graph._twin_execs = []
        weakref.finalize(graph, _forget_all, entries).atexit = False
    entries.append((weakref.ref(exe), handles))


def graph_gone(graph) -> None:
    """``graph``'s raw graph is destroyed: the execs it gave update twins forget them.
    No CUDA call."""
    entries = graph.__dict__.get("_twin_execs")
    if entries:
        _forget_all(entries)


def _forget_all(entries: list) -> None:
    try:  # also a finalizer: never raises
        while entries:
            ref, handles = entries.pop()
            exe = ref()
            if exe is not None:
                _drop(exe, handles)
    except Exception:  # noqa: BLE001
        pass


def _drop(exe, handles) -> None:
    for h in handles:
        exe._aliases.pop(h, None)
        exe._packs.pop(h, None)


def forget_removed(graph, node) -> None:
    """``node`` was removed from ``graph``: the execs made from ``graph`` or from a graph
    enclosing it (a conditional body's nodes are updated through the top graph's exec)
    forget it and the nodes of the bodies it owned, so set_arg raises ClosedError; the
    execs that took them as update twins forget them too. No CUDA call."""
    gone = {node._h}
    for body in getattr(node, "_bodies", None) or ():
        gone.update(n._h for n in body._all_nodes())
    while graph is not None:
        for exe in list(graph._execs):
            exe._forget(gone)
        for ref, handles in list(graph.__dict__.get("_twin_execs") or ()):
            exe = ref()
            if exe is not None:
                _drop(exe, handles & gone)
        owner = graph._owner
        graph = owner.graph if isinstance(owner, Node) else None


def find_node(graph, raw) -> Node | None:
    """The node with handle ``raw`` in ``graph`` or in a body (at any depth) of one of its
    conditional nodes, made and cached by the graph that holds it (``cudaGraphGetNodes``,
    ``cudaGraphNodeGetType`` for one not known yet); ``None`` when none holds it."""
    h = int(raw)
    for node in graph._all_nodes():
        if node._h == h:
            return node
    return _search(graph, h)


def _search(graph, h: int) -> Node | None:
    listed = [int(x) for x in versions.graph_nodes(graph._raw_handle)]
    if h in listed:
        return graph._node(h)
    for x in listed:
        for body in getattr(graph._node(x), "_bodies", None) or ():
            found = _search(body, h)
            if found is not None:
                return found
    return None
