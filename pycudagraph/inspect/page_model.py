"""A graph as plain data for the interactive page (:mod:`pycudagraph.inspect.html`).

The model is JSON: ``{"title", "root", "graphs", "nodes", "profile", "findings"}``.
``graphs`` maps a graph id to ``{"nodes": [node ids], "edges": [[from, to, port]]}``;
``nodes`` maps a node id (its path, :mod:`pycudagraph.inspect.tree`) to ``{"type", "label",
"path", "bodies": [{"name", "graph"}], "details": [[key, value]], "args": [[name, value,
decoded]], "time_us", "share", "runs", "findings"}``, and for a library kernel whose
mangled name says what it computes, ``"operation"`` (shown under its name). The page needs
nothing else, so a test (or a saved graph file) can hand it a model made without a GPU.
"""

from __future__ import annotations

import struct

from ..compile.cxx_names import mangled_operation
from ..errors import ArgumentError, PyCudaGraphError
from .tree import subgraph_ids, walk

__all__ = ["graph_model", "describe_value", "decode_bytes", "node_entry", "short_bytes",
           "with_mangled_name"]

_ADDRESS_KEYS = {"dst", "src", "ptr", "address", "fn", "user_data", "function"}


def short_bytes(n: int) -> str:
    """A size in bytes as people read it: ``64.0 KiB``, ``1.5 GiB``, ``12 B``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _fmt_bytes(n: int) -> str:
    short = short_bytes(n)
    return short if n < 1 << 10 else f"{short} ({n} B)"


def node_entry(type_: str, label: str, path: str, details=(), args=()) -> dict:
    """A node of the model (see the module docstring), with no bodies, times or findings
    yet: ``details`` ``[[key, text]]``, ``args`` ``[[name, value, decoded]]``."""
    return {"type": type_, "label": label, "path": path, "bodies": [],
            "details": [list(kv) for kv in details], "args": [list(a) for a in args],
            "time_us": None, "share": None, "runs": None, "findings": []}


def with_mangled_name(entry: dict, mangled: str, at: int = 0) -> dict:
    """``entry`` (a kernel node's) with what its mangled name tells: the name among its
    details at ``at`` (``mangled name``, which the page's search reads) where the label
    is a shorter form, and the operation its template arguments name
    (:func:`~pycudagraph.compile.cxx_names.mangled_operation`), shown under the label.
    No CUDA call."""
    if mangled != entry["label"]:
        entry["details"].insert(at, ["mangled name", mangled])
        operation = mangled_operation(mangled)
        if operation is not None:
            entry["operation"] = operation
            entry["details"].insert(at + 1, ["operation", operation])
    return entry


def describe_value(value, key: str = "") -> str:
    """A kernel argument or parameter as the page shows it: addresses in hex, buffers with
    their size, callables by name, numbers as they are."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"0x{value:x}" if key in _ADDRESS_KEYS and value else str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return "(" + ", ".join(str(v) for v in value) + ")"
    nbytes = getattr(value, "nbytes", None)
    ptr = getattr(value, "ptr", None)
    if isinstance(ptr, int) and isinstance(nbytes, int):
        return f"{type(value).__name__} 0x{ptr:x}, {_fmt_bytes(nbytes)}"
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if callable(value) and name:
        return f"{name}()"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def decode_bytes(data: bytes) -> str:
    """What the bytes of a captured kernel argument may mean: a pointer or 64-bit
    integer, a 32-bit integer and float, or the first bytes of a struct, in hex."""
    n = len(data)
    if n == 8:
        (u,) = struct.unpack("<Q", data)
        (d,) = struct.unpack("<d", data)
        return f"u64 0x{u:x} = {u}" + (f", f64 {d:.6g}" if 1e-30 < abs(d) < 1e30 else "")
    if n == 4:
        (i,) = struct.unpack("<i", data)
        (f,) = struct.unpack("<f", data)
        return f"i32 {i}" + (f", f32 {f:.6g}" if 1e-30 < abs(f) < 1e30 else "")
    if n in (1, 2):
        return f"int {int.from_bytes(data, 'little', signed=True)}"
    words = [f"0x{struct.unpack_from('<Q', data, k)[0]:x}" for k in range(0, min(n, 64) - 7, 8)]
    more = " ..." if n > 64 else ""
    return f"{n}-byte struct; 8-byte words: {' '.join(words)}{more}"


def _is_graph(value) -> bool:
    return hasattr(value, "table") and hasattr(value, "nodes")  # a Graph: drawn, not listed


def _details(node, fields: dict) -> list:
    """``[[key, text]]`` of a node's fields (:meth:`Node.fields`), but the arguments (their
    own table) and subgraphs (drawn as nested graphs); ``bytes`` where the node's work has
    a size its fields do not show (a memset)."""
    out = []
    for key, value in fields.items():
        if isinstance(value, dict) or _is_graph(value):
            continue
        text = _fmt_bytes(value) if key == "nbytes" and isinstance(value, int) else \
            describe_value(value, key)
        out.append([key, text])
    work = node.work()
    if work is not None and isinstance(work[1], int) and "nbytes" not in fields:
        out.append(["bytes", _fmt_bytes(work[1])])
    return out


def _args(node, fields: dict) -> list:
    """``[[name, value, decoded]]`` of the node's argument fields (a dict field): by name
    with pointers (a site of that argument, :meth:`Node.sites`) in hex for kernels built
    here, by index with their bytes decoded for captured ones."""
    out = []
    for value in fields.values():
        if not isinstance(value, dict):
            continue
        pointers = None
        for i, (name, v) in enumerate(value.items()):
            if isinstance(v, (bytes, bytearray)):
                out.append([f"arg {name}", bytes(v).hex(), decode_bytes(bytes(v))])
                continue
            if pointers is None:
                pointers = {s.arg for s in node.sites()}
            out.append([name, describe_value(v, "ptr" if i in pointers else ""), ""])
    return out


def _node_entry(node, path: str) -> dict:
    entry = node_entry(str(node.type), node.label(), path)
    try:
        fields = node.fields()
        entry["details"] = _details(node, fields)
        entry["args"] = _args(node, fields)
        mangled = getattr(node, "mangled_name", None)  # a kernel's name in its image
        if mangled is not None:
            with_mangled_name(entry, mangled, at=1)
    except PyCudaGraphError as exc:
        entry["details"].append(["unreadable", str(exc)])
    return entry


def _edges(graph, ids: dict) -> list:
    try:
        ports = graph.edge_data  # cudaGraphGetEdges with edge data (CUDA 12.3)
    except PyCudaGraphError:
        ports = {e: "default" for e in graph.edges}
    return [[ids[a], ids[b], port] for (a, b), port in ports.items()]


def _add_graphs(model: dict, graph, where: dict) -> None:
    """Every node of the walk (:func:`~pycudagraph.inspect.tree.walk`) into
    ``model["nodes"]``, and each graph, the root and every subgraph, into
    ``model["graphs"]`` with its nodes and edges."""
    graphs = {id(graph.table): ["root", graph, []]}
    for pl in walk(graph):
        where[pl.node] = pl.path
        entry = model["nodes"][pl.path] = _node_entry(pl.node, pl.path)
        graphs[id(pl.node.graph.table)][2].append(pl.node)
        try:
            inner = subgraph_ids(pl.node, pl.path)
        except PyCudaGraphError:  # bodies the driver cannot read: drawn as one node
            inner = ()
        for name, body, _ in inner:
            bid = f"{pl.path}/{name}"
            entry["bodies"].append({"name": name, "graph": bid})
            graphs[id(body.table)] = [bid, body, []]
    for gid, g, nodes in graphs.values():
        model["graphs"][gid] = {"nodes": [where[n] for n in nodes], "edges": _edges(g, where)}


def _finding_list(findings) -> list:
    out = []
    if findings is not None and (isinstance(findings, (str, bytes, dict))
                                 or not hasattr(findings, "__iter__")):
        raise ArgumentError(f"to_html: findings must be a list (g.audit()), got "
                            f"{type(findings).__name__}")
    for f in (() if findings is None else findings):
        try:
            out.append((f.node, str(f.place), f.address, str(f.problem)))
        except AttributeError:
            raise ArgumentError(f"to_html: each finding needs .node, .place, .address and "
                                f".problem (what Graph.audit() returns), got {f!r}") from None
    return out


def graph_model(graph, profile=None, findings=None, title: str | None = None) -> dict:
    """The page's model of ``graph`` (reads every node: ``cudaGraphGetNodes``,
    ``cudaGraphGetEdges``, each node's ``cudaGraph*NodeGetParams``), with the times of
    ``profile`` (what :meth:`GraphExec.profile` returned) and ``findings`` (objects with
    ``.node``, ``.place``, ``.address``, ``.problem``) on their nodes."""
    listed = _finding_list(findings)
    if title is not None and not isinstance(title, str):
        raise ArgumentError(f"to_html: title must be a str, got {type(title).__name__}")
    model = {"title": title or f"Graph 0x{int(graph.handle):x}", "root": "root",
             "graphs": {}, "nodes": {}, "profile": None, "findings": len(listed)}
    where: dict = {}
    _add_graphs(model, graph, where)
    if profile is not None:
        if not all(hasattr(profile, a) for a in ("rows", "total_us", "method")):
            raise ArgumentError(f"to_html: profile must be what GraphExec.profile returned, got "
                                f"{type(profile).__name__}")
        model["profile"] = {"method": profile.method, "total_us": profile.total_us,
                            "repeats": profile.repeats,
                            "critical_path": [where[n] for n in profile.critical_path
                                              if n in where]}
        for row in profile.rows:
            entry = model["nodes"].get(where.get(row.node, ""))
            if entry is not None and row.seen:
                entry["time_us"] = row.us
                entry["runs"] = row.runs
                entry["share"] = row.us / profile.total_us if profile.total_us > 0 else None
    for node, place, address, problem in listed:
        entry = model["nodes"].get(where.get(node, ""))
        if entry is None:
            raise ArgumentError(f"to_html: finding {problem!r} names {node!r}, which is not a "
                                "node of this graph")
        addr = f"0x{address:x}" if isinstance(address, int) else ("" if address is None
                                                                   else str(address))
        entry["findings"].append({"place": place, "address": addr, "problem": problem})
    return model
