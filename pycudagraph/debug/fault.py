"""``pcg.find_fault``: the first node of a graph whose run faults, found by bisection in a
child process.

Design note. A replay that faults (an illegal address, a device-side assert) loses the
CUDA context of the process that ran it: every later call fails. So no trial runs in the
caller. Each runs in a child process (:mod:`.child`, driven by :mod:`.worker`), and the
caller only builds graphs and reads memory.

* **What runs**: the first ``k`` nodes of a topological order (:mod:`.prefix`: a clone with
  the other nodes removed). Bisection over ``k`` finds the smallest prefix that faults;
  its last node is the one: about ``log2(n) + 1`` trials. A child whose trials pass is
  kept for the next trial; one that faulted has lost its context and is replaced.
* **How the graph travels**: as a graph file (``g.save`` in the caller, ``pcg.load`` in
  the child): kernels pycudagraph compiled go as their CUBIN and PTX, kernels captured
  from a library by name, found in the child by ``resolve``, exactly as for any graph
  file. No kernel is compiled and nothing is captured in the child (unless the resolver
  captures a probe).
* **How the memory travels**: the graph's slots are the allocations its nodes point into
  (:mod:`.memory`: every site's allocation, ``cuPointerGetAttributes``), copied to the
  host once, before the first trial, and written back in the child before every trial.
  CUDA IPC (``cudaIpcGetMemHandle``) was the other way: it was not taken because it
  exports only whole ``cudaMalloc`` allocations (not virtual-memory or pool memory, nor
  pinned host memory), because the child would write into the caller's live memory (a
  faulting trial scribbling over the caller's tensors, a restore racing the caller's
  work), and because an opened handle lands at another address anyway, so slots would
  have to be rebound all the same. Instead the child maps fresh memory at the caller's
  own addresses where they are free (``cuMemAddressReserve`` with the caller's address
  requested, ``cuMemCreate``, ``cuMemMap``): then addresses no relocation can see (a
  pointer stored in device memory, one inside a library kernel's TMA descriptor) still
  mean what they meant. Where an address is taken, the region lands elsewhere and the
  graph file relocates the addresses it sees (``r.same_addresses`` says which happened).
* **What cannot hang or kill the caller**: each trial has a time limit (the child is
  killed and the trial counts as bad: a hang is a fault too), a child that dies without
  answering counts as bad (its exit status is reported), and a child that cannot load or
  start raises :class:`~pycudagraph.errors.PyCudaGraphError` with the end of its log.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .._cuda import ensure_device
from ..errors import ArgumentError, GraphFileError, GraphFileWarning, PyCudaGraphError
from ..runtime.values import progress_arg
from .child import import_ref
from .memory import Snapshot, graph_events, graph_regions, slot_objects, top_sites
from .prefix import Trial, bisect_first, graph_order, prefix_graph
from .report import fields_lines, findings_for, graph_of, node_name, positive, trials_line
from .worker import Worker, exit_text

__all__ = ["find_fault", "FaultReport", "resolve_ref"]

_WHERE = "find_fault"
#: Seconds a child may take to start (import pycudagraph, a framework, a resolver's probe).
START_TIMEOUT = 300.0


@dataclass
class FaultReport:
    """What :func:`find_fault` found.

    Attributes
    ----------
    node : Node or None
        The first node (in topological order) whose run faults; ``None`` when no trial
        faulted.
    index : int or None
        Its position in the topological order, from 0.
    error : str or None
        What the child saw: the CUDA error (``cudaStreamSynchronize failed:
        cudaErrorIllegalAddress (...)``), or that it hung or died.
    error_name : str
        ``cudaErrorIllegalAddress``, ``cudaErrorAssert`` ..., ``"hang"`` or ``"crash"``.
    trials : list of Trial
        Every trial run: ``k`` nodes, its outcome, its error, its seconds.
    n : int
        The graph's top-level nodes.
    findings : list
        The audit's findings (``graph.audit()``) for the node's addresses.
    fields : list of str
        The node's fields (``node.fields()``), one line each.
    same_addresses : bool
        Whether the child had the caller's memory at the caller's addresses.
    seconds : float
        Wall time of the whole search.
    """

    node: object = None
    index: int | None = None
    error: str | None = None
    error_name: str = ""
    trials: list = field(default_factory=list)
    n: int = 0
    findings: list = field(default_factory=list)
    fields: list = field(default_factory=list)
    same_addresses: bool = True
    seconds: float = 0.0
    note: str = ""

    @property
    def found(self) -> bool:
        return self.node is not None

    def __str__(self) -> str:
        tried = (f"{len(self.trials)} trial(s) in {self.seconds:.1f} s"
                 + (f" ({trials_line(self.trials, self.n)})" if self.trials else ""))
        if self.node is None:
            return (f"find_fault: no fault: the graph's {self.n} node(s) ran in a child process "
                    f"without error; {tried}" + (f"\n  {self.note}" if self.note else ""))
        lines = [f"find_fault: node {self.index + 1} of {self.n} (topological order) faults: "
                 f"{node_name(self.node)}",
                 f"  error: {self.error}", "  fields:"]
        lines += [f"    {ln}" for ln in self.fields]
        if self.findings:
            lines.append("  audit:")
            lines += [f"    {f}" for f in self.findings]
        else:
            lines.append(f"  audit: {self.note or 'nothing wrong with its addresses'}")
        if not self.same_addresses:
            lines.append("  (the child had the memory at other addresses: addresses the graph "
                         "file could not relocate pointed elsewhere)")
        lines.append(f"  trials: {tried}")
        return "\n".join(lines)


def resolve_ref(resolve) -> list | None:
    """``[module, qualified name]`` a child process imports the resolver by: ``resolve`` is
    a function defined at the top of a module, or the text ``"module:function"``.
    :class:`ArgumentError` when the child could not import it."""
    if resolve is None:
        return None
    if isinstance(resolve, str):
        module, _, qualname = resolve.partition(":")
    else:
        if not callable(resolve):
            raise ArgumentError(f"{_WHERE}: resolve must be a function (or 'module:function'), "
                                f"got {type(resolve).__name__}")
        module = getattr(resolve, "__module__", None) or ""
        qualname = getattr(resolve, "__qualname__", None) or ""
    if not module or not qualname or module == "__main__" or "<" in qualname:
        raise ArgumentError(
            f"{_WHERE}: resolve={resolve!r} cannot be imported by the child process that runs "
            "the trials: define it at the top level of a module (not in __main__, not a lambda "
            "or a nested function), or pass 'module:function'")
    try:
        import_ref([module, qualname])
    except (ImportError, AttributeError) as exc:
        raise ArgumentError(f"{_WHERE}: resolve: {module}:{qualname} cannot be imported: "
                            f"{exc}") from None
    return [module, qualname]


class _Session:
    """The trials of one search: the files they run, the child that runs them."""

    def __init__(self, tmp: Path, setup: dict, timeout: float, progress):
        self.tmp, self.setup, self.timeout, self.progress = tmp, setup, timeout, progress
        self.worker = None
        self.same = True
        self.log = tmp / "child.log"

    def start(self) -> Worker:
        worker = Worker(self.log, cwd=os.getcwd())
        reply = worker.ask(self.setup, max(self.timeout, START_TIMEOUT))
        if "ok" not in reply:
            worker.close()
            raise PyCudaGraphError(f"{_WHERE}: the child process could not start: "
                                   f"{self._why(reply)}\n{worker.log_tail()}".rstrip())
        self.same = self.same and reply.get("same_addresses", True)
        return worker

    def _why(self, reply: dict) -> str:
        if "timeout" in reply:
            return f"no answer within {reply['timeout']:g} s (it was stopped)"
        if "exited" in reply:
            return f"it ended ({exit_text(reply['exited'])}) without answering"
        return reply.get("setup_error") or reply.get("fault") or repr(reply)

    def trial(self, k: int, path: Path) -> Trial:
        if self.worker is None:
            self.worker = self.start()
        t0 = time.perf_counter()
        reply = self.worker.ask({"op": "trial", "file": str(path)}, self.timeout)
        secs = time.perf_counter() - t0
        if "ok" in reply:
            t = Trial(k, "ok", "", secs)
        elif "setup_error" in reply:
            tail = self.worker.log_tail()
            self.close()
            raise PyCudaGraphError(f"{_WHERE}: the child could not run nodes 1-{k}: "
                                   f"{reply['setup_error']}\n{tail}".rstrip())
        else:
            outcome, error, name = self._bad(reply)
            t = Trial(k, outcome, error, secs, name)
            self.close()
        if self.progress is not None:
            self.progress(f"{_WHERE}: trial {k} node(s): {t.outcome} ({secs:.2f} s)")
        return t

    def _bad(self, reply: dict) -> tuple:
        if "fault" in reply:
            return "fault", reply["fault"], reply.get("name", "")
        if "timeout" in reply:
            return "hang", f"no answer within {reply['timeout']:g} s (the child was stopped)", "hang"
        tail = self.worker.log_tail(600)
        return ("crash", f"the child process ended ({exit_text(reply.get('exited'))}) without "
                f"answering" + (f": {tail}" if tail else ""), "crash")

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def _save(graph, order: list, k: int, path: Path, slots: dict, resolving: bool) -> None:
    """Write the prefix of ``k`` nodes to ``path`` (``g.save``; a clone for a prefix)."""
    g = graph if k == len(order) else prefix_graph(graph, order, k)[0]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GraphFileWarning)
            g.save(path, slots=slots)
    except GraphFileError as exc:
        raise PyCudaGraphError(
            f"{_WHERE}: the graph cannot be written for the child process: {exc}. (Every "
            "address a node holds must lie in live memory; graph.audit() names those that "
            "do not.)") from None
    finally:
        if g is not graph:
            g.close()
    foreign = [w for w in caught if issubclass(w.category, GraphFileWarning)]
    if foreign and not resolving:
        raise ArgumentError(f"{_WHERE}: {foreign[0].message}. Pass resolve=, a function of a "
                            "module the child process imports (see pcg.load's resolve=)")


def find_fault(graph_or_exec, *, timeout: float = 60.0, progress=None,
               resolve=None) -> FaultReport:
    """The first node, in topological order, whose run faults, found by bisection over
    prefixes of the graph, each run in a child process (see the module's design note).

    Parameters
    ----------
    graph_or_exec : Graph or GraphExec
        An exec is searched as its graph (changes made with ``set_arg`` on the exec only
        are not seen).
    timeout : float
        Seconds one trial may take in the child (load, launch, synchronize); a trial
        that takes longer is stopped and counts as faulting (a hang).
    progress : callable, optional
        Called with one line of text after each trial (``print``).
    resolve : function or str, optional
        For kernels pycudagraph did not compile (captured from PyTorch or a library): the
        resolver of :func:`pcg.load <pycudagraph.load>` (``resolve(name) -> CUfunction``),
        defined at the top of a module the child process imports, or ``"module:function"``.

    Returns
    -------
    FaultReport
        ``r.node``, ``r.index``, ``r.error``, ``r.trials``; ``str(r)`` names the node, its
        kernel and arguments, the CUDA error and the audit's findings for its addresses.

    Raises
    ------
    ArgumentError
        A bad argument; a graph with captured kernels and no ``resolve``.
    PyCudaGraphError
        The graph cannot be written as a graph file (an address in no live memory, a node
        type graph files cannot hold), or the child cannot load it.

    Notes
    -----
    Costs, in the caller: ``cuPointerGetAttributes`` per distinct address, one
    ``cudaMemcpy`` per allocation the graph points into (the snapshot), and per trial a
    clone (``cudaGraphClone``, ``cudaGraphDestroyNode``) and ``g.save``; in each child
    ``cuMemAddressReserve``/``cuMemCreate``/``cuMemMap`` per region, ``pcg.load``,
    ``cudaGraphInstantiate``, ``cudaMemcpy`` per region, ``cudaGraphLaunch`` and
    ``cudaStreamSynchronize``. About ``log2(n) + 1`` trials, and a new child after each
    trial that faults.
    """
    graph = graph_of(graph_or_exec, _WHERE)
    positive(timeout, _WHERE, "timeout")
    progress_arg(progress, _WHERE)
    ref = resolve_ref(resolve)
    t0 = time.perf_counter()
    order, _ = graph_order(graph)
    n = len(order)
    if not n:
        return FaultReport(n=0, note="the graph has no nodes")
    sites = top_sites(graph)
    regions = graph_regions(graph, sites)
    events = graph_events(graph)
    slots = slot_objects(regions, events)
    snapshot = Snapshot(regions)
    device = ensure_device()
    with tempfile.TemporaryDirectory(prefix="pcg-find-fault-") as tmp:
        tmp = Path(tmp)
        snapshot.save(tmp / "snapshot.bin")
        setup = {"op": "setup", "device": device,
                 "regions": [[r.start, r.size, r.kind, r.name] for r in regions],
                 "events": [f"e{i}" for i in range(len(events))],
                 "snapshot": str(tmp / "snapshot.bin"), "resolve": ref,
                 "path": [os.path.abspath(p or os.curdir) for p in sys.path]}
        session = _Session(tmp, setup, float(timeout), progress)

        def run(k: int) -> Trial:
            path = tmp / f"prefix_{k}.pcgraph"
            _save(graph, order, k, path, slots, ref is not None)
            return session.trial(k, path)

        try:
            k, trials = bisect_first(n, run)
        finally:
            session.close()
    report = FaultReport(trials=trials, n=n, same_addresses=session.same)
    report.seconds = time.perf_counter() - t0
    if not k:
        report.note = ("the fault may need memory no node's arguments show, or timing the "
                       "child does not reproduce")
        return report
    node = order[k - 1]
    bad = next(t for t in trials if t.k == k)
    report.node, report.index, report.error = node, k - 1, bad.error
    report.error_name = bad.name or bad.outcome
    report.fields = fields_lines(node)
    report.findings, report.note = findings_for(graph, node, _inner(graph, node))
    return report


def _inner(graph, node) -> set:
    """The nodes inside ``node`` (its child graph's, its bodies'), over the one walk."""
    out, under = set(), False
    for m, depth, _ in graph.table.walk():
        if depth == 0:
            under = m is node
        elif under:
            out.add(m)
    return out
