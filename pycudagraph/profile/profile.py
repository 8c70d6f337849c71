"""Per-node GPU time of an executable graph: ``p = exe.profile(stream, repeats=10)``.

``p[node]`` is the median GPU time of ``node`` per launch, in microseconds, for every node
of the exec's graph, of its child graphs and of its conditional nodes' bodies;
``p.runs(node)`` how many times it ran per launch (a ``while`` body's iterations, 0 for an
``if`` body not taken); ``p.total_us`` the median GPU time of one launch of ``exe`` itself
(events recorded around ``cudaGraphLaunch``); ``p.critical_path`` the chain of top-level
nodes whose times add up to the most; ``str(p)`` a table sorted by time.

Two methods measure the nodes, both on a twin of the exec instantiated from its graph as
the graph is now (the exec itself is launched for :attr:`Profile.total_us`, and by CUPTI
only where CUDA refuses a twin: see below):

``"cupti"``  CUPTI activity records (the optional ``cupti-python`` package,
             ``pip install 'pycudagraph[profile]'``): each kernel, memcpy and memset record
             carries the id of the graph node that ran it. Times are the GPU's own start
             and end of each operation. Host, event, empty and allocation nodes leave no
             record (0 us, marked unseen).
``"stamps"`` no dependency: an instrumented copy of the graph (``Graph.clone``, or the
             graph itself, restored afterwards, where CUDA cannot clone it: conditional
             nodes) in which a one-thread kernel reads ``%globaltimer`` before and after
             every node, wired to the same dependencies. It sees every node that runs on
             the GPU timeline (host callbacks and event waits included), but each
             interval includes the hop from the stamp to the node and back; the cost of
             one hop, measured by a pair of stamps with nothing between, is subtracted.

``method="auto"`` (the default) takes CUPTI where it is installed and usable, else the
stamps. Both see concurrency as it happens: nodes that run side by side each get their
full time, so their sum can exceed :attr:`Profile.total_us`.

Where a method cannot measure every node, the profile says so in :attr:`Profile.notes`
and falls back; it does not raise for a graph CUDA can run:

- CUDA allows one executable graph at a time of a graph with conditional nodes (and of one
  with memory-allocation or device-updatable kernel nodes), and the exec being profiled is
  it, so no twin can be instantiated. CUPTI then times the exec itself and finds each
  record's node by kernel name and size where only one node fits; the stamps cannot run
  at all (their nodes show as ``-``).
- CUPTI records it could name no node for, or nodes that run every launch without a
  record: the stamps measure instead where they measure every node, else CUPTI's partial
  result is kept.
- A stamped graph CUDA refuses though it takes a plain twin: the stamps go outside
  conditional bodies only, each conditional node timed as a whole.

``method="cupti"`` raises :class:`~pycudagraph.errors.NotSupportedError` only where CUPTI
itself is not usable (not installed, another profiler subscribed).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..errors import ArgumentError, NotSupportedError
from ..nodes import Node
from ..runtime.stream import Event
from ..runtime.values import int_arg
from . import cupti as profile_cupti
from . import stamps as profile_stamps
from ..graph.introspect import topological_order
from ..inspect.tree import node_label, walk

__all__ = ["Profile", "NodeTime", "profile_exec", "launch_times", "METHODS"]

#: The ``method=`` values of :meth:`GraphExec.profile`.
METHODS = ("auto", "cupti", "stamps")


def _hashable(obj) -> bool:
    """Whether ``obj`` can be looked up in a dict (a node can; a list cannot)."""
    try:
        hash(obj)
    except TypeError:
        return False
    return True


@dataclass(frozen=True)
class NodeTime:
    """One row of a :class:`Profile`."""

    node: Node
    us: float  # median GPU time per launch, microseconds
    runs: float  # median number of runs per launch
    path: str  # where the node sits (pycudagraph.inspect.tree)
    label: str  # kernel name, or the node's one-line description
    type: str
    seen: bool  # the method measured this node (CUPTI leaves no record of host nodes)
    depth: int = 0


class Profile:
    """Per-node GPU times of one executable graph (see :mod:`pycudagraph.profile.profile`).

    Attributes
    ----------
    total_us : float
        Median GPU time of one launch of the exec, from events around ``cudaGraphLaunch``.
    method : str
        ``"cupti"`` or ``"stamps"``: what measured the nodes.
    repeats : int
        Launches measured (one more ran first, to warm up, and is not counted).
    unattributed_us : float
        Median GPU time per launch of records CUPTI gave no matching node for (0 with stamps).
    notes : tuple of str
        What the method could not do (why CUPTI was not used, nodes not seen).
    """

    def __init__(self, rows, total_us: float, method: str, repeats: int, top_edges=(),
                 unattributed_us: float = 0.0, notes=()):
        self._rows = {r.node: r for r in rows}
        self._order = list(rows)
        self.total_us = float(total_us)
        self.method = method
        self.repeats = repeats
        self.unattributed_us = float(unattributed_us)
        self.notes = tuple(notes)
        self._top_edges = list(top_edges)
        self._path = None

    # Reading ------------------------------------------------------------------------

    def _row(self, node) -> NodeTime:
        row = self._rows.get(node) if _hashable(node) else None
        if row is None:
            raise ArgumentError(f"profile: {node!r} is not a node of the profiled graph (nor of "
                                "its child graphs or bodies)")
        return row

    def __getitem__(self, node) -> float:
        """The median GPU time of ``node`` per launch, microseconds. No CUDA call."""
        return self._row(node).us

    def runs(self, node) -> float:
        """How many times ``node`` ran per launch (median): 1 for most nodes, a ``while``
        body's iteration count, 0 for a body not taken. No CUDA call."""
        return self._row(node).runs

    def __contains__(self, node) -> bool:
        return _hashable(node) and node in self._rows

    def __iter__(self):
        return iter(r.node for r in self._order)

    def __len__(self) -> int:
        return len(self._order)

    @property
    def rows(self) -> list[NodeTime]:
        """Every node's row, slowest first. No CUDA call."""
        return sorted(self._order, key=lambda r: -r.us)

    def share(self, node) -> float:
        """``p[node] / p.total_us`` (0 when the total is 0). No CUDA call."""
        return self._row(node).us / self.total_us if self.total_us > 0 else 0.0

    def as_dict(self) -> dict:
        """``{node: microseconds}`` for every node. No CUDA call."""
        return {r.node: r.us for r in self._order}

    # The critical path ----------------------------------------------------------------

    @property
    def critical_path(self) -> list[Node]:
        """The chain of top-level nodes, first to last along the graph's edges, whose
        times add up to the most (a container node counts with its whole span). No CUDA
        call."""
        if self._path is None:
            self._path = _longest_path([r.node for r in self._order if r.depth == 0],
                                       self._top_edges, self.__getitem__)
        return list(self._path)

    @property
    def critical_path_us(self) -> float:
        """The sum of the times along :attr:`critical_path`. No CUDA call."""
        return sum(self[n] for n in self.critical_path)

    # Text -------------------------------------------------------------------------------

    def table(self, limit: int | None = None) -> str:
        """The table ``str(p)`` prints: one row per node, slowest first, with its share of
        :attr:`total_us`, runs per launch and path; ``limit`` rows at most. No CUDA call."""
        rows = self.rows if limit is None else self.rows[:limit]
        width = max([len("node")] + [len(_cut(r.label)) + 2 * r.depth for r in rows])
        lines = [f"Profile ({self.method}, median of {self.repeats} launches): "
                 f"{self.total_us:.1f} us per launch",
                 f"  {'node':<{width}}  {'type':<12} {'time us':>9} {'share':>7} {'runs':>6}  path"]
        for r in rows:
            name = "  " * r.depth + _cut(r.label)
            t = f"{r.us:9.2f}" if r.seen else f"{'-':>9}"
            share = f"{100 * r.us / self.total_us:6.1f}%" if self.total_us > 0 else f"{'-':>7}"
            runs = f"{r.runs:g}"
            lines.append(f"  {name:<{width}}  {r.type:<12} {t} {share} {runs:>6}  {r.path}")
        if limit is not None and len(self._order) > limit:
            lines.append(f"  ... {len(self._order) - limit} more")
        if self.unattributed_us:
            lines.append(f"  ({self.unattributed_us:.2f} us per launch of GPU work matched "
                         "no node)")
        path = self.critical_path
        if path:
            names = " -> ".join(_cut(self._rows[n].label, 24) for n in path)
            lines.append(f"critical path ({len(path)} nodes, {self.critical_path_us:.1f} us): "
                         f"{names}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return (f"<pycudagraph Profile {self.method}: {len(self._order)} nodes, "
                f"{self.total_us:.1f} us per launch>")


