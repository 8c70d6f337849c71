"""Compare two graphs node by node: ``d = pcg.diff(old, new)``.

Nodes are paired in creation order (``cudaGraphGetNodes``), as ``cudaGraphExecUpdate`` pairs
them: for a graph built with the ``add_*`` builders the order they were added in, for a
captured graph the order the work was issued (a topological order). Two graphs have the
same topology when they have as many nodes, of the same types (conditional nodes of the same
kind with as many bodies), joined by the same edges with the same ports, their bodies too.
For each pair, what differs is one :class:`Change` per field of the nodes'
:meth:`~pycudagraph.nodes.base.Node.fields` (no node type is asked):

============= ===================================================================
node          compared
============= ===================================================================
kernel        function, grid, block, shared_mem, each argument: by name when both
              kernels have a signature (built here), else by index, as bytes
              (:attr:`CapturedKernelNode.arguments <pycudagraph.CapturedKernelNode.arguments>`)
memcpy        dst, src, nbytes (and height, depth, direction)
memset        dst, value, element_size, count, height, pitch
host          the callable and its arguments (the raw function pointer otherwise)
event         the event
child graph   the child graph, compared the same way (its own :class:`GraphDiff`)
conditional   its bodies, compared the same way, node by node (a kernel argument holding
              the conditional handle of a node matches its pair's handle in the other graph)
others        their fields as read back (allocations, semaphores, batch ops)
============= ===================================================================

A change is settable when both nodes'
:attr:`~pycudagraph.nodes.base.Node.exec_fields` name its field.

Nothing is changed. :meth:`GraphExec.apply <pycudagraph.GraphExec.apply>` uses the same
comparison to update an exec with the fewest calls.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import ArgumentError, NotSupportedError
from ..nodes import ConditionalHandle, Node
from ..nodes.table import NodeTable
from .node_views import same

__all__ = ["diff", "compare", "GraphDiff", "Change"]

_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class Change:
    """One difference between two paired nodes.

    Attributes
    ----------
    node, new_node : Node
        The node of the old graph and its pair in the new one.
    field : str
        What differs: ``"function"``, ``"grid"``, ``"block"``, ``"shared_mem"``,
        ``"arg 'x'"`` (by name) or ``"arg 2"`` (by index), ``"dst"``, ``"src"``, ``"fn"``,
        ``"event"``, ``"graph"`` ...
    old, new
        The two values (argument bytes for a kernel without a signature).
    key : str or tuple
        The keyword an exec's per-node call takes for it (``("args", name_or_index)``
        for a kernel argument).
    settable : bool
        Whether an exec's per-node set-params call can carry the change (a kernel's
        function, a 3D copy, a raw host function ... need ``cudaGraphExecUpdate``).
    where : str
        ``"node 3"``, or ``"node 1 in body 0 of node 4"`` inside a conditional body.
    detail : GraphDiff or None
        A child graph's own comparison.
    """

    node: Node
    new_node: Node
    field: str
    old: object
    new: object
    key: object = None
    settable: bool = True
    where: str = ""
    detail: "GraphDiff | None" = None

    def __str__(self) -> str:
        text = f"{self.where} ({_label(self.node)}): {self.field}: "
        if self.detail is not None:
            inner = "; ".join(str(c) for c in self.detail.changes[:3]) or "; ".join(
                self.detail.topology[:3])
            return text + f"child graph differs ({inner})"
        return text + _show_pair(self.old, self.new)


class GraphDiff:
    """What differs between two graphs (:func:`diff`).

    Attributes
    ----------
    old, new : Graph
    same_topology : bool
        Same node count, node types, edges and ports, bodies included.
    topology : list of str
        The topology differences, in words (empty when the topology is the same).
    changes : list of Change
        Per paired node, what differs (pairs of the same type only).
    nodes : int
        How many node pairs were compared, bodies included.
    """

    def __init__(self, old, new, topology: list, changes: list, nodes: int):
        self.old, self.new = old, new
        self.topology = topology
        self.changes = changes
        self.nodes = nodes

    @property
    def same_topology(self) -> bool:
        """Whether the graphs pair node for node with the same edges. No CUDA call."""
        return not self.topology

    @property
    def changed_nodes(self) -> list:
        """The old graph's nodes that have changes, once each, in order. No CUDA call."""
        seen, out = set(), []
        for c in self.changes:
            if id(c.node) not in seen:
                seen.add(id(c.node))
                out.append(c.node)
        return out

    def __bool__(self) -> bool:
        return bool(self.topology or self.changes)

    def __len__(self) -> int:
        return len(self.topology) + len(self.changes)

    def __str__(self) -> str:
        if self.topology:
            head = f"GraphDiff: topology differs ({len(self.topology)} difference(s))"
        else:
            head = f"GraphDiff: same topology ({self.nodes} nodes)"
        head += f", {len(self.changes)} parameter change(s)"
        lines = [head]
        lines += [f"  topology: {t}" for t in self.topology]
        lines += [f"  {c}" for c in self.changes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<GraphDiff same_topology={self.same_topology} topology={len(self.topology)} "
                f"changes={len(self.changes)}>")


