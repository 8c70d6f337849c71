"""``pcg.find_race``: nodes that need an edge they do not have, found by running the graph
as it is and one node at a time.

A graph says what may run at the same time by the edges it lacks. When a node reads memory
another node writes and no path joins them, the result depends on which runs first: a
race. Run the nodes one after another in a topological order (each depending on the one
before, :func:`~pycudagraph.debug.prefix.chained_graph`) and every read sees the writes
the order puts before it; run the graph as it is and a racing read may not. So both run
from the same snapshot of the memory the nodes point into (:mod:`.memory`), and the bytes
they leave are compared. Where they differ, bisection over prefixes of the order finds the
first node whose inclusion makes them differ; then the nodes before it with no path to it
are checked for a write into memory it points at, or a point into memory it writes (which
bytes a node writes: the state before and after it in the chain): each such node and it
are a pair that needs an edge.

No false reports from nondeterministic kernels: the chain runs twice per trial, and bytes
that differ between those two runs (atomics, floating-point order) are left out of every
comparison. Results that differ with no pair found are said to be that, not a race. All of
it runs in this process (a race does not fault), and the memory is written back as it was
before the search when it ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..runtime.stream import Stream
from ..runtime.values import progress_arg
from .memory import Snapshot, graph_regions, site_spans, top_sites
from .prefix import Trial, ancestors, bisect_first, chained_graph, graph_order, prefix_graph
from .report import graph_of, node_name, positive, trials_line

__all__ = ["find_race", "RaceReport", "RacePair", "overlap"]

_WHERE = "find_race"
#: Earlier nodes checked for a pair, nearest first.
MAX_CANDIDATES = 16


@dataclass(frozen=True)
class RacePair:
    """Two nodes with no path between them that touch the same memory, one writing it.

    Attributes
    ----------
    producer : Node
        The node the topological order runs first.
    consumer : Node
        The later one: its result differs when the two run as the graph has them.
    address : int
        The first byte both touch.
    how : str
        ``"producer writes what consumer points at"`` or the other way round.
    """

    producer: object
    consumer: object
    address: int
    how: str

    def __str__(self) -> str:
        return (f"{node_name(self.producer)} and {node_name(self.consumer)}: "
                f"{self.how} (0x{self.address:x}), with no path between them; add "
                "g.add_dependency(producer, consumer)")


@dataclass
class RaceReport:
    """What :func:`find_race` found.

    Attributes
    ----------
    node : Node or None
        The first node (topological order) whose result differs between the graph and
        the chain; ``None`` when none did.
    index : int or None
        Its position in the topological order, from 0.
    pairs : list of RacePair
        The missing edges found (empty: no race claimed).
    trials : list of Trial
        Every comparison run (``"same"`` or ``"differs"``).
    unstable : int
        Bytes that differed between two runs of the chain itself (nondeterministic
        kernels), left out of the comparisons.
    """

    node: object = None
    index: int | None = None
    pairs: list = field(default_factory=list)
    trials: list = field(default_factory=list)
    n: int = 0
    runs: int = 0
    differing: int = 0
    unstable: int = 0
    seconds: float = 0.0
    positions: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No race claimed."""
        return not self.pairs

    def _at(self, node) -> str:
        i = self.positions.get(node)
        return f"node {i + 1} ({node_name(node)})" if i is not None else node_name(node)

    def __str__(self) -> str:
        tried = (f"{len(self.trials)} comparison(s), each up to {self.runs} run(s) of the graph, "
                 f"in {self.seconds:.1f} s")
        if self.trials:
            tried += f" ({trials_line(self.trials, self.n)})"
        lines = []
        if self.node is None:
            lines.append(f"find_race: none: the graph's {self.n} node(s) left the same bytes as "
                         f"the same nodes run one after another; {tried}")
        elif self.pairs:
            lines.append(f"find_race: {len(self.pairs)} missing edge(s); the result of "
                         f"{self._at(self.node)} differs ({self.differing} byte(s))")
            for p in self.pairs:
                lines.append(f"  {self._at(p.producer)} -> {self._at(p.consumer)}: {p.how} "
                             f"(0x{p.address:x}) with no path between them; add "
                             "g.add_dependency(producer, consumer)")
            lines.append(f"  {tried}")
        else:
            lines.append(f"find_race: no race claimed: the result of {self._at(self.node)} "
                         f"differs ({self.differing} byte(s)), but no node without a path to it "
                         "writes memory it points at or points at memory it writes: a "
                         "nondeterministic kernel (atomics, floating-point order), or memory "
                         "its arguments do not show")
            lines.append(f"  {tried}")
        if self.unstable:
            lines.append(f"  {self.unstable} byte(s) differed between two serial runs "
                         "(nondeterministic kernels) and were not compared")
        return "\n".join(lines)


def overlap(spans: list, masks: list, regions: list):
    """The first address inside ``spans`` (``(start, end)`` ranges) where a byte mask of
    ``masks`` (one per region) is set, or None. No CUDA call."""
    for lo, hi in spans:
        for r, m in zip(regions, masks):
            a, b = max(lo, r.start), min(hi, r.end)
            if a < b:
                hit = np.flatnonzero(m[a - r.start:b - r.start])
                if hit.size:
                    return a + int(hit[0])
    return None


