"""A graph as a tree of places: every node of a graph, of its child graphs and of its
conditional nodes' bodies, each with a path that says where it sits.

The profiler (:mod:`pycudagraph.profile.profile`) and the interactive page
(:mod:`pycudagraph.inspect.html`) both read a graph this way: the one walk,
:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`, with each owner naming its
subgraphs (:meth:`Node.subgraph_names <pycudagraph.nodes.base.Node.subgraph_names>`).

A path is the node's position in its graph's ``nodes`` list (creation order), prefixed by
the path of the node that owns the graph and the body's name: ``"4"``, ``"4/body/0"``,
``"2/else/1"``, ``"3/child/0"``, ``"5/case 2/0"``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..nodes import Node

__all__ = ["Place", "walk", "node_label", "inside_conditionals", "subgraph_ids"]


@dataclass(frozen=True)
class Place:
    """Where a node sits in a graph tree."""

    node: Node
    path: str
    depth: int
    parent: Node | None  # the child-graph or conditional node whose body holds it
    body: str | None  # that body's name ("child", "then", "else", "body", "case 1")


def subgraph_ids(owner, path: str) -> list:
    """``[(name, graph, path prefix of its nodes)]`` for the subgraphs of ``owner``, whose
    own path is ``path`` (:meth:`Node.subgraphs` and :meth:`Node.subgraph_names`)."""
    inner = owner.subgraphs()
    names = owner.subgraph_names()
    return [(name, g, f"{path}/{name}/") for name, g in zip(names, inner)]


def walk(graph) -> list[Place]:
    """Every node of ``graph`` and, depth first after its owner, of the graphs its nodes
    hold (:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`:
    ``cudaGraphGetNodes`` for each graph)."""
    out = []
    prefix = {id(graph.table): ("", None)}  # table -> (path prefix, body name)
    count: dict = {}
    paths: dict = {}
    named = set()
    for node, depth, owner in graph.table.walk():
        if owner is not None and owner not in named:  # the first node under an owner
            named.add(owner)
            for name, g, pre in subgraph_ids(owner, paths[owner]):
                prefix[id(g.table)] = (pre, name)
        table = node.graph.table
        pre, body = prefix[id(table)]
        i = count[id(table)] = count.get(id(table), -1) + 1
        paths[node] = path = f"{pre}{i}"
        out.append(Place(node, path, depth, owner, body))
    return out


def inside_conditionals(places) -> set:
    """The nodes of ``places`` (a :func:`walk`) that sit in the body of a node that runs its
    bodies any number of times (:attr:`Node.repeats_bodies`: a conditional node), at any
    depth: they may run any number of times per launch, or not at all. No CUDA call."""
    parents = {pl.node: pl.parent for pl in places}
    out = set()
    for pl in places:
        up = pl.parent
        while up is not None:
            if up.repeats_bodies:
                out.add(pl.node)
                break
            up = parents.get(up)
    return out


def node_label(node) -> str:
    """A short name for a node (:meth:`Node.label <pycudagraph.nodes.base.Node.label>`): the
    kernel's name for kernel nodes, else its one-line description, or its type where even
    that cannot be read."""
    return node.label()