def diff(old, new) -> GraphDiff:
    """Compare two graphs node by node (see :mod:`pycudagraph.inspect.diff`); nothing is changed.

    Works on graphs built here, captured, or adopted with :meth:`Graph.wrap
    <pycudagraph.Graph.wrap>`.

    Parameters
    ----------
    old, new : Graph

    Returns
    -------
    GraphDiff
        ``d.same_topology``, ``d.changes`` (a list of :class:`Change`), ``str(d)``: a
        readable list.

    Notes
    -----
    Reads the graphs with ``cudaGraphGetNodes``, ``cudaGraphGetEdges`` (with edge data)
    and each node type's get-params call (``cuGraphKernelNodeGetParams`` for kernel nodes
    read back, ``cudaGraphMemcpyNodeGetParams`` ...).
    """
    for name, g in (("old", old), ("new", new)):
        if not isinstance(getattr(g, "table", None), NodeTable):
            raise ArgumentError(f"diff: {name} must be a pycudagraph.Graph, got {type(g).__name__}")
        g.handle  # noqa: B018 - a closed graph raises ClosedError here
    return compare(old, new)


def compare(old, new, old_view=None) -> GraphDiff:
    """:func:`diff` with the old side's fields read from ``old_view(node)`` when given: an
    object with ``fields()`` and ``exec_fields`` standing for ``node``
    (:meth:`GraphExec.apply <pycudagraph.GraphExec.apply>` reads its exec's own records this
    way). Calls as :func:`diff`."""
    acc = _Found()
    _compare_graphs(old, new, old_view, "", acc)
    return GraphDiff(old, new, acc.topology, acc.changes, acc.count)


class _Found:
    __slots__ = ("topology", "changes", "count", "handles")

    def __init__(self):
        self.topology: list = []
        self.changes: list = []
        self.count = 0
        self.handles: dict = {}  # new graph's conditional handle -> the old graph's twin


def _compare_graphs(old, new, old_view, suffix: str, acc: _Found) -> None:
    a, b = old.nodes, new.nodes
    if len(a) != len(b):
        acc.topology.append(f"{'graph' if not suffix else 'body' + suffix}: "
                            f"{len(a)} nodes -> {len(b)} nodes")
    pairs = []
    for i, (x, y) in enumerate(zip(a, b)):
        where = f"node {i}{suffix}"
        acc.count += 1
        kx, ky = x.shape(), y.shape()
        if kx != ky:
            acc.topology.append(f"{where}: {kx} -> {ky}")
            continue
        src = old_view(x) if old_view is not None else x
        fx, fy = src.fields(), y.fields()
        for k, v in fx.items():  # each graph has its own handles: a pair's are the same one
            w = fy.get(k)
            if isinstance(v, ConditionalHandle) and isinstance(w, ConditionalHandle):
                acc.handles[w.value] = v.value
        pairs.append((x, y, src, fx, fy, where))
    for x, y, src, fx, fy, where in pairs:
        _compare_pair(x, y, src, fx, fy, where, acc)
        for k, (bx, by) in enumerate(zip(_inline(x, fx), _inline(y, fy))):
            _compare_graphs(bx, by, old_view, f" in body {k} of {where}", acc)
    ia = {int(n): i for i, n in enumerate(a)}
    ib = {int(n): i for i, n in enumerate(b)}
    ea, eb = _edge_set(old, ia), _edge_set(new, ib)
    for (i, j, port), what in [(e, "removed") for e in sorted(ea - eb)] + \
                              [(e, "added") for e in sorted(eb - ea)]:
        kind = "" if port == "default" else f" ({port})"
        acc.topology.append(f"edge node {i} -> node {j}{kind}{suffix} {what}")


def _is_graph(value) -> bool:
    return isinstance(getattr(value, "table", None), NodeTable)


def _inline(node, fields: dict) -> tuple:
    """The graphs ``node`` holds that are not one of its fields (a conditional node's
    bodies): compared node by node, as parts of the graph holding them."""
    inner = node.subgraphs()
    if not inner:
        return ()
    named = {id(v) for v in fields.values() if _is_graph(v)}
    return tuple(g for g in inner if id(g) not in named)


