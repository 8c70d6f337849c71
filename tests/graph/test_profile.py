"""GraphExec.profile on the CPU: the Profile (medians, runs, shares, the table, the critical
path), how the methods are chosen and what is refused, the grouping of CUPTI records by
launch and node, and the CUPTI method's calls against a stand-in for cupti-python. Nodes
are fake (tests/fakes.py): no raw call reaches CUDA."""

import types

import pytest

import pycudagraph as pcg
from pycudagraph.profile import profile
from pycudagraph.profile import cupti as profile_cupti
from pycudagraph.profile import records as profile_records
from pycudagraph.profile import stamps as profile_stamps
from pycudagraph.profile.profile import NodeTime, Profile
from pycudagraph.inspect.tree import Place
from tests.support.fakes import fake_graph, fake_node
from tests.support.profile_fakes import FakeCupti, FakeExec, Handle, SBuffer, SGraph


@pytest.fixture
def diamond():
    """a -> (b, c) -> d, plus e inside a's body (a child graph node)."""
    g = fake_graph()
    a, b, c, d = (fake_node(g, pcg.KernelNode) for _ in range(4))
    e = fake_node(fake_graph(), pcg.KernelNode)
    places = [Place(a, "0", 0, None, None), Place(e, "0/child/0", 1, a, "child"),
              Place(b, "1", 0, None, None), Place(c, "2", 0, None, None),
              Place(d, "3", 0, None, None)]
    edges = [(a, b), (a, c), (b, d), (c, d)]
    return g, (a, b, c, d, e), places, edges


def _profile(nodes, times, edges, total=100.0, seen=None):
    a, b, c, d, e = nodes
    names = dict(zip(nodes, "abcde"))
    rows = [NodeTime(n, times[n], 1, names[n], f"kernel_{names[n]}", "kernel",
                     True if seen is None else n in seen, 1 if n is e else 0) for n in nodes]
    return Profile(rows, total, "stamps", 10, edges)


def test_a_profile_answers_per_node(diamond):
    _, nodes, _, edges = diamond
    a, b, c, d, e = nodes
    p = _profile(nodes, {a: 10.0, b: 50.0, c: 20.0, d: 5.0, e: 4.0}, edges)
    assert p[b] == 50.0 and p.runs(b) == 1 and p.share(b) == 0.5
    assert p.critical_path == [a, b, d] and p.critical_path_us == 65.0
    assert [r.node for r in p.rows][:2] == [b, c]
    assert len(p) == 5 and set(p) == set(nodes) and b in p and object() not in p
    with pytest.raises(pcg.ArgumentError, match="not a node of the profiled graph"):
        p["kernel_b"]
    text = str(p)
    lines = text.splitlines()
    assert lines[0].startswith("Profile (stamps, median of 10 launches): 100.0 us per launch")
    assert "kernel_b" in lines[2] and "50.0%" in lines[2]  # slowest first, with its share
    assert "  kernel_e" in text  # inner nodes indented
    assert "critical path (3 nodes, 65.0 us): kernel_a -> kernel_b -> kernel_d" in text
    assert "more" in p.table(limit=2)


def test_unseen_nodes_show_a_dash(diamond):
    _, nodes, _, edges = diamond
    a, b, c, d, e = nodes
    p = _profile(nodes, {n: 0.0 for n in nodes} | {b: 3.0}, edges, seen={b})
    rows = {r.node: r for r in p.rows}
    assert not rows[a].seen and rows[b].seen
    line = next(ln for ln in str(p).splitlines() if "kernel_a" in ln and "critical" not in ln)
    assert "        -" in line


