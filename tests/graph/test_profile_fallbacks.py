"""GraphExec.profile where a method cannot measure every node, on the CPU: CUPTI records
named by what they did (no node copies reported), bodies that did not run, the exec timed
itself where CUDA refuses a twin, the stamps kept out of conditional bodies or refused
outright, and how profile_exec falls back between the methods and says so in its notes."""

import types

import pytest

import pycudagraph as pcg
from pycudagraph.profile import profile
from pycudagraph.profile import cupti as profile_cupti
from pycudagraph.profile import records as profile_records
from pycudagraph.profile import stamps as profile_stamps
from pycudagraph.inspect.tree import Place
from tests.support.fakes import fake_graph, fake_node
from tests.support.profile_fakes import (REFUSED, FakeCupti, FakeExec, Handle, SBuffer,
                                         SGraph)

KERNEL, MEMSET = FakeCupti.ActivityKind.CONCURRENT_KERNEL, FakeCupti.ActivityKind.MEMSET


def _child_tree(ordered=True):
    """0: tiny (named by a copy); 1: memset 64 B; 2: child graph of tiny -> tiny."""
    t0, ms = Handle(0x10, name="tiny"), Handle(0x11, "memset", nbytes=64)
    child = Handle(0x12, "child_graph")
    t1 = Handle(0x13, name="tiny")
    t2 = Handle(0x14, name="tiny", deps=[t1] if ordered else [])
    places = [Place(t0, "0", 0, None, None), Place(ms, "1", 0, None, None),
              Place(child, "2", 0, None, None), Place(t1, "2/child/0", 1, child, "child"),
              Place(t2, "2/child/1", 1, child, "child")]
    return (t0, ms, child, t1, t2), places


def _child_records(launch: int) -> list:
    base = 100_000 * launch
    return [(901, launch, base, base + 1_000),  # t0, through the reported copy
            (952, launch, base + 2_000, base + 2_500, ("memset", 64)),
            (950, launch, base + 3_000, base + 5_000, ("kernel", "tiny")),   # t1: first
            (951, launch, base + 6_000, base + 9_000, ("kernel", "tiny"))]   # t2: after it


def test_records_without_a_copy_are_named_by_kernel_name_size_and_order():
    (t0, ms, child, t1, t2), places = _child_tree()
    records = _child_records(1) + _child_records(2)
    s = profile_records.samples(records, {901: 100}, {100: t0}, places)
    assert s.complete and s.unattributed == [0.0, 0.0]
    first = s.launches[0]
    assert first[t0] == (1.0, 1) and first[ms] == (0.5, 1)
    assert first[t1] == (2.0, 1) and first[t2] == (3.0, 1)  # paired in the edges' order
    assert first[child] == (6.0, 1)  # the span of its inner records
    assert s.detail["by_signature"] == 3
    assert any("3 record stream(s) named by kernel name or size" in n for n in s.notes)


def test_twins_the_edges_do_not_order_stay_unnamed():
    (t0, ms, child, t1, t2), places = _child_tree(ordered=False)
    s = profile_records.samples(_child_records(1), {901: 100}, {100: t0}, places)
    assert not s.complete and s.unattributed == [5.0]
    assert t1 not in s.seen and t2 not in s.seen and ms in s.seen
    assert any("named no node for: kernel tiny x2" in n for n in s.notes), s.notes
    assert any("2 node(s) that run every launch left no CUPTI record" in n for n in s.notes)


def test_body_nodes_without_records_did_not_run():
    k = Handle(1, name="k")
    cond = Handle(2, "conditional")
    step, other = Handle(3, name="step"), Handle(4, name="other")
    places = [Place(k, "0", 0, None, None), Place(cond, "1", 0, None, None),
              Place(step, "1/then/0", 1, cond, "then"), Place(other, "1/else/0", 1, cond, "else")]
    records = []
    for launch in (1, 2):
        base = 100_000 * launch
        records.append((5, launch, base, base + 1_000))
        # the body's records under a correlation of their own: they join their launch
        records += [(6, 50 + launch, base + 2_000 * i, base + 2_000 * i + 500) for i in (1, 2, 3)]
    s = profile_records.samples(records, {}, {5: k, 6: step}, places)
    assert len(s.launches) == 2 and s.complete
    assert s.launches[0][step] == (1.5, 3) and s.launches[0][cond] == (4.5, 1)
    assert other in s.seen and other not in s.launches[0]  # it did not run: 0 us, 0 runs


