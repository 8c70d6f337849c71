"""Update an exec to another graph's work with the fewest calls: ``exe.apply(new)``.

The exec's nodes are compared with ``new``'s (:mod:`pycudagraph.inspect.diff`), the exec's
side read from the exec's own records (what per-node updates made of it), not from the
graph it was made from. Then, cheapest first:

1. nothing differs: no call;
2. same topology, every change one an exec's per-node call can carry: one set-params call
   per changed node (``cuGraphExecKernelNodeSetParams`` with all its changed arguments
   and dimensions, ``cudaGraphExecMemcpyNodeSetParams1D`` ...), unless one
   ``cuGraphExecUpdate`` is estimated cheaper (:data:`COSTS`, measured by
   :func:`~pycudagraph.apply.calibrate.calibrate`);
3. otherwise ``cuGraphExecUpdate`` (a topology change, a kernel's function ...);
4. when CUDA refuses: ``fallback="reinstantiate"`` instantiates ``new`` with the exec's
   flags (``cudaGraphExecGetFlags``, ``cudaGraphInstantiateWithFlags``) and swaps the
   handle in place: the same :class:`~pycudagraph.GraphExec` object keeps working, now
   holding ``new``'s objects; ``fallback="raise"`` raises
   :class:`~pycudagraph.errors.GraphExecUpdateError` and the exec is unchanged.

A per-node call refused half-way is undone (the nodes already set get their old values
back) before the whole-graph update is tried. CUDA's sticky error is cleared either way.
The :class:`ApplyReport` says which way was taken, the calls made, and why CUDA refused.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from .._cuda import call, rt
from ..compile.args import ArgPack
from ..errors import ArgumentError, CudaError, GraphExecUpdateError, PyCudaGraphError
from ..nodes.table import NodeTable
from ..inspect.diff import GraphDiff, compare
from ..inspect.node_views import held_view

__all__ = ["apply", "ApplyReport", "ApplyCosts", "COSTS", "FALLBACKS", "STRATEGIES"]

FALLBACKS = ("reinstantiate", "raise")
#: ``"auto"``: per-node calls or one update, whichever :data:`COSTS` says is cheaper.
STRATEGIES = ("auto", "set_params", "update")


@dataclass
class ApplyCosts:
    """What :func:`apply` expects each way to cost, in microseconds of host time.

    The defaults are rough guesses; :func:`pycudagraph.apply.calibrate.calibrate`
    measures them on this machine (through pycudagraph, Python included) and stores them
    in :data:`COSTS`.
    """

    per_node_call_us: float = 8.0     # one exec set-params call
    update_base_us: float = 20.0      # cuGraphExecUpdate of an empty graph
    update_per_node_us: float = 2.0   # and per node (the driver, and pairing the records again)

    def set_params_us(self, calls: int) -> float:
        return calls * self.per_node_call_us

    def update_us(self, nodes: int) -> float:
        return self.update_base_us + nodes * self.update_per_node_us


#: The estimates :func:`apply` chooses by (``apply_calibrate.calibrate()`` replaces them).
COSTS = ApplyCosts()


@dataclass
class ApplyReport:
    """What :func:`apply` did.

    Attributes
    ----------
    method : str
        ``"unchanged"`` (no call), ``"set_params"`` (per-node calls), ``"update"`` (one
        ``cuGraphExecUpdate``) or ``"reinstantiate"`` (the update was refused).
    calls : list of str
        The raw update calls made, in order (``"cuGraphExecKernelNodeSetParams (node 3)"``).
    diff : GraphDiff
        The comparison of the exec with the new graph.
    reason : str
        Why CUDA refused (its update result in words), ``""`` when it did not.
    node : Node or None
        The node CUDA named when it refused.
    error : Exception or None
        The refusal (:class:`~pycudagraph.errors.GraphExecUpdateError`, or the
        :class:`~pycudagraph.errors.CudaError` of a refused per-node call).
    estimate_us : dict
        The estimates the choice was made by: ``{"set_params": us, "update": us}``.
    seconds : float
        Host time the whole apply took.
    """

    method: str
    calls: list
    diff: GraphDiff
    reason: str = ""
    node: object = None
    error: object = None
    estimate_us: dict = field(default_factory=dict)
    seconds: float = 0.0

    def __str__(self) -> str:
        text = f"apply: {self.method}, {len(self.calls)} call(s) in {self.seconds * 1e6:.0f} us"
        if self.reason:
            text += f"; CUDA refused the update: {self.reason}"
            if self.node is not None:
                text += f" (node: {self.node!r})"
        return text + "\n" + "\n".join(f"  {c}" for c in self.calls)


def apply(exe, graph, fallback: str = "reinstantiate", strategy: str = "auto",
          adopt=None) -> ApplyReport:
    """Make ``exe`` run ``graph``'s work with the fewest calls (see the module docstring).

    Parameters
    ----------
    exe : GraphExec
        An exec whose source graph is known (made by ``instantiate``, or wrapped with
        ``graph=``).
    graph : Graph
        The new work: built, captured or adopted.
    fallback : {"reinstantiate", "raise"}
        What to do when CUDA refuses the update.
    strategy : {"auto", "set_params", "update"}
        Per-node calls or one ``cuGraphExecUpdate`` where both can do it: by the
        :data:`COSTS` estimates, or forced.
    adopt : callable
        The exec's bookkeeping (``GraphExec._adopt``), handed over by
        :meth:`GraphExec.apply <pycudagraph.GraphExec.apply>`.

    Returns
    -------
    ApplyReport

    Raises
    ------
    GraphExecUpdateError
        With ``fallback="raise"``, when CUDA refuses (``.reason``, ``.node``); the exec is
        unchanged and launches its old work.

    Notes
    -----
    Reads as :func:`~pycudagraph.inspect.diff.diff` does (``cuGraphKernelNodeGetParams`` for
    kernel nodes read back); updates with the exec set-params calls
    (``cuGraphExecKernelNodeSetParams``, ``cudaGraphExecMemcpyNodeSetParams1D``,
    ``cudaGraphExecMemsetNodeSetParams``, ``cudaGraphExecHostNodeSetParams``,
    ``cudaGraphExecChildGraphNodeSetParams``, ``cudaGraphExecEventRecordNodeSetEvent`` ...)
    or ``cuGraphExecUpdate``; re-instantiates with ``cudaGraphExecGetFlags`` and
    ``cudaGraphInstantiateWithFlags`` (the old handle goes with ``cudaGraphExecDestroy``);
    clears the sticky error with ``cudaGetLastError``.
    """
    if not isinstance(fallback, str) or fallback not in FALLBACKS:
        raise ArgumentError(f"apply: fallback must be one of {FALLBACKS}, got {fallback!r}")
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ArgumentError(f"apply: strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not isinstance(getattr(graph, "table", None), NodeTable):
        raise ArgumentError(f"apply: graph must be a pycudagraph.Graph, got {type(graph).__name__}")
    if exe.graph is None:
        raise PyCudaGraphError("apply needs the exec's graph: wrap it with "
                               "GraphExec.wrap(handle, graph=Graph.wrap(graph_handle))")
    exe.handle  # noqa: B018 - a closed exec raises ClosedError here
    graph.handle  # noqa: B018 - a closed graph too
    start = time.perf_counter()
    d = compare(exe.graph, graph, _exec_view(exe))
    report = ApplyReport("unchanged", [], d)
    plan = _plan(d) if d.same_topology else None
    if plan is not None:
        report.estimate_us = {"set_params": COSTS.set_params_us(len(plan)),
                              "update": COSTS.update_us(d.nodes)}
        cheaper = report.estimate_us["set_params"] <= report.estimate_us["update"]
        if not plan or strategy == "set_params" or (strategy == "auto" and cheaper):
            try:
                _set_nodes(exe, plan, report)
            except (CudaError, ArgumentError, TypeError) as exc:  # undone: try the update
                rt.cudaGetLastError()
                report.error = exc
            else:
                adopt(None, graph)
                report.method = "set_params" if plan else "unchanged"
                return _done(report, start)
    try:
        exe.update(graph)  # cuGraphExecUpdate; a refusal changes nothing
        report.calls.append("cuGraphExecUpdate")
        report.method = "update"
    except GraphExecUpdateError as exc:
        rt.cudaGetLastError()
        report.calls.append("cuGraphExecUpdate (refused)")
        if fallback == "raise":
            raise
        report.reason, report.node, report.error = exc.reason, exc.node, exc
        _reinstantiate(exe, graph, adopt, report)
    return _done(report, start)


def _done(report: ApplyReport, start: float) -> ApplyReport:
    report.seconds = time.perf_counter() - start
    return report


def _exec_view(exe):
    """The old side of the comparison: what the exec runs for each node, read from its
    record (:func:`~pycudagraph.inspect.node_views.held_view`: an exec's copy of a kernel's
    arguments; the update twin otherwise)."""
    def view(node):
        return held_view(exe.exec_node(node), node)
    return view


def _plan(d: GraphDiff):
    """[(node, new changes, old changes, where)], one entry per changed node, each as the
    node's exec call takes them (:meth:`Node.exec_operands`), or None when a change needs
    ``cuGraphExecUpdate``."""
    entries: dict = {}
    for c in d.changes:
        if not c.settable:
            return None
        entry = entries.get(id(c.node))
        if entry is None:
            entry = entries[id(c.node)] = (c.node, c.new_node, {}, {}, c.where)
        _, _, new, old, _ = entry
        if isinstance(c.key, tuple):  # (dict field, entry): a kernel's ("args", name or index)
            new.setdefault(c.key[0], {})[c.key[1]] = c.new
            old.setdefault(c.key[0], {})[c.key[1]] = c.old
        else:
            new[c.key], old[c.key] = c.new, c.old
    return [(node, new_node.exec_operands(new), node.exec_operands(old), where)
            for node, new_node, new, old, where in entries.values()]


def _set_nodes(exe, plan: list, report: ApplyReport) -> None:
    """One exec set-params call per node; a refused one undoes those made before it."""
    done = []
    try:
        for node, new, old, where in plan:
            _set(exe, node, new)
            done.append((node, old))
            report.calls.append(f"{_call_name(node)} ({where})")
    except Exception:
        for node, old in reversed(done):
            try:
                _set(exe, node, old)
            except Exception:  # undo as much as CUDA lets us; the update comes next
                pass
        report.calls.clear()
        raise


def _set(exe, node, changes: dict) -> None:
    args = changes.get("args")
    if args is not None:
        pack = exe.exec_node(node).args
        if type(pack) is ArgPack:  # the exec holds a packed launch: bytes by index become values
            changes = dict(changes, args={k: _slot_value(pack.layout, k, v)
                                          for k, v in args.items()})
    exe.set_params(node, **changes)


def _slot_value(layout, k, value):
    """The value a packed launch's slot ``k`` takes for ``value`` given as its bytes."""
    if not (isinstance(k, int) and isinstance(value, bytes)):
        return value
    kind = layout.params[k].kind
    if kind in ("struct", "vector"):
        return value
    if kind == "bfloat16":  # its slot packs the upper half of a float32
        return struct.unpack("<f", b"\0\0" + value)[0]
    return layout.slots[k].unpack(value)[0]


def _call_name(node) -> str:
    return node.exec_call


def _reinstantiate(exe, graph, adopt, report: ApplyReport) -> None:
    """Instantiate ``graph`` with the exec's flags and swap it in; a refusal leaves the
    exec as it was and raises, naming why the update was refused too."""
    bits = int(call(rt.cudaGraphExecGetFlags, exe.handle))
    try:
        raw = call(rt.cudaGraphInstantiateWithFlags, graph.handle, bits)
    except CudaError as exc:
        raise exc.set_hint(f"re-instantiating after CUDA refused the update "
                           f"({report.reason}); the exec is unchanged")
    report.calls.append("cudaGraphInstantiateWithFlags")
    adopt(raw, graph)
    report.method = "reinstantiate"