@pytest.fixture
def measured(diamond, monkeypatch):
    """profile_exec with the walk, the methods and the launch timing stood in for."""
    g, nodes, places, edges = diamond
    a, b, c, d, e = nodes
    monkeypatch.setattr(profile, "walk", lambda graph: places)
    monkeypatch.setattr(profile, "node_label", lambda node: f"k{node._h:x}")
    monkeypatch.setattr(profile, "launch_times", lambda exe, stream, n: [100.0, 120.0, 90.0])
    monkeypatch.setattr(profile_cupti, "unavailable", lambda: "no cupti here")
    runs = []

    def measure(graph, pl, stream, repeats):
        runs.append(repeats)
        out = profile_records.Samples("stamps", "empty nodes")
        out.seen = {a, b, c, d, e}
        out.launches = [{a: (10.0, 1), b: (50.0, 1), c: (20.0, 1), d: (5.0, 1), e: (2.0, 3)},
                        {a: (12.0, 1), b: (52.0, 1), c: (22.0, 1), d: (5.0, 1), e: (3.0, 3)},
                        {a: (11.0, 1), b: (70.0, 1), c: (21.0, 1), d: (5.0, 1), e: (2.5, 3)}]
        out.unattributed = [0.0, 0.0, 0.0]
        return out
    monkeypatch.setattr(profile_stamps, "measure", measure)
    exe = types.SimpleNamespace(graph=types.SimpleNamespace(edges=edges))
    return exe, nodes, runs


def test_profile_takes_medians_over_launches(measured):
    exe, (a, b, c, d, e), runs = measured
    p = profile.profile_exec(exe, None, repeats=3)
    assert runs == [3] and p.method == "stamps" and p.total_us == 100.0
    assert (p[a], p[b], p[c], p[e]) == (11.0, 52.0, 21.0, 2.5) and p.runs(e) == 3
    assert p.critical_path == [a, b, d]
    assert any("CUPTI not used: no cupti here" in n for n in p.notes)


def test_what_profile_refuses(measured):
    exe, _, _ = measured
    with pytest.raises(pcg.ArgumentError, match="repeats must be >= 1"):
        profile.profile_exec(exe, None, repeats=0)
    with pytest.raises(pcg.ArgumentError, match="repeats must be an int"):
        profile.profile_exec(exe, None, repeats=2.5)
    with pytest.raises(pcg.ArgumentError, match="method must be one of"):
        profile.profile_exec(exe, None, method="nsys")
    with pytest.raises(pcg.NotSupportedError, match="cupti-python|CUPTI"):
        profile.profile_exec(exe, None, method="cupti")
    with pytest.raises(pcg.ArgumentError, match="no source graph"):
        profile.profile_exec(types.SimpleNamespace(graph=None), None)


def test_cupti_records_are_grouped_by_launch_and_node(diamond):
    _, (a, b, c, d, e), places, _ = diamond
    ids = {101: a, 102: b, 105: e}
    copied = {9001: 101, 9002: 102, 9005: 105}
    records = [  # (exec node id, correlation id, start ns, end ns)
        (9001, 7, 1_000, 11_000), (9002, 7, 12_000, 62_000),
        (9005, 7, 2_000, 3_000), (9005, 7, 4_000, 5_000), (9005, 7, 6_000, 8_000),
        (9999, 7, 70_000, 71_500),  # a node CUPTI gave no copy for: unattributed
        (9001, 8, 100_000, 112_000), (9002, 8, 113_000, 160_000),
        (4242, 99, 0, 5_000),  # another graph's launch: left out
    ]
    s = profile_records.samples(records, copied, ids, places)
    assert len(s.launches) == 2
    first = s.launches[0]
    assert first[b] == (50.0, 1) and first[e] == (4.0, 3)
    assert first[a] == (10.0, 1)  # a: its own record; spans only fill containers without one
    assert s.unattributed == [1.5, 0.0]
    assert s.seen == {a, b, e} and not s.complete  # 1.5 us unnamed; c and d left no record
    assert any("named no node for: record x1" in n for n in s.notes), s.notes
    with pytest.raises(profile_cupti.CuptiUnusable, match="none of CUPTI's 1 records") as exc:
        profile_records.samples([(4242, 1, 0, 10)], copied, ids, places)
    assert exc.value.about_graph


def test_a_container_without_records_spans_its_inner_nodes(diamond):
    _, (a, b, c, d, e), places, _ = diamond
    s = profile_records.samples([(5, 1, 2_000, 3_000), (5, 1, 7_000, 9_000)], {}, {5: e}, places)
    assert s.launches[0][e] == (3.0, 2) and s.launches[0][a] == (7.0, 1)