class _Runs:
    """Launches from the snapshot, and the states the chain leaves."""

    def __init__(self, graph, order, edges, snapshot, runs, progress):
        self.graph, self.order, self.edges = graph, order, edges
        self.snapshot, self.runs, self.progress = snapshot, runs, progress
        self.stream = Stream()
        self.states: dict = {0: snapshot.data}
        self.diffs: dict = {}
        self.unstable = 0

    def run(self, exe) -> list:
        self.snapshot.restore()
        exe.launch(self.stream)
        self.stream.synchronize()
        return self.snapshot.read()

    def chain_state(self, k: int) -> list:
        """The bytes the chain of the first ``k`` nodes leaves."""
        if k not in self.states:
            g, _ = chained_graph(self.graph, self.order, self.edges, k)
            self.states[k] = self.run(g.instantiate(auto_free_on_launch=True))
        return self.states[k]

    def compare(self, k: int) -> Trial:
        t0 = time.perf_counter()
        n = len(self.order)
        chained, _ = chained_graph(self.graph, self.order, self.edges, k)
        serial = chained.instantiate(auto_free_on_launch=True)
        first, second = self.run(serial), self.run(serial)
        self.states.setdefault(k, first)
        stable = [a == b for a, b in zip(first, second)]
        self.unstable = max(self.unstable, sum(int((~s).sum()) for s in stable))
        g = self.graph if k == n else prefix_graph(self.graph, self.order, k)[0]
        exe = g.instantiate(auto_free_on_launch=True)
        t = Trial(k, "same")
        for _ in range(self.runs):
            out = self.run(exe)
            diff = [(a != b) & s for a, b, s in zip(out, first, stable)]
            count = sum(int(d.sum()) for d in diff)
            if count:
                self.diffs[k] = (diff, count)
                t = Trial(k, "differs", f"{count} byte(s) differ")
                break
        t.seconds = time.perf_counter() - t0
        if self.progress is not None:
            self.progress(f"{_WHERE}: {k} node(s): {t.outcome} ({t.seconds:.2f} s)")
        return t

    def written(self, j: int) -> list:
        """Byte masks of what node ``j`` of the order wrote, run in the chain."""
        before, after = self.chain_state(j), self.chain_state(j + 1)
        return [a != b for a, b in zip(before, after)]


def _pairs(runs: _Runs, k: int, sites: dict, regions: list) -> list:
    """The missing edges into node ``k - 1`` of the order (see the module docstring)."""
    order = runs.order
    x = order[k - 1]
    spans = site_spans(sites, regions)
    before = ancestors(x, runs.edges)
    out = []
    candidates = [j for j in range(k - 2, -1, -1) if order[j] not in before]
    near = [j for j in candidates
            if any(lo < hi2 and lo2 < hi for lo, hi in spans[x] for lo2, hi2 in spans[order[j]])]
    x_writes = runs.written(k - 1) if near else None
    for j in near[:MAX_CANDIDATES]:
        y = order[j]
        at = overlap(spans[x], runs.written(j), regions)
        how = "the producer writes memory the consumer points at"
        if at is None:
            at = overlap(spans[y], x_writes, regions)
            how = "the consumer writes memory the producer points at"
        if at is not None:
            out.append(RacePair(y, x, at, how))
    return out


def find_race(graph_or_exec, *, runs: int = 5, progress=None) -> RaceReport:
    """Missing edges: nodes whose results differ between the graph as it is and the same
    nodes run one after another (see the module docstring).

    Parameters
    ----------
    graph_or_exec : Graph or GraphExec
        An exec is checked as its graph.
    runs : int
        How many times the graph as it is runs per comparison (a race need not show every
        time); the first run that differs ends the comparison.
    progress : callable, optional
        Called with one line of text after each comparison (``print``).

    Returns
    -------
    RaceReport
        ``r.ok`` (no race claimed), ``r.pairs`` (producer, consumer, address), ``r.node``
        (the first node whose result differs); ``str(r)`` says it in words.

    Notes
    -----
    Runs in this process on the graph's own memory, which it writes back as it was when
    it ends (``cudaMemcpy`` per allocation the graph points into, each run and at the
    end). Per comparison: two clones (``cudaGraphClone``, ``cudaGraphDestroyNode``,
    ``cudaGraphRemoveDependencies``, ``cudaGraphAddDependencies``), two
    ``cudaGraphInstantiate``, two runs of the chain and up to ``runs`` of the graph
    (``cudaGraphLaunch``, ``cudaStreamSynchronize``). About ``log2(n) + 1`` comparisons
    when a difference shows, one when none does.
    """
    graph = graph_of(graph_or_exec, _WHERE)
    positive(runs, _WHERE, "runs", integer=True)
    progress_arg(progress, _WHERE)
    t0 = time.perf_counter()
    order, edges = graph_order(graph)
    n = len(order)
    report = RaceReport(n=n, runs=runs, positions={node: i for i, node in enumerate(order)})
    if n < 2:
        return report
    sites = top_sites(graph)
    regions = graph_regions(graph, sites)
    snapshot = Snapshot(regions)
    state = _Runs(graph, order, edges, snapshot, runs, progress)
    try:
        k, report.trials = bisect_first(n, state.compare)
        if k:
            report.node, report.index = order[k - 1], k - 1
            report.differing = state.diffs[k][1]
            report.pairs = _pairs(state, k, sites, regions)
    finally:
        snapshot.restore()
    report.unstable = state.unstable
    report.seconds = time.perf_counter() - t0
    return report
