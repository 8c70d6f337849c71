"""The debug wing without a GPU: prefixes and chains of a topological order over a graph's
NodeTable, the bisection, the memory regions and spans, the reports' text, the argument
errors, and the child-process handling (a child that hangs, dies or answers)."""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.debug import fault as fault_mod
from pycudagraph.debug.child import _spans
from pycudagraph.debug.fault import FaultReport, resolve_ref
from pycudagraph.debug.memory import Region, merge_regions, site_spans
from pycudagraph.debug.prefix import (Trial, ancestors, bisect_first, chain_plan, chained_graph,
                                      graph_order, prefix_graph, prefix_plan)
from pycudagraph.debug.race import RacePair, RaceReport, overlap
from pycudagraph.debug.worker import Worker, exit_text
from pycudagraph.nodes.facets import Site
from tests.support.fakes import fake_edges, fake_exec, fake_graph, fake_kernel_node, fake_node, node_order


def resolver_for_tests(name):  # importable by a child process: tests.debug.test_debug_cpu
    return 0


# prefixes of a topological order -----------------------------------------------------------

@pytest.fixture
def diamond(monkeypatch):
    """a -> b, a -> c, b -> d, c -> d, and e alone, made in the order e, a, c, b, d."""
    g = fake_graph()
    e, a, c, b, d = (fake_node(g) for _ in range(5))
    node_order(monkeypatch, g)
    fake_edges(monkeypatch, (a, b), (a, c), (b, d), (c, d))
    return g, dict(a=a, b=b, c=c, d=d, e=e)


def test_the_order_is_topological_with_ties_in_creation_order(diamond):
    g, n = diamond
    order, edges = graph_order(g)
    assert order == [n["e"], n["a"], n["c"], n["b"], n["d"]]
    assert set(edges) == {(n["a"], n["b"]), (n["a"], n["c"]), (n["b"], n["d"]), (n["c"], n["d"])}
    assert set(edges.values()) == {"default"}


def test_every_prefix_holds_the_dependencies_of_its_nodes(diamond):
    g, _ = diamond
    order, edges = graph_order(g)
    for k in range(len(order) + 1):
        keep, drop = prefix_plan(order, k)
        assert keep == order[:k] and drop == order[k:][::-1]
        for a, b in edges:  # no kept node depends on a dropped one
            assert not (b in keep and a in drop)
    with pytest.raises(ValueError):
        prefix_plan(order, len(order) + 1)


def test_the_chain_removes_the_prefix_edges_and_links_each_node_to_the_next(diamond):
    g, n = diamond
    order, edges = graph_order(g)
    remove, add = chain_plan(order, edges, 4)  # e, a, c, b
    assert {(a, b) for a, b, _ in remove} == {(n["a"], n["b"]), (n["a"], n["c"])}
    assert add == [(n["e"], n["a"]), (n["a"], n["c"]), (n["c"], n["b"])]
    assert chain_plan(order, edges, 1) == ([], [])


class _FakeClone:
    """Just what prefix_graph and chained_graph call on a clone."""

    def __init__(self, edges):
        self.removed, self.edges = [], {(f"{a}'", f"{b}'"): p for (a, b), p in edges.items()}

    def find(self, node):
        return f"{node}'"

    def remove_node(self, node):
        self.removed.append(node)
        self.edges = {k: v for k, v in self.edges.items() if node not in k}

    def remove_dependency(self, a, b, port=None):
        assert port is None  # default edges
        del self.edges[(a, b)]

    def add_dependency(self, a, b):
        assert (a, b) not in self.edges
        self.edges[(a, b)] = "default"


class _FakeGraph:
    def __init__(self, edges):
        self.edges = edges
        self.clones = []

    def clone(self):
        self.clones.append(_FakeClone(self.edges))
        return self.clones[-1]


def test_the_builders_remove_the_later_nodes_and_chain_the_rest():
    edges = {("a", "b"): "default", ("a", "c"): "default", ("c", "d"): "default"}
    order = ["a", "b", "c", "d"]
    g = _FakeGraph(edges)
    clone, nodes = prefix_graph(g, order, 2)
    assert nodes == ["a'", "b'"] and clone.removed == ["d'", "c'"]  # the last first
    assert clone.edges == {("a'", "b'"): "default"}
    clone, nodes = chained_graph(g, order, edges, 3)
    assert nodes == ["a'", "b'", "c'"]
    assert clone.edges == {("a'", "b'"): "default", ("b'", "c'"): "default"}


def test_ancestors_follow_every_path():
    edges = [("a", "b"), ("b", "c"), ("x", "c"), ("c", "d")]
    assert ancestors("d", edges) == {"a", "b", "c", "x"}
    assert ancestors("a", edges) == set()


