"""What a profiling method measured (:class:`Samples`), and how CUPTI's activity records
become it: each record is named by the graph node that ran it, grouped by launch.

A record carries the id of the node *of the executable graph* that ran it. The CUPTI
method hands over the copies CUPTI reported at instantiation (exec node id -> graph node
id). Where that names no node (the exec was made before CUPTI could watch, or the copy of
a child graph's node was not reported as a copy of the node read back from the child), a
record's node is found by what it did: a kernel's name, a copy's or memset's size. That is
done only where it can only be one node: one record stream and one node of that kind and
name left, or several that the graph's edges put in one order, paired by when they ran.

Nothing is guessed beyond that: records no node was found for are counted as
unattributed time, and the samples say they are incomplete.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

from ..inspect.tree import inside_conditionals, node_label

__all__ = ["Samples", "RECORDED", "ONE_EXEC", "CuptiUnusable", "samples", "node_signature"]

#: The kinds of work CUPTI writes activity records for (:meth:`Node.work`).
RECORDED = ("kernel", "memcpy", "memset")

#: Why a twin of an exec can be refused, for the profile's notes.
ONE_EXEC = ("CUDA allows one executable graph at a time of a graph with conditional, "
            "memory-allocation or device-updatable kernel nodes")


class CuptiUnusable(Exception):
    """CUPTI could not profile (the message says why). ``about_graph``: the reason is this
    graph (a fallback to the stamps is in order), not CUPTI itself."""

    def __init__(self, message: str, about_graph: bool = False):
        super().__init__(message)
        self.about_graph = about_graph


@dataclass
class Samples:
    """What a profiling method measured: one ``{node: (microseconds, runs)}`` per launch."""

    method: str
    blind: str  # what the method cannot see, for the profile's notes
    launches: list = field(default_factory=list)
    seen: set = field(default_factory=set)
    unattributed: list = field(default_factory=list)  # microseconds per launch
    notes: list = field(default_factory=list)
    complete: bool = True  # every node the method can see was measured
    detail: dict = field(default_factory=dict)  # what it worked from, for a diagnosis


def _label(node) -> str:
    try:
        return node_label(node) or str(node.type)
    except AttributeError:  # a node object that cannot say (a stand-in)
        return str(getattr(node, "type", ""))


def node_signature(node):
    """What a record of ``node`` would show (:meth:`Node.work
    <pycudagraph.nodes.base.Node.work>`): ``("kernel", {names})``, ``("memcpy", bytes)``,
    ``("memset", bytes)`` (bytes None where they cannot be read), None for a node whose
    work no record shows. Reads the node's parameters (``cudaGraphMemcpyNodeGetParams`` ...)."""
    return None if node is None else node.work()


def _fits(nsig, sig) -> bool:
    if nsig is None or sig is None or nsig[0] != sig[0]:
        return False
    if isinstance(nsig[1], set):  # a kernel's names
        return sig[1] in nsig[1]
    return nsig[1] is None or nsig[1] == sig[1]


def _reaches(x, y) -> bool:
    """Whether a path of edges leads from ``x`` to ``y`` (``cudaGraphNodeGetDependencies``)."""
    seen, todo = set(), [y]
    while todo:
        for d in todo.pop().dependencies:
            if d == x:
                return True
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return False


def _precedes(a, b, where: dict) -> bool:
    """Whether ``a`` ends before ``b`` starts in every launch: their ancestors in the
    innermost graph holding both are joined by edges. ``where[n]`` is (owner, body)."""
    ancestors = {}
    n = b
    while n is not None:
        ancestors[where[n]] = n
        n = where[n][0]
    x = a
    while x is not None:
        y = ancestors.get(where[x])
        if y is not None:
            return x is not y and _reaches(x, y)
        x = where[x][0]
    return False


def _path_key(path: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in path.split("/"))