def _edge_set(graph, index: dict) -> set:
    """{(from, to, port)} by creation index (``cudaGraphGetEdges`` with edge data)."""
    try:
        data = graph.edge_data
    except NotSupportedError:  # bindings without edge data: every edge is a default one
        data = {e: "default" for e in graph.edges}
    return {(index[int(a)], index[int(b)], port) for (a, b), port in data.items()
            if int(a) in index and int(b) in index}


def _compare_pair(x, y, src, fx: dict, fy: dict, where: str, acc: _Found) -> None:
    """The changes between the fields of a pair (:meth:`Node.fields`): a graph field as one
    change with its own comparison, a dict field (a kernel's arguments) entry by entry, a
    conditional handle not at all (each graph has its own); settable where both nodes'
    :attr:`~pycudagraph.nodes.base.Node.exec_fields` name the field."""
    settable_keys = src.exec_fields & y.exec_fields

    def add(field, old, new, key, settable, detail=None):
        acc.changes.append(Change(x, y, field, old, new, key, settable, where, detail))

    for k in list(fx) + [k for k in fy if k not in fx]:
        a, b = fx.get(k), fy.get(k)
        if isinstance(a, ConditionalHandle) or isinstance(b, ConditionalHandle):
            continue
        if _is_graph(a) and _is_graph(b):
            sub = compare(a, b)
            if sub:
                add(k, a, b, k, sub.same_topology and k in settable_keys, sub)
        elif isinstance(a, dict) and isinstance(b, dict):
            _entry_changes(k, a, b, src, y, add, k in settable_keys, acc.handles)
        elif not same(a, b):
            add(k, a, b, k, k in settable_keys)


def _entry_changes(name: str, a: dict, b: dict, src, y, add, settable: bool,
                   handles: dict) -> None:
    """A dict field (a kernel's ``args``) entry by entry: by name when both sides name the
    same entries, else by index as the nodes' argument bytes (``arguments``)."""
    one = name[:-1] if name.endswith("s") else name  # "args" -> "arg 'b'", "arg 2"
    if list(a) == list(b):
        for k in a:
            u, v = a[k], b[k]
            if not same(u, v) and not _handle_pair(u, v, handles):
                add(f"{one} {k!r}" if isinstance(k, str) else f"{one} {k}", u, v, (name, k),
                    settable)
        return
    ra, rb = tuple(src.arguments), tuple(y.arguments)
    if len(ra) != len(rb):
        add("arguments", len(ra), len(rb), "arguments", False)
        return
    for i, (u, v) in enumerate(zip(ra, rb)):
        if u != v and not _handle_pair(u, v, handles):
            add(f"{one} {i}", u, v, (name, i), settable)


def _handle_pair(u, v, handles: dict) -> bool:
    """Whether ``v`` is the conditional handle paired with ``u`` (as an int or 8 bytes)."""
    if type(v) is int:
        return handles.get(v) == u
    if isinstance(v, (bytes, bytearray)) and len(v) == 8 and isinstance(u, (bytes, bytearray)):
        return handles.get(_U64.unpack(v)[0]) == _U64.unpack(u)[0]
    return False


def _label(node) -> str:
    """The node's type, and its name where its label is more than a description starting
    with the type (``"kernel axpy"``, ``"memcpy"``)."""
    try:
        t, name = str(node.type), node.label()
        return t if name.startswith(t) else f"{t} {name}"
    except Exception:  # a node whose graph is gone: say what it was
        return type(node).__name__


def _show(v) -> str:
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return hex(v) if abs(v) >= 1 << 16 else str(v)
    if isinstance(v, (bytes, bytearray)):
        if len(v) == 8:
            return f"0x{_U64.unpack(v)[0]:x}"
        return "0x" + bytes(v).hex() if len(v) <= 8 else f"<{len(v)} bytes>"
    if callable(v):
        return getattr(v, "__qualname__", None) or repr(v)
    text = repr(v)
    return text if len(text) < 60 else text[:57] + "..."


def _show_pair(a, b) -> str:
    """``old -> new``; for long argument bytes, only the 8-byte words that differ."""
    if (isinstance(a, (bytes, bytearray)) and isinstance(b, (bytes, bytearray))
            and len(a) == len(b) > 8 and len(a) % 8 == 0):
        words = [k for k in range(0, len(a), 8) if a[k:k + 8] != b[k:k + 8]]
        if len(words) <= 4:
            return ", ".join(f"bytes {k}..{k + 7}: {_show(a[k:k + 8])} -> {_show(b[k:k + 8])}"
                             for k in words)
    return f"{_show(a)} -> {_show(b)}"