def _cupti_setup(monkeypatch, refuse: bool):
    k, ms = Handle(0xA, name="spin"), Handle(0xB, "memset", nbytes=4)
    places = [Place(ms, "0", 0, None, None), Place(k, "1", 0, None, None)]
    fake = FakeCupti({0xA: 101, 0xB: 102})
    monkeypatch.setattr(profile_cupti, "_cupti", lambda: fake)
    monkeypatch.setattr(profile_cupti, "_state", {"registered": False, "records": None,
                                                  "kinds": {}})

    def records(n):
        return [(7001, n, 0, 1_000, MEMSET, 4), (7002, n, 2_000, 52_000, KERNEL, "spin")]

    class Graph:
        def instantiate(self):
            if refuse:
                raise pcg.CudaError(*REFUSED)
            return FakeExec(fake, records)

    def exec_():
        return FakeExec(fake, records)

    return fake, exec_, Graph(), places, (ms, k)


def test_cupti_times_the_exec_itself_where_cuda_refuses_a_twin(monkeypatch):
    fake, exec_, graph, places, (ms, k) = _cupti_setup(monkeypatch, refuse=True)
    s = profile_cupti.measure(graph, places, None, repeats=2, exe=exec_())
    assert "close" not in fake.calls  # the exec being profiled is not closed
    assert s.detail["mode"] == "exec itself" and s.complete
    assert s.launches[0] == {ms: (1.0, 1), k: (50.0, 1)}
    assert "CUPTI timed the exec itself" in s.notes[0] and "cudaErrorNotSupported" in s.notes[0]
    with pytest.raises(profile_cupti.CuptiUnusable, match="refused a twin") as exc:
        profile_cupti.measure(graph, places, None, repeats=2)
    assert exc.value.about_graph


def test_a_twin_cupti_could_not_name_is_incomplete(monkeypatch):
    fake, _, graph, places, (ms, k) = _cupti_setup(monkeypatch, refuse=False)
    fake.node_ids[0xA] = 555  # the kernel's record names a node nothing maps to ...
    places[1].node.kernel_name = places[1].node.mangled_name = "other"  # ... nor its name
    s = profile_cupti.measure(graph, places, None, repeats=2)
    assert "close" in fake.calls and s.detail["mode"] == "twin"
    assert not s.complete and s.unattributed == [50.0, 50.0]
    assert s.launches[0] == {ms: (1.0, 1)}


# profile_exec: which method's samples make the profile, and what the notes say


def _samples(method, seen, complete, gaps=(), times=None):
    out = profile_records.Samples(method, "things", complete=complete)
    out.seen = set(seen)
    out.launches = [dict(times or {n: (1.0, 1) for n in seen})]
    out.unattributed = [0.0 if complete else 3.0]
    out.detail["gaps"] = list(gaps)
    out.notes = list(gaps)
    return out


@pytest.fixture
def tree(monkeypatch):
    g = fake_graph()
    a, b = fake_node(g, pcg.KernelNode), fake_node(g, pcg.KernelNode)
    places = [Place(a, "0", 0, None, None), Place(b, "1", 0, None, None)]
    monkeypatch.setattr(profile, "walk", lambda graph: places)
    monkeypatch.setattr(profile, "node_label", {a: "a", b: "b"}.get)
    monkeypatch.setattr(profile, "launch_times", lambda exe, stream, n: [10.0])
    monkeypatch.setattr(profile_cupti, "unavailable", lambda: None)
    exe = types.SimpleNamespace(graph=types.SimpleNamespace(edges=[(a, b)]))
    return exe, a, b


def test_incomplete_cupti_gives_way_to_complete_stamps(tree, monkeypatch):
    exe, a, b = tree
    monkeypatch.setattr(profile_cupti, "measure", lambda *args: _samples(
        "cupti", {a}, False, ["CUPTI's records named no node for: kernel b x1"]))
    monkeypatch.setattr(profile_stamps, "measure", lambda *args: _samples("stamps", {a, b}, True))
    p = profile.profile_exec(exe, None, repeats=1)
    assert p.method == "stamps" and p[b] == 1.0
    note = next(n for n in p.notes if "did not cover" in n)
    assert "kernel b x1" in note and "3.0 us per launch unattributed" in note
    assert "the stamps measured instead" in note


