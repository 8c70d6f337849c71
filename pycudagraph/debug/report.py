"""What the reports of this wing say about a node, and the checks of their arguments."""

from __future__ import annotations

from ..errors import ArgumentError, PyCudaGraphError

__all__ = ["graph_of", "node_name", "fields_lines", "value_text", "positive",
           "findings_for", "trials_line"]


def graph_of(graph_or_exec, where: str):
    """The graph of a :class:`~pycudagraph.Graph` or of a
    :class:`~pycudagraph.GraphExec` made from one (:class:`ArgumentError` otherwise)."""
    from ..graph.exec import GraphExec
    from ..graph.graph import Graph
    if isinstance(graph_or_exec, Graph):
        return graph_or_exec
    if isinstance(graph_or_exec, GraphExec):
        if graph_or_exec.graph is None:
            raise ArgumentError(f"{where}: this GraphExec has no graph to read (wrapped without "
                                "graph=): pass GraphExec.wrap(handle, graph=g), or the graph")
        return graph_or_exec.graph
    raise ArgumentError(f"{where}: expected a Graph or GraphExec, got "
                        f"{type(graph_or_exec).__name__}")


def positive(value, where: str, name: str, integer: bool = False):
    """``value`` checked: a number above 0 (an int when ``integer``)."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        what = "an int >= 1" if integer else "a number of seconds > 0"
        raise ArgumentError(f"{where}: {name} must be {what}, got {value!r}")
    return value


def node_name(node) -> str:
    """``kernel 'name'`` (``cuFuncGetName`` for a node read back), or the node's type."""
    try:
        label = node.label()
    except PyCudaGraphError:
        label = ""
    kind = str(node.type)
    return f"{kind} {label!r}" if label and label != kind else kind


def value_text(v, limit: int = 60) -> str:
    """A field value in a few characters: addresses as hex, bytes as hex, others repr'd."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0x10000:
        text = f"0x{v:x}"
    elif isinstance(v, (bytes, bytearray)):
        text = f"bytes {bytes(v).hex()}"
    else:
        text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fields_lines(node) -> list:
    """The node's :meth:`~pycudagraph.nodes.base.Node.fields`, one line each; a kernel's
    arguments one line each."""
    try:
        fields = node.fields()
    except PyCudaGraphError as exc:
        return [f"(its fields cannot be read: {exc})"]
    out = []
    for name, v in fields.items():
        if isinstance(v, dict):
            out.append(f"{name}:")
            out += [f"  {k}: {value_text(x)}" for k, x in v.items()]
        else:
            out.append(f"{name}: {value_text(v)}")
    return out


def findings_for(graph, node, inside: set) -> tuple:
    """``(findings, note)``: the audit's findings (``graph.audit()``) about ``node`` or a
    node inside it (``inside``); ``note`` says why there are none when the audit failed."""
    try:
        found = graph.audit()
    except PyCudaGraphError as exc:
        return [], f"the audit could not run: {exc}"
    return [f for f in found if f.node is node or f.node in inside], ""


def trials_line(trials: list, n: int) -> str:
    """``nodes 1-200: fault, 1-100: ok, ...``"""
    return ", ".join(f"1-{t.k}: {t.outcome}" if t.k > 1 else f"1: {t.outcome}" for t in trials)
