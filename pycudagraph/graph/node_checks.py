"""Nodes and edges given to a graph or an exec, checked before CUDA.

==================== ==============================================================
check                used by
==================== ==============================================================
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
from ..nodes.table import node_arg

__all__ = ["new_edge", "old_edge", "exec_fields", "check_changes"]


def new_edge(graph, a, b, where: str = "add_dependency") -> None:
    """Before ``cudaGraphAddDependencies(a -> b)``: both nodes of ``graph``, not the same
    node, no edge ``a -> b`` yet, and no path ``b -> ... -> a`` (the edge would close a
    cycle). Reads edges with ``cudaGraphNodeGetDependencies`` / ``GetDependentNodes``."""
    node_arg(graph.table, a, "a", where)
    node_arg(graph.table, b, "b", where)
    if int(a) == int(b):
        raise ArgumentError(f"{where}: self-edge: {a!r} cannot depend on itself")
    if int(a) in {int(h) for h in versions.node_dependencies(b.handle)}:
        raise ArgumentError(f"{where}: duplicate edge: {b!r} already depends on {a!r}")
    path = _path(b, a)
    if path is not None:
        chain = " -> ".join(repr(graph.table.node(h)) for h in path)
        raise ArgumentError(f"{where}: cycle: {b!r} already reaches {a!r} ({chain}), "
                            f"so {a!r} -> {b!r} would close a cycle")


def _path(src, dst) -> list | None:
    """Node handles of a path src -> ... -> dst following dependents, or None."""
    parent = {int(src): None}
    frontier = [src]
    while frontier:
        nxt = []
        for node in frontier:
            for raw in versions.node_dependents(node.handle):
                h = int(raw)
                if h in parent:
                    continue
                parent[h] = int(node)
                if h == int(dst):
                    path = [h]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                nxt.append(node.graph.table.node(raw))
        frontier = nxt
    return None


def old_edge(graph, a, b, where: str = "remove_dependency") -> None:
    """Before ``cudaGraphRemoveDependencies(a -> b)``: the edge must exist."""
    node_arg(graph.table, a, "a", where)
    node_arg(graph.table, b, "b", where)
    if int(a) not in {int(h) for h in versions.node_dependencies(b.handle)}:
        raise ArgumentError(f"{where}: there is no edge {a!r} -> {b!r} to remove")


_FIELDS: dict = {}


def exec_fields(cls) -> tuple | None:
    """The keyword names ``cls.exec_set`` takes (None when it takes any)."""
    fields = _FIELDS.get(cls, False)
    if fields is False:
        params = list(inspect.signature(cls.exec_set).parameters.values())[2:]
        fields = (None if any(p.kind == p.VAR_KEYWORD for p in params)
                  else tuple(p.name for p in params))
        _FIELDS[cls] = fields
    return fields


def check_changes(node, changes: dict, where: str = "set_params") -> None:
    """Unknown field names for a node type raise, naming the fields that type has; a node
    type an exec cannot change raises :class:`ArgumentError` (a ``TypeError`` too)."""
    if type(node).exec_set is Node.exec_set:
        raise ArgumentError(f"set_params does not support {node.type} nodes")
    fields = exec_fields(type(node))
    if fields is None:
        return
    unknown = [k for k in changes if k not in fields]
    if unknown:
        raise ArgumentError(f"{where}: {type(node).__name__} has no field "
                            f"{', '.join(map(repr, unknown))}; its fields are {list(fields)}")