def test_incomplete_cupti_is_kept_when_the_stamps_cannot_do_better(tree, monkeypatch):
    exe, a, b = tree
    monkeypatch.setattr(profile_cupti, "measure", lambda *args: _samples("cupti", {a}, False))
    monkeypatch.setattr(profile_stamps, "measure", lambda *args: profile_stamps.unmeasured(
        "CUDA refused a second executable graph"))
    p = profile.profile_exec(exe, None, repeats=1, method="cupti")
    assert p.method == "cupti" and p[a] == 1.0 and not next(r for r in p.rows
                                                           if r.node == b).seen
    assert any("the stamps could not do better: the stamps measured nothing: CUDA refused" in n
               for n in p.notes), p.notes
    assert any("see the notes below" in n for n in p.notes)


@pytest.mark.parametrize("about_graph", [False, True])
def test_method_cupti_raises_only_where_cupti_itself_is_unusable(tree, monkeypatch,
                                                                 about_graph):
    exe, a, b = tree

    def refuse(*args):
        raise profile_cupti.CuptiUnusable("it cannot", about_graph=about_graph)
    monkeypatch.setattr(profile_cupti, "measure", refuse)
    monkeypatch.setattr(profile_stamps, "measure", lambda *args: _samples("stamps", {a, b}, True))
    if not about_graph:
        with pytest.raises(pcg.NotSupportedError, match="it cannot"):
            profile.profile_exec(exe, None, repeats=1, method="cupti")
    p = profile.profile_exec(exe, None, repeats=1, method="cupti" if about_graph else "auto")
    assert p.method == "stamps" and "CUPTI not used: it cannot" in p.notes


# The stamps where CUDA refuses: a graph with a while loop, instrumented in place


@pytest.fixture
def stamped(monkeypatch):
    monkeypatch.setattr(profile_stamps, "stamp_kernels", lambda: ("begin", "end"))
    monkeypatch.setattr(profile_stamps, "DeviceBuffer", SBuffer)


def _loop_graph(refuse):
    times = {"a": 5.0, "loop": 40.0, "step": 8.0, "calibration": 1.0}
    g = SGraph(times, clonable=False, refuse=refuse)
    body = SGraph(times, runs={"step": 4})
    g.bodies.append(body)
    a = g.add("kernel", "a")
    loop = g.add("conditional", "loop", [a])
    step = body.add("kernel", "step")
    places = [Place(a, "0", 0, None, None), Place(loop, "1", 0, None, None),
              Place(step, "1/body/0", 1, loop, "body")]
    return g, body, (a, loop, step), places


def _all_removed(*graphs):
    return all(sorted(map(id, g.removed)) == sorted(map(id, g.added)) for g in graphs)


def test_stamps_inside_bodies_where_cuda_takes_them(stamped):
    g, body, (a, loop, step), places = _loop_graph(refuse=None)
    s = profile_stamps.measure(g, places, None, repeats=2)
    assert s.complete and s.seen == {a, loop, step}
    assert s.launches[0][step] == (28.0, 4) and s.launches[0][loop] == (39.0, 1)
    assert g.instantiated == 2 and _all_removed(g, body)  # the plain twin tried first


def test_stamps_leave_the_bodies_where_cuda_refuses_them_there(stamped):
    g, body, (a, loop, step), places = _loop_graph(refuse="bodies")
    s = profile_stamps.measure(g, places, None, repeats=2)
    assert not s.complete and s.seen == {a, loop}
    assert s.launches[0][loop] == (39.0, 1) and step not in s.launches[0]
    assert any("no stamps inside conditional bodies" in n and "cudaErrorNotSupported" in n
               for n in s.notes), s.notes
    assert body.added and _all_removed(g, body)


def test_stamps_measure_nothing_where_cuda_refuses_a_second_exec(stamped):
    g, body, (a, loop, step), places = _loop_graph(refuse="always")
    s = profile_stamps.measure(g, places, None, repeats=2)
    assert not s.complete and s.seen == set() and s.launches == [{}]
    assert "CUDA refused a second executable graph" in s.notes[0]
    assert "method='cupti'" in s.notes[0]
    assert g.instantiated == 1 and not g.added and not body.added  # nothing was stamped
