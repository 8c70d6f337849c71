"""A graph as a tree of places: every node of a graph, of its child graphs and of its
conditional nodes' bodies, each with a path that says where it sits.

The profiler (:mod:`pycudagraph.profile.profile`) and the interactive page
(:mod:`pycudagraph.inspect.html`) both read a graph this way. Only public reads are made:
``Graph.nodes``, ``ChildGraphNode.child``, ``ConditionalNode.bodies``, ``Node.describe``.

A path is the node's position in its graph's ``nodes`` list (creation order), prefixed by
the path of the node that owns the graph and the body's name: ``"4"``, ``"4/body/0"``,
``"2/else/1"``, ``"3/child/0"``, ``"5/case 2/0"``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PyCudaGraphError
from ..nodes import Node

__all__ = ["Place", "walk", "bodies_of", "body_names", "node_label", "inside_conditionals"]


@dataclass(frozen=True)
class Place:
    """Where a node sits in a graph tree."""

    node: Node
    path: str
    depth: int
    parent: Node | None  # the child-graph or conditional node whose body holds it
    body: str | None  # that body's name ("child", "then", "else", "body", "case 1")


def bodies_of(node) -> tuple:
    """The graphs a node owns: a child graph node's embedded graph
    (``cudaGraphChildGraphNodeGetGraph``), a conditional node's bodies; none for other
    nodes, nor for a conditional node read back where the driver cannot say (before 13.2)."""
    t = str(node.type)
    try:
        if t == "child_graph":
            return (node.child,)
        if t == "conditional":
            return tuple(node.bodies)
    except PyCudaGraphError:  # NotSupportedError on an old driver, a closed body
        return ()
    return ()


def body_names(node, count: int) -> list[str]:
    """The names of a node's ``count`` bodies, as paths and the page show them (from a
    conditional node's ``kind``: ``"if"``, ``"if_else"``, ``"while"``, ``"switch"``)."""
    if str(node.type) == "child_graph":
        return ["child"]
    kind = getattr(node, "kind", "")
    names = {"if": ["then"], "if_else": ["then", "else"], "while": ["body"]}.get(kind)
    if names is not None and len(names) >= count:
        return names[:count]
    if kind == "switch":
        return [f"case {i}" for i in range(count)]
    return [f"body {i}" for i in range(count)]


def walk(graph, prefix: str = "", depth: int = 0, parent=None, body=None) -> list[Place]:
    """Every node of ``graph`` and, depth first after its owner, of the graphs its nodes
    own (``cudaGraphGetNodes`` for each graph)."""
    out = []
    for i, node in enumerate(graph.nodes):
        path = f"{prefix}{i}"
        out.append(Place(node, path, depth, parent, body))
        inner = bodies_of(node)
        for name, g in zip(body_names(node, len(inner)), inner):
            out += walk(g, f"{path}/{name}/", depth + 1, node, name)
    return out


def inside_conditionals(places) -> set:
    """The nodes of ``places`` (a :func:`walk`) that sit in a conditional node's body, at
    any depth: they may run any number of times per launch, or not at all. No CUDA call."""
    parents = {pl.node: pl.parent for pl in places}
    out = set()
    for pl in places:
        up = pl.parent
        while up is not None:
            if str(up.type) == "conditional":
                out.add(pl.node)
                break
            up = parents.get(up)
    return out


def node_label(node) -> str:
    """A short name for a node: the kernel's name for kernel nodes, else its one-line
    description (``Node.describe``), or its type where even that cannot be read."""
    try:
        if str(node.type) == "kernel":
            return node.kernel_name
        return node.describe()
    except PyCudaGraphError:
        return str(node.type)