def _by_signature(units: dict, free: dict, places) -> dict:
    """``{(exec node id, signature): node}`` for the record streams ``units`` (each with
    the median offset of its first record in a launch) that only one node of ``free``
    (``{node: its signature}``) can have made."""
    where = {pl.node: (pl.parent, pl.body) for pl in places}
    paths = {pl.node: pl.path for pl in places}
    by_sig: dict = {}
    for unit in units:
        by_sig.setdefault(unit[1], []).append(unit)
    out, used = {}, set()
    for sig, group in by_sig.items():
        cands = [n for n, nsig in free.items() if n not in used and _fits(nsig, sig)]
        if len(cands) != len(group):
            continue
        if len(group) > 1:  # several: only if the edges order them, paired by start time
            cands.sort(key=lambda n: _path_key(paths[n]))
            if not all(_precedes(a, b, where) for a, b in zip(cands, cands[1:])):
                continue
            group.sort(key=units.get)
        for unit, node in zip(group, cands):
            out[unit] = node
            used.add(node)
    return out


def _unit_offsets(records, pending) -> dict:
    """``{(node id, signature): median start of its first record after its launch's first
    record}`` for the record streams of ``pending`` records."""
    t0: dict = {}
    for _, corr, start, _, _ in records:
        t0[corr] = min(start, t0.get(corr, start))
    first: dict = {}
    for nid, corr, start, _, sig in pending:
        key = (corr, (nid, sig))
        first[key] = min(start, first.get(key, start))
    out: dict = {}
    for (corr, unit), t in first.items():
        out.setdefault(unit, []).append(t - t0[corr])
    return {u: statistics.median(v) for u, v in out.items()}


def _name(records, copied, ids, places) -> tuple:
    """(records as (node or None, corr, start, end, sig), how many streams were named by
    signature, the (exec node id, signature) of those no node was found for)."""
    records = [tuple(r) + (None,) * (5 - len(r)) for r in records]
    direct = {}
    for nid, *_ in records:
        if nid not in direct:
            node = ids.get(copied.get(nid, nid))
            direct[nid] = node if node_signature(node) is not None else None
    named = {d for d in direct.values() if d is not None}
    pending = [r for r in records if direct[r[0]] is None and r[4] is not None]
    units = _unit_offsets(records, pending)
    free = {}
    if units:
        free = {pl.node: sig for pl in places if pl.node not in named
                for sig in (node_signature(pl.node),) if sig is not None}
    found = _by_signature(units, free, places) if units else {}
    out = [(found.get((nid, sig)) if direct[nid] is None else direct[nid], corr, start, end, sig)
           for nid, corr, start, end, sig in records]
    unnamed = sorted({(nid, sig) for nid, _, _, _, sig in records
                      if direct[nid] is None and (nid, sig) not in found}, key=str)
    return out, len(found), unnamed


def _launches(named, optional: set) -> list:
    """The records grouped by launch (correlation id); the groups that name no node are
    other work and left out. A group whose named records all ran in conditional bodies
    (should device-launched work carry its own correlation) joins the launch before it."""
    groups: dict = {}
    for rec in named:
        groups.setdefault(rec[1], []).append(rec)
    ours = sorted((g for g in groups.values() if any(r[0] is not None for r in g)),
                  key=lambda g: min(r[2] for r in g))
    anchors = [g for g in ours if any(r[0] is not None and r[0] not in optional for r in g)]
    if not anchors or len(anchors) == len(ours):
        return ours
    starts = [min(r[2] for r in g) for g in anchors]
    for g in ours:
        if not any(g is a for a in anchors):
            i = bisect.bisect_right(starts, min(r[2] for r in g)) - 1
            anchors[max(i, 0)].extend(g)
    return anchors


