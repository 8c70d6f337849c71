"""Nodes and edges given to a graph or an exec, checked before CUDA.

==================== ==============================================================
check                used by
==================== ==============================================================
:func:`node_arg`     every method that takes a node (edges, find, exec updates)
:func:`dep_handles`  every builder's ``deps=``: nodes of this graph, no repeats
:func:`new_edge`     ``Graph.add_dependency``: self-edge, duplicate, cycle
:func:`old_edge`     ``Graph.remove_dependency``: the edge must exist
:func:`check_changes` ``GraphExec.set_params``: field names of the node type
==================== ==============================================================
"""

from __future__ import annotations

import inspect

from .._cuda import versions
from ..errors import ArgumentError
from ..nodes.base import Node
from ..runtime.values import short_repr

__all__ = ["node_arg", "dep_handles", "new_edge", "old_edge", "exec_fields", "check_changes"]


def node_arg(graph, node, what: str, where: str):
    """Check that ``node`` is a Node of ``graph`` (or, with ``graph=None``, any Node).

    A node of another graph raises :class:`ArgumentError`, or :class:`ClosedError` when
    that graph was destroyed or the node removed."""
    if not isinstance(node, Node):
        raise ArgumentError(f"{where}: {what} must be a graph node, got {short_repr(node)} "
                            f"({type(node).__name__})")
    if graph is not None and node.graph is not graph and node._h not in graph._nodes:
        node._check_live()  # a node of a destroyed graph: say so (ClosedError)
        raise ArgumentError(f"{where}: {what} {node!r} belongs to another graph "
                            f"({node.graph!r}), not to {graph!r}")
    return node


def dep_handles(graph, deps, where: str = "deps") -> list:
    """The nodes of ``deps`` (None, one node, or a sequence), checked: each a node of
    ``graph``, no repeats."""
    if deps is None:
        return []
    if isinstance(deps, Node):
        deps = (deps,)
    elif not isinstance(deps, (tuple, list)):
        try:
            deps = tuple(deps)
        except TypeError:
            raise ArgumentError(f"{where} must be a node or a sequence of nodes, got "
                                f"{short_repr(deps)} ({type(deps).__name__})") from None
    seen = set()
    for i, d in enumerate(deps):
        node_arg(graph, d, f"deps[{i}]", where)
        if d._h in seen:
            raise ArgumentError(f"{where}: deps lists {d!r} twice (duplicate dependency)")
        seen.add(d._h)
    return list(deps)


def new_edge(graph, a, b, where: str = "add_dependency") -> None:
    """Before ``cudaGraphAddDependencies(a -> b)``: both nodes of ``graph``, not the same
    node, no edge ``a -> b`` yet, and no path ``b -> ... -> a`` (the edge would close a
    cycle). Reads edges with ``cudaGraphNodeGetDependencies`` / ``GetDependentNodes``."""
    node_arg(graph, a, "a", where)
    node_arg(graph, b, "b", where)
    if a._h == b._h:
        raise ArgumentError(f"{where}: self-edge: {a!r} cannot depend on itself")
    if a._h in {int(h) for h in versions.node_dependencies(b.handle)}:
        raise ArgumentError(f"{where}: duplicate edge: {b!r} already depends on {a!r}")
    path = _path(b, a)
    if path is not None:
        chain = " -> ".join(repr(graph._node(h)) for h in path)
        raise ArgumentError(f"{where}: cycle: {b!r} already reaches {a!r} ({chain}), "
                            f"so {a!r} -> {b!r} would close a cycle")


def _path(src, dst) -> list | None:
    """Node handles of a path src -> ... -> dst following dependents, or None."""
    parent = {src._h: None}
    frontier = [src]
    while frontier:
        nxt = []
        for node in frontier:
            for raw in versions.node_dependents(node.handle):
                h = int(raw)
                if h in parent:
                    continue
                parent[h] = node._h
                if h == dst._h:
                    path = [h]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                nxt.append(node.graph._node(raw))
        frontier = nxt
    return None


def old_edge(graph, a, b, where: str = "remove_dependency") -> None:
    """Before ``cudaGraphRemoveDependencies(a -> b)``: the edge must exist."""
    node_arg(graph, a, "a", where)
    node_arg(graph, b, "b", where)
    if a._h not in {int(h) for h in versions.node_dependencies(b.handle)}:
        raise ArgumentError(f"{where}: there is no edge {a!r} -> {b!r} to remove")


_FIELDS: dict = {}


def exec_fields(cls) -> tuple | None:
    """The keyword names ``cls._exec_set`` takes (None when it takes any)."""
    fields = _FIELDS.get(cls, False)
    if fields is False:
        params = list(inspect.signature(cls._exec_set).parameters.values())[3:]
        fields = (None if any(p.kind == p.VAR_KEYWORD for p in params)
                  else tuple(p.name for p in params))
        _FIELDS[cls] = fields
    return fields


def check_changes(node, changes: dict, where: str = "set_params") -> None:
    """Unknown field names for a node type raise, naming the fields that type has."""
    fields = exec_fields(type(node))
    if fields is None:
        return
    unknown = [k for k in changes if k not in fields]
    if unknown:
        raise ArgumentError(f"{where}: {type(node).__name__} has no field "
                            f"{', '.join(map(repr, unknown))}; its fields are {list(fields)}")