def _cut(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _longest_path(nodes: list, edges: list, weight) -> list:
    """The heaviest path through the DAG ``(nodes, edges)`` by node weight."""
    if not nodes:
        return []
    before: dict = {n: [] for n in nodes}
    for a, b in edges:
        if a in before and b in before:
            before[b].append(a)
    best: dict = {}
    prev: dict = {}
    for n in topological_order(nodes, [(a, b) for a, b in edges if a in before and b in before]):
        w = weight(n)
        p = max(before[n], key=lambda a: best[a], default=None)
        best[n] = w + (best[p] if p is not None else 0.0)
        prev[n] = p
    end = max(nodes, key=lambda n: best[n])
    path = [end]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    return path[::-1]


def _median(values) -> float:
    values = list(values)
    return float(statistics.median(values)) if values else 0.0


def launch_times(exe, stream, repeats: int) -> list[float]:
    """GPU microseconds of ``repeats`` launches of ``exe`` on ``stream``, each between two
    events (``cudaEventRecord``, ``cudaGraphLaunch``, ``cudaEventSynchronize``,
    ``cudaEventElapsedTime``), after one launch to warm up."""
    start, end = Event(timing=True), Event(timing=True)
    try:
        exe.launch(stream)
        out = []
        for _ in range(repeats):
            start.record(stream)
            exe.launch(stream)
            end.record(stream)
            end.synchronize()
            out.append(start.elapsed_ms(end) * 1000.0)
        return out
    finally:
        start.close()
        end.close()


def _by_cupti(exe, graph, places, stream, repeats: int, method: str, notes: list):
    """CUPTI's samples, or None with the reason in ``notes``. ``method="cupti"`` raises
    :class:`NotSupportedError` where CUPTI itself cannot be used (not for this graph)."""
    why = profile_cupti.unavailable()
    if why is None:
        try:
            return profile_cupti.measure(graph, places, stream, repeats, exe)
        except profile_cupti.CuptiUnusable as exc:
            why = str(exc)
            if method == "cupti" and not exc.about_graph:
                raise NotSupportedError("profile(method='cupti')", "CUPTI (cupti-python)",
                                        why) from None
    elif method == "cupti":
        raise NotSupportedError("profile(method='cupti')", "CUPTI (cupti-python)", why)
    notes.append(f"CUPTI not used: {why}")
    return None


def _by_stamps(cupti, graph, places, stream, repeats: int, notes: list):
    """The stamps' samples; where CUPTI measured but could not name every node
    (``cupti``, incomplete), the stamps replace it only if they measured every node."""
    stamps = profile_stamps.measure(graph, places, stream, repeats)
    if cupti is None:
        return stamps
    lost = _median(cupti.unattributed)
    if stamps.complete:
        gaps = "; ".join(cupti.detail.get("gaps", ()))
        notes.append(f"CUPTI's records did not cover the graph ({gaps}; {lost:.1f} us per "
                     "launch unattributed): the stamps measured instead")
        return stamps
    cupti.notes.append("the stamps could not do better: " + "; ".join(stamps.notes))
    return cupti


def profile_exec(exe, stream, repeats: int = 10, method: str = "auto") -> Profile:
    """:meth:`GraphExec.profile`: measure ``exe``'s graph node by node (see the module
    docstring for the methods and what each can see)."""
    repeats = int_arg(repeats, "profile: repeats", lo=1)
    if not isinstance(method, str) or method not in METHODS:
        raise ArgumentError(f"profile: method must be one of {METHODS}, got {method!r}")
    graph = exe.graph
    if graph is None:
        raise ArgumentError("profile: this GraphExec has no source graph (it was adopted with "
                            "GraphExec.wrap(handle) and no graph=); wrap it with "
                            "graph=pcg.Graph.wrap(raw_graph) to profile it")
    places = walk(graph)
    notes: list = []
    samples = None
    if method in ("auto", "cupti"):
        samples = _by_cupti(exe, graph, places, stream, repeats, method, notes)
    if samples is None or not samples.complete:
        samples = _by_stamps(samples, graph, places, stream, repeats, notes)
    total = launch_times(exe, stream, repeats)
    rows = []
    for pl in places:
        us = [s.get(pl.node, (0.0, 0))[0] for s in samples.launches]
        runs = [s.get(pl.node, (0.0, 0))[1] for s in samples.launches]
        rows.append(NodeTime(pl.node, _median(us), _median(runs), pl.path, node_label(pl.node),
                             str(pl.node.type), pl.node in samples.seen, pl.depth))
    unseen = sum(1 for r in rows if not r.seen)
    if unseen:
        why = f"{samples.method} cannot see {samples.blind}"
        if not samples.complete:
            why += "; see the notes below for what else it could not measure"
        notes.append(f"{unseen} node(s) not measured ({why}): shown as '-'")
    notes += samples.notes
    return Profile(rows, _median(total), samples.method, repeats, graph.edges,
                   _median(samples.unattributed), notes)

