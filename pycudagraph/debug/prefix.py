"""The graphs a bisection runs: the first k nodes of a topological order, as the graph has
them or chained one after another.

A topological order puts every node after its dependencies, so its first ``k`` nodes hold
the dependencies of each of them: a clone of the graph with the other nodes removed
(:func:`prefix_graph`) is a graph that does exactly the first part of the work, with the
graph's own edges. :func:`chained_graph` removes every edge of that prefix as well and
links each node to the next: the same work, one node at a time, in the order the
bisection reads. The order is the core's (:func:`~pycudagraph.graph.introspect.topological_order`:
ties kept in creation order, so a node made or captured first runs first in the chain).

Nodes are top-level nodes: a child graph or a conditional node counts as one, with all
it holds. The planning functions make no CUDA call; the builders make a clone
(``cudaGraphClone``), find the nodes in it (``cudaGraphNodeFindInClone``), remove nodes
(``cudaGraphDestroyNode``) and edges (``cudaGraphRemoveDependencies``) and add edges
(``cudaGraphAddDependencies``), through the graph's own methods.
"""

from __future__ import annotations

from ..errors import NotSupportedError
from ..graph.introspect import topological_order

__all__ = ["graph_order", "prefix_plan", "chain_plan", "prefix_graph", "chained_graph",
           "ancestors", "Trial", "bisect_first"]


def graph_order(graph) -> tuple:
    """``(order, edges)``: the top-level nodes of ``graph`` in topological order, and its
    edges as ``{(a, b): port}`` (``cudaGraphGetNodes``, ``cudaGraphGetEdges``)."""
    try:
        edges = dict(graph.edge_data)
    except NotSupportedError:  # before CUDA 12.3: no ports, every edge a plain one
        edges = {e: "default" for e in graph.edges}
    return topological_order(graph.nodes, list(edges)), edges


def prefix_plan(order: list, k: int) -> tuple:
    """``(keep, drop)``: the first ``k`` nodes of ``order`` and the rest, the rest last
    first (the order to remove them in). No CUDA call."""
    if not 0 <= k <= len(order):
        raise ValueError(f"a prefix of {k} nodes of {len(order)}")
    return list(order[:k]), list(reversed(order[k:]))


def chain_plan(order: list, edges: dict, k: int) -> tuple:
    """``(remove, add)`` for the chained prefix of ``k`` nodes: the edges among them to
    remove (``(a, b, port)``) and the edges that chain them (``(a, b)``, each node to the
    next). No CUDA call."""
    keep = set(order[:k])
    remove = [(a, b, port) for (a, b), port in edges.items() if a in keep and b in keep]
    return remove, list(zip(order[:k - 1], order[1:k])) if k > 1 else []


def prefix_graph(graph, order: list, k: int) -> tuple:
    """``(clone, nodes)``: a clone of ``graph`` keeping the first ``k`` nodes of ``order``
    with their edges, and those nodes of the clone, in order."""
    keep, drop = prefix_plan(order, k)
    clone = graph.clone()
    found = {n: clone.find(n) for n in order}
    for n in drop:
        clone.remove_node(found[n])
    return clone, [found[n] for n in keep]


def chained_graph(graph, order: list, edges: dict, k: int) -> tuple:
    """``(clone, nodes)``: the first ``k`` nodes of ``order`` with no edge of their own,
    each depending on the one before (see the module docstring)."""
    clone, nodes = prefix_graph(graph, order, k)
    remove, add = chain_plan(order, edges, k)
    found = dict(zip(order[:k], nodes))
    for a, b, port in remove:
        clone.remove_dependency(found[a], found[b], None if port == "default" else port)
    for a, b in add:
        clone.add_dependency(found[a], found[b])
    return clone, nodes


def ancestors(node, edges) -> set:
    """Every node with a path to ``node`` along ``edges`` (``(a, b)`` pairs or a dict keyed
    by them). No CUDA call."""
    into: dict = {}
    for a, b in edges:
        into.setdefault(b, []).append(a)
    seen, todo = set(), [node]
    while todo:
        for a in into.get(todo.pop(), ()):
            if a not in seen:
                seen.add(a)
                todo.append(a)
    return seen


class Trial:
    """One run of a prefix: ``k`` nodes, its ``outcome`` (a word: ``"ok"``, ``"fault"``,
    ``"hang"``, ``"crash"``, ``"same"``, ``"differs"``), what went wrong (``error``, and
    the CUDA error's ``name`` where there is one) and how long it took (``seconds``)."""

    __slots__ = ("k", "outcome", "error", "seconds", "name")

    def __init__(self, k: int, outcome: str, error: str = "", seconds: float = 0.0,
                 name: str = ""):
        self.k, self.outcome, self.error, self.seconds, self.name = k, outcome, error, seconds, name

    @property
    def bad(self) -> bool:
        return self.outcome not in ("ok", "same")

    def __repr__(self) -> str:
        return f"<Trial {self.k} nodes: {self.outcome}>"


def bisect_first(n: int, run, first=None) -> tuple:
    """``(k, trials)``: the smallest ``k`` in 1..n whose trial is bad, by bisection, when
    the trial of all ``n`` nodes is bad (``first``, or ``run(n)``); ``(0, trials)`` when
    it is not. ``run(k) -> Trial``. About ``log2(n) + 1`` trials; no CUDA call of its own."""
    trials = [first if first is not None else run(n)]
    if not trials[0].bad:
        return 0, trials
    lo, hi = 0, n  # the prefix of lo nodes is good (none: nothing runs), of hi bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = run(mid)
        trials.append(t)
        if t.bad:
            hi = mid
        else:
            lo = mid
    return hi, trials
