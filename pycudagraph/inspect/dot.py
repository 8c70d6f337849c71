"""Readable Graphviz DOT for graphs, and rendering it with the ``dot`` program."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .._cuda import call, rt
from ..errors import ArgumentError, PyCudaGraphError
from ..runtime.values import bool_arg, path_arg, seq_arg, str_arg

__all__ = ["write_debug_dot", "graph_to_dot", "render", "svg_or_none", "debug_dot_flags", "dot_flag_bits"]

_SHAPES = {"kernel": "box", "memcpy": "parallelogram", "memset": "parallelogram",
           "host": "hexagon", "child_graph": "box3d", "empty": "point",
           "event_record": "cds", "event_wait": "cds", "mem_alloc": "folder",
           "mem_free": "folder", "conditional": "diamond"}
_COLORS = {"kernel": "#cfe2ff", "memcpy": "#d1e7dd", "memset": "#d1e7dd", "host": "#fff3cd",
           "child_graph": "#e2d9f3", "event_record": "#f8d7da", "event_wait": "#f8d7da",
           "mem_alloc": "#e9ecef", "mem_free": "#e9ecef", "conditional": "#ffe5d0"}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_to_dot(graph, name: str = "pycudagraph") -> str:
    """DOT text: one box per node labelled with its type and what it does, then the edges.

    The graphs a node holds (a child graph, conditional bodies: :meth:`Node.subgraphs`) are
    drawn as boxed clusters, joined to their node by dashed edges; programmatic edges are
    drawn dashed and labelled with their port. The nodes come from the one walk
    (:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`).
    """
    str_arg(name, "to_dot: name")
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;", "  compound=true;",
             '  node [fontname="Helvetica", fontsize=10, style=filled, fillcolor=white];']
    members: dict = {}  # graph table -> its nodes, in creation order
    inner: dict = {}  # node -> the graphs it holds
    for node, _, _ in graph.table.walk():
        members.setdefault(id(node.graph.table), []).append(node)
        try:
            inner[node] = node.subgraphs()
        except PyCudaGraphError:  # bodies the driver cannot read: drawn as one node
            inner[node] = ()
    _emit(graph, "n", lines, "  ", members, inner)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _emit(graph, prefix: str, lines: list, indent: str, members: dict, inner: dict) -> dict:
    nodes = members.get(id(graph.table), [])
    ids = {n: f"{prefix}{i}" for i, n in enumerate(nodes)}
    for n in nodes:
        t = str(n.type)
        label = _quote(f"{ids[n]}: {n.describe()}").replace(" grid=", "\\ngrid=")
        attrs = [f"label={label}", f"shape={_SHAPES.get(t, 'box')}"]
        if t in _COLORS:
            attrs.append(f'fillcolor="{_COLORS[t]}"')
        lines.append(f"{indent}{ids[n]} [{', '.join(attrs)}];")
    for n in nodes:
        for j, body in enumerate(inner.get(n, ())):
            sub = f"{ids[n]}b{j}_"
            lines.append(f"{indent}subgraph {_quote('cluster_' + sub)} {{")
            lines.append(f"{indent}  label={_quote(f'{ids[n]} body {j}')}; style=dashed;")
            first = _emit(body, sub, lines, indent + "  ", members, inner)
            lines.append(f"{indent}}}")
            for root in body.root_nodes:
                lines.append(f"{indent}{ids[n]} -> {first[root]} [style=dashed, arrowhead=odot];")
    ports = _ports(graph)
    for a, b in graph.edges:
        port = ports.get((a, b), "default")
        style = "" if port == "default" else f" [style=dashed, label={_quote(port)}]"
        lines.append(f"{indent}{ids[a]} -> {ids[b]}{style};")
    return ids


def _ports(graph) -> dict:
    try:
        return graph.edge_data
    except Exception:  # no edge data before CUDA 12.3: every edge is a plain one
        return {}


def _dot_program() -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("rendering needs Graphviz's 'dot' program: install the graphviz "
                           "package (apt-get install graphviz, conda install graphviz, brew "
                           "install graphviz); Graph.to_dot() gives the DOT text without it")
    return exe


def render(dot_text: str, path, format: str | None = None) -> str:
    """Write ``dot_text`` rendered as SVG or PNG (from the suffix, or ``format``)."""
    path = Path(path_arg(path, "render: path"))
    if format is not None:
        str_arg(format, "render: format")
    fmt = (format or path.suffix.lstrip(".") or "svg").lower()
    if fmt not in ("svg", "png", "pdf"):
        raise ArgumentError(f"render supports svg, png and pdf, not {fmt!r}")
    out = subprocess.run([_dot_program(), f"-T{fmt}", "-o", str(path)], input=dot_text.encode(),
                         capture_output=True, check=False)
    if out.returncode:
        raise RuntimeError(f"dot failed: {out.stderr.decode(errors='replace').strip()}")
    return str(path)


def svg_or_none(dot_text: str):
    """SVG text for notebooks, or None when Graphviz is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    out = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True, check=False)
    return out.stdout.decode() if out.returncode == 0 else None


_DOT_PREFIX = "cudaGraphDebugDotFlags"


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def debug_dot_flags() -> dict:
    """``{snake_case_name: value}`` of every ``cudaGraphDebugDotFlags`` the installed
    cuda-bindings has (``verbose``, ``kernel_node_params``, ``handles``, ...). No CUDA call."""
    return {_snake(m[len(_DOT_PREFIX):]): int(getattr(rt.cudaGraphDebugDotFlags, m))
            for m in dir(rt.cudaGraphDebugDotFlags) if m.startswith(_DOT_PREFIX)}


def dot_flag_bits(names) -> int:
    """The OR of the named ``cudaGraphDebugDotFlags``; an unknown name raises
    :class:`~pycudagraph.errors.ArgumentError` listing the known ones. No CUDA call."""
    if isinstance(names, str):
        names = (names,)
    names = seq_arg(names, "debug_dot_print: flags")
    known = debug_dot_flags()
    bits = 0
    for name in names:
        if not isinstance(name, str) or name not in known:
            raise ArgumentError(f"debug_dot_print: no flag {name!r}; the flags are {sorted(known)}")
        bits |= known[name]
    return bits


def write_debug_dot(graph, path, verbose: bool = False, flags=()) -> None:
    """CUDA's own DOT description of ``graph`` written to ``path`` (``cudaGraphDebugDotPrint``);
    see :meth:`pycudagraph.Graph.debug_dot_print`."""
    path = path_arg(path, "debug_dot_print: path")
    verbose = bool_arg(verbose, "debug_dot_print: verbose")
    bits = dot_flag_bits(("verbose",) if verbose else ()) | dot_flag_bits(flags)
    call(rt.cudaGraphDebugDotPrint, graph.handle, os.fsencode(path), bits)