def test_the_cupti_method_maps_copies_made_at_instantiation(monkeypatch):
    a, b, e = Handle(0xA), Handle(0xB), Handle(0xE)
    places = [Place(a, "0", 0, None, None), Place(b, "1", 0, None, None),
              Place(e, "2", 0, None, None)]
    fake = FakeCupti({0xA: 101, 0xB: 102, 0xE: 105, 0x1A: 9001, 0x1B: 9002, 0x1E: 9005})
    monkeypatch.setattr(profile_cupti, "_cupti", lambda: fake)
    monkeypatch.setattr(profile_cupti, "_state", {"registered": False, "records": None})

    twin = FakeExec(fake, lambda k: [(9001, k, 0, 10_000), (9002, k, 11_000, 31_000),
                                     (9005, k, 1_000, 2_000)])

    class Graph:
        def instantiate(self):
            assert fake.callback is not None, "instantiated while not subscribed"
            for new, old in ((0x1A, 0xA), (0x1B, 0xB), (0x1E, 0xE)):
                FakeCupti.GraphData.table[new] = types.SimpleNamespace(node=new, original_node=old)
                fake.callback(None, 3, 15, FakeCupti.ResourceData(new))
            return twin

    assert profile_cupti.unavailable() is None
    s = profile_cupti.measure(Graph(), places, None, repeats=2)
    assert fake.calls == ["register", "subscribe", "unsubscribe", "flush", "close"]
    assert not fake.enabled and twin.launches == 3  # one warm-up, not recorded
    assert len(s.launches) == 2 and s.unattributed == [0.0, 0.0]
    assert s.launches[0] == {a: (10.0, 1), b: (20.0, 1), e: (1.0, 1)}


# The stamps method against a stand-in graph: what it adds, where, and how it reads back.

@pytest.fixture
def stamped(monkeypatch):
    monkeypatch.setattr(profile_stamps, "stamp_kernels", lambda: ("begin", "end"))
    monkeypatch.setattr(profile_stamps, "DeviceBuffer", SBuffer)
    monkeypatch.setattr(profile_stamps, "walk", lambda g: [Place(n, str(i), 0, None, None)
                                                           for i, n in enumerate(g.nodes)])


def _chain(graph):
    a = graph.add("kernel", "a")
    e = graph.add("empty", "join", [a])
    b = graph.add("kernel", "b", [e])
    return a, e, b


@pytest.mark.parametrize("clonable", [True, False])
def test_the_stamps_surround_each_node_and_come_off_again(stamped, clonable):
    times = {"a": 12.0, "b": 30.0, "calibration": 2.0}
    g = SGraph(times, runs={"b": 3}, clonable=clonable)
    a, e, b = _chain(g)
    places = [Place(n, str(i), 0, None, None) for i, n in enumerate(g.nodes)]
    s = profile_stamps.measure(g, places, None, repeats=3)
    assert s.method == "stamps" and len(s.launches) == 3 and s.seen == {a, b}
    # each launch: the stamp hop (2 us) taken off every run
    assert s.launches[0][a] == (10.0, 1) and s.launches[0][b] == (84.0, 3)
    assert e not in s.launches[0]  # empty nodes are not stamped
    if clonable:
        assert not g.added and not g.removed  # the original graph was never touched
        assert "a clone of the graph" in s.notes[0]
    else:  # stamped in place, and every stamp removed again
        assert len(g.added) == 2 * 2 + 2 and sorted(map(id, g.removed)) == sorted(map(id, g.added))
        assert b.deps[-1] in g.added  # the begin stamp, wired before the node
        assert "the graph itself" in s.notes[0]


def test_without_cupti_python_the_reason_names_the_extra(monkeypatch):
    def missing():
        raise ImportError("No module named 'cupti'")
    monkeypatch.setattr(profile_cupti, "_cupti", missing)
    assert "pip install 'pycudagraph[profile]'" in profile_cupti.unavailable()
    broken = types.SimpleNamespace(get_timestamp=lambda: (_ for _ in ()).throw(OSError("no lib")))
    monkeypatch.setattr(profile_cupti, "_cupti", lambda: broken)
    assert "libcupti does not answer: OSError: no lib" in profile_cupti.unavailable()