@pytest.mark.parametrize("n", [1, 2, 3, 7, 200, 1000])
def test_bisection_finds_the_first_bad_prefix_in_about_log2_n_trials(n):
    for bad in sorted({b for b in (1, 2, n // 2 + 1, n) if b <= n}):
        asked = []

        def run(k):
            asked.append(k)
            return Trial(k, "fault" if k >= bad else "ok")
        k, trials = bisect_first(n, run)
        assert k == bad and asked[0] == n
        assert len(trials) <= math.ceil(math.log2(n)) + 1 if n > 1 else len(trials) == 1
    k, trials = bisect_first(n, lambda k: Trial(k, "ok"))
    assert k == 0 and len(trials) == 1


# memory ------------------------------------------------------------------------------------

def test_regions_merge_repeats_and_overlaps_and_take_slot_names():
    regions = merge_regions({(0x1000, 0x100, "device"), (0x1000, 0x100, "device"),
                             (0x1080, 0x100, "device"), (0x9000, 0x10, "host")})
    assert [(r.start, r.size, r.kind, r.name) for r in regions] == [
        (0x1000, 0x180, "device", "m0"), (0x9000, 0x10, "host", "m1")]


def test_a_kernel_slot_spans_to_the_next_named_address_of_its_region():
    r = [Region(0x10000, 0x1000, "device", "m0")]
    sites = {"p": [Site("arg 0", 0, 0x10000, arg=0)],
             "c": [Site("arg 0", 0, 0x10400, arg=0), Site("dst", 0, 0x10800, 16)],
             "x": [Site("arg 0", 0, 0x99999, arg=0), Site("alloc", 0, 0x50000, 64, role="alloc")]}
    spans = site_spans(sites, r)
    assert spans["p"] == [(0x10000, 0x10400)]
    assert spans["c"] == [(0x10400, 0x10800), (0x10800, 0x10810)]
    assert spans["x"] == [(0x99999, 0x9999a)]  # outside every region; the alloc site left out
    masks = [np.zeros(0x1000, bool)]
    masks[0][0x500] = True
    assert overlap(spans["c"], masks, r) == 0x10500
    assert overlap(spans["p"], masks, r) is None


def test_the_child_maps_whole_pages_joining_regions_that_share_one():
    regions = [Region(0x200010, 0x40, "device", "m0"), Region(0x200100, 0x40, "device", "m1"),
               Region(0x600000, 0x200001, "device", "m2")]
    spans = _spans(regions, 0x200000)
    assert [(lo, hi, [r.name for r in rs]) for lo, hi, rs in spans] == [
        (0x200000, 0x400000, ["m0", "m1"]), (0x600000, 0xA00000, ["m2"])]


# reports -----------------------------------------------------------------------------------

def test_a_fault_report_names_the_node_its_fields_the_error_and_the_trials(cpu_device):
    g = fake_graph()
    node = fake_kernel_node(g, args=(7, 1 << 40), sig="int a, long long at")
    trials = [Trial(3, "fault", "boom"), Trial(1, "ok"), Trial(2, "fault", "boom")]
    r = FaultReport(node=node, index=1, error="cudaStreamSynchronize failed: "
                    "cudaErrorIllegalAddress (an illegal memory access was encountered)",
                    error_name="cudaErrorIllegalAddress", trials=trials, n=3,
                    fields=["grid: (1, 1, 1)", "args:", "  at: 0x10000000000"], seconds=1.5)
    text = str(r)
    assert r.found and "node 2 of 3" in text and "'k'" in text
    assert "cudaErrorIllegalAddress" in text and "0x10000000000" in text
    assert "nothing wrong with its addresses" in text
    assert "3 trial(s) in 1.5 s (1-3: fault, 1: ok, 1-2: fault)" in text
    none = FaultReport(n=5, trials=[Trial(5, "ok")])
    assert not none.found and "no fault" in str(none) and "5 node(s)" in str(none)


def test_a_race_report_names_both_nodes_and_the_edge_to_add(cpu_device):
    g = fake_graph()
    p, c = fake_kernel_node(g), fake_kernel_node(g)
    pair = RacePair(p, c, 0x7000_1000, "the producer writes memory the consumer points at")
    r = RaceReport(node=c, index=1, pairs=[pair], trials=[Trial(2, "differs")], n=2, runs=5,
                   differing=8, positions={p: 0, c: 1})
    text = str(r)
    assert not r.ok and "node 1 (kernel 'k') -> node 2 (kernel 'k')" in text
    assert "0x70001000" in text and "add_dependency" in text and "8 byte(s)" in text
    assert "add_dependency" in str(pair)
    calm = RaceReport(node=c, index=1, trials=[Trial(2, "differs")], n=2, runs=5, unstable=4)
    assert calm.ok and "no race claimed" in str(calm) and "nondeterministic" in str(calm)
    assert RaceReport(n=3).ok and "none" in str(RaceReport(n=3))


# argument errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda g: pcg.find_fault(object()), "expected a Graph or GraphExec, got object"),
    (lambda g: pcg.find_fault(g, timeout=0), "timeout must be a number of seconds > 0"),
    (lambda g: pcg.find_fault(g, timeout=True), "timeout must be"),
    (lambda g: pcg.find_fault(g, progress=3), "progress must be None or a callable"),
    (lambda g: pcg.find_fault(g, resolve=lambda name: 0), "cannot be imported by the child"),
    (lambda g: pcg.find_fault(g, resolve=5), "resolve must be a function"),
    (lambda g: pcg.find_fault(g, resolve="no_such_module_here:f"), "cannot be imported"),
    (lambda g: pcg.find_race("graph"), "expected a Graph or GraphExec, got str"),
    (lambda g: pcg.find_race(g, runs=0), "runs must be an int >= 1"),
    (lambda g: pcg.find_race(g, runs=2.5), "runs must be an int >= 1"),
    (lambda g: pcg.find_race(g, progress="yes"), "progress must be None"),
])
def test_bad_arguments_are_refused_naming_what_is_wrong(call, match):
    with pytest.raises(pcg.ArgumentError, match=match):
        call(fake_graph())


def test_an_exec_without_its_graph_is_refused():
    exe = fake_exec(fake_graph())
    exe.graph = None
    with pytest.raises(pcg.ArgumentError, match="has no graph to read"):
        pcg.find_fault(exe)


def test_a_resolver_is_named_by_module_and_name_for_the_child():
    assert resolve_ref(resolver_for_tests) == ["tests.debug.test_debug_cpu", "resolver_for_tests"]
    assert resolve_ref("tests.debug.test_debug_cpu:resolver_for_tests") == [
        "tests.debug.test_debug_cpu", "resolver_for_tests"]
    assert resolve_ref(None) is None


def test_graphs_without_nodes_need_no_trial(monkeypatch):
    g = fake_graph()
    node_order(monkeypatch, g)
    fake_edges(monkeypatch)
    r = pcg.find_fault(g)
    assert r.node is None and r.trials == [] and "no nodes" in str(r)
    assert pcg.find_race(g).ok


# the child process -------------------------------------------------------------------------

def _child(tmp_path, code: str) -> Worker:
    return Worker(tmp_path / "log", command=[sys.executable, "-c", code])


def test_a_child_that_answers_is_read_line_by_line(tmp_path):
    w = _child(tmp_path, "import os, sys, json\nout = os.fdopen(int(sys.argv[1]), 'w')\n"
                         "print('noise on stdout')\nfor line in sys.stdin:\n"
                         "    out.write(json.dumps({'ok': True, 'got': json.loads(line)}) + '\\n')\n"
                         "    out.flush()\n")
    try:
        assert w.ask({"op": "trial", "k": 3}, 30) == {"ok": True, "got": {"op": "trial", "k": 3}}
        assert w.ask({"op": "trial", "k": 4}, 30)["got"]["k"] == 4
    finally:
        w.close()
    assert not w.alive and "noise on stdout" in w.log_tail()
    w.close()  # idempotent


def test_a_child_that_hangs_is_stopped_after_the_time_limit(tmp_path):
    w = _child(tmp_path, "import time\ntime.sleep(120)")
    t0 = time.monotonic()
    try:
        assert w.ask({"op": "trial"}, 0.5) == {"timeout": 0.5}
        assert time.monotonic() - t0 < 20 and not w.alive
    finally:
        w.close()


def test_a_child_that_dies_without_answering_reports_its_exit(tmp_path):
    w = _child(tmp_path, "import sys\nprint('dying')\nsys.stdin.readline()\nsys.exit(7)")
    try:
        assert w.ask({"op": "trial"}, 30) == {"exited": 7}
    finally:
        w.close()
    assert exit_text(7) == "exit code 7" and exit_text(-11) == "killed by SIGSEGV"
    assert "dying" in w.log_tail()


def test_a_trial_session_turns_each_answer_into_an_outcome(tmp_path, monkeypatch):
    """A fault, a hang and a death are bad trials; a setup error raises with the log."""
    session = fault_mod._Session(tmp_path, {"op": "setup"}, 0.5, None)
    answers = iter([{"fault": "cudaStreamSynchronize failed: cudaErrorIllegalAddress (x)",
                     "name": "cudaErrorIllegalAddress"}, {"timeout": 0.5}, {"exited": -9},
                    {"ok": True}, {"setup_error": "GraphFileError: no resolver"}])

    class _W:
        alive = True

        def ask(self, msg, timeout):
            return next(answers)

        def close(self):
            pass

        def log_tail(self, chars=2000):
            return "child log"

    monkeypatch.setattr(session, "start", lambda: _W())
    got = [session.trial(k, tmp_path / "f") for k in (4, 3, 2, 1)]
    assert [(t.k, t.outcome, t.bad) for t in got] == [
        (4, "fault", True), (3, "hang", True), (2, "crash", True), (1, "ok", False)]
    assert got[0].name == "cudaErrorIllegalAddress" and "SIGKILL" in got[2].error
    with pytest.raises(pcg.PyCudaGraphError, match="could not run nodes 1-5: GraphFileError"):
        session.trial(5, tmp_path / "f")