def samples(records, copied: dict, ids: dict, places, launches: int | None = None) -> Samples:
    """Per-launch times of every node of ``places`` from CUPTI ``records`` (exec node id,
    correlation id, start ns, end ns, and optionally what the record did), given the exec
    node -> graph node ids ``copied`` and graph node id -> node ``ids``. Containers get the
    span of their inner nodes' records. When the correlation ids do not split the records
    into the ``launches`` launches made, the times are averages over all of them. No CUDA
    call but parameter reads where a record's node is found by its signature."""
    named, by_sig, unnamed = _name(records, copied, ids, places)
    optional = inside_conditionals(places)
    ours = _launches(named, optional)
    if records and not ours:
        raise CuptiUnusable(f"none of CUPTI's {len(records)} records named a node of the graph "
                            f"({len(copied)} node copies reported at instantiation)",
                            about_graph=True)
    out = Samples("cupti", "host, event, empty and allocation nodes")
    parents = {pl.node: pl.parent for pl in places}
    lost_kinds: dict = {}
    if launches and ours and len(ours) != launches:
        _averaged(out, [r for g in ours for r in g], launches, parents, lost_kinds)
        out.notes.append(f"CUPTI's correlation ids split {launches} launches into {len(ours)} "
                         "groups (work of conditional bodies can carry its own): times are "
                         "averages per launch over all records, runs the records per launch")
        ours = []
    for recs in ours:
        times, lost = _totals(recs, lost_kinds)
        spans: dict = {}
        for node, _, start, end, _sig in recs:
            up = parents.get(node) if node is not None else None
            while up is not None:  # a child graph or conditional node spans its inner work
                a, b = spans.get(up, (start, end))
                spans[up] = (min(a, start), max(b, end))
                up = parents.get(up)
        for node, (a, b) in spans.items():
            times.setdefault(node, ((b - a) / 1000.0, 1))
        out.launches.append(times)
        out.unattributed.append(lost)
        out.seen.update(times)
    if not out.launches:  # nothing of the graph runs on the GPU
        out.launches, out.unattributed = [{}], [0.0]
    _judge(out, places, optional, lost_kinds, by_sig)
    out.detail.update(records=len(records), copies=len(copied), by_signature=by_sig,
                      unnamed=lost_kinds, unnamed_streams=unnamed[:20])
    return out


def _totals(recs: list, lost_kinds: dict) -> tuple[dict, float]:
    """``{node: (microseconds, records)}`` over ``recs`` and the microseconds of records that
    name no node (counted by kind in ``lost_kinds``)."""
    totals: dict = {}
    lost = 0.0
    for node, _, start, end, sig in recs:
        us = (end - start) / 1000.0
        if node is None:
            lost += us
            key = "record" if sig is None else f"{sig[0]} {sig[1]}"
            lost_kinds[key] = lost_kinds.get(key, 0) + 1
            continue
        t, n = totals.get(node, (0.0, 0))
        totals[node] = (t + us, n + 1)
    return totals, lost


def _averaged(out: Samples, recs: list, launches: int, parents: dict, lost_kinds: dict) -> None:
    """One launch's times as the average of ``launches``: each node's record time and count
    over all records, divided by the launch count; a container gets the sum of its inner
    nodes' times (their spans cannot be told apart)."""
    totals, lost = _totals(recs, lost_kinds)
    times = {node: (t / launches, n / launches) for node, (t, n) in totals.items()}
    for node, (t, _) in list(times.items()):
        up = parents.get(node)
        while up is not None:
            ut, un = times.get(up, (0.0, 1.0))
            times[up] = (ut + t, un)
            up = parents.get(up)
    out.launches.append(times)
    out.unattributed.append(lost / launches)
    out.seen.update(times)


def _judge(out: Samples, places, optional: set, lost_kinds: dict, by_sig: int) -> None:
    """Complete: no record without a node, and every recorded kind of node outside
    conditional bodies (which always runs) has records; then the nodes in bodies without
    records did not run (0 us, 0 runs) and count as seen."""
    visible = [pl.node for pl in places if node_signature(pl.node) is not None]
    missing = [n for n in visible if n not in out.seen and n not in optional]
    out.complete = not lost_kinds and not missing
    if out.complete:
        out.seen.update(visible)
    if by_sig:
        out.notes.append(f"{by_sig} record stream(s) named by kernel name or size (CUPTI "
                         "reported no copy for them)")
    gaps = []
    if lost_kinds:
        what = ", ".join(f"{k} x{n}" for k, n in sorted(lost_kinds.items())[:4])
        gaps.append(f"CUPTI's records named no node for: {what}")
    if missing:
        names = ", ".join(_label(n) for n in missing[:3])
        gaps.append(f"{len(missing)} node(s) that run every launch left no CUPTI record: "
                    f"{names}{' ...' if len(missing) > 3 else ''}")
    out.notes += gaps
    out.detail["gaps"] = gaps
