"""``pcg.graphed`` modes on the CPU (frameworks/graphed.py, graphed_new_keys.py,
graphed_background.py, graphed_keys.py): fake PyTorch, a fake capture making fake entries
whose pools hold fake allocator segments.

The key table's states: ``capture="background"`` runs a key eagerly until its capture
ends (a gate holds the capture), never waiting; a failed capture runs eagerly with one
warning (inline and background) or raises (``fallback="raise"``); a budget admits exactly
3 of 5 keys; ``over_budget="evict"`` drops the least recently used; shared and private
pools counted; ``clear()`` during a background capture throws it away; a shared pool's
launches from another stream wait for the last launch; the options are checked.
"""

import contextlib
import gc
import threading
import types
import warnings
import weakref

import pytest

import pycudagraph as pcg
from pycudagraph.errors import ArgumentError, PyCudaGraphError
from pycudagraph.frameworks import graphed_background, graphed_keys, graphed_new_keys
from pycudagraph.frameworks.graphed_keys import GraphedEntry, Handoff, KeyTable
from tests.support.fake_frameworks import FakeTensor, install_torch

P = 0x7F00_0000_0000
OUT = 0x7E00_0000_0000
SIZE = 2 << 20  # bytes a fake capture adds to its pool


class FakePlan:
    slots = [1]
    unproven = []

    def __init__(self, ptrs):
        self.bound = list(ptrs)

    def apply(self, ptrs, changed):
        self.bound = list(ptrs)
        return len(changed)


class FakeExec:
    def __init__(self, log, key):
        self.log, self.key = log, key

    def launch(self, stream):
        self.log.append(("launch", self.key, stream))


class Rig:
    """A graphed callable of ``fn`` (by default one returning ("eager", x.data_ptr()))
    whose captures make fake entries; ``gate`` (when set) holds each capture until
    released; ``fail`` lists the row counts whose capture raises."""

    def __init__(self, monkeypatch, torch, fn=None, **options):
        self.torch, self.log, self.fail, self.gate = torch, [], set(), None
        self.captured, self.segments = [], torch.allocator.segments
        self.entered = threading.Event()  # set when a capture begins
        self.f = pcg.graphed(fn or (lambda x: ("eager", x.data_ptr())), **options)
        for mod in (graphed_new_keys, graphed_background, graphed_keys):
            monkeypatch.setattr(mod, "device_scope", lambda dev: contextlib.nullcontext())
        monkeypatch.setattr(graphed_new_keys, "twin", lambda a: a)
        monkeypatch.setattr(graphed_new_keys, "Event", lambda timing: FakeEvent([]))
        monkeypatch.setattr(graphed_keys, "Event", lambda timing: FakeEvent(self.log))
        monkeypatch.setattr(graphed_keys, "Stream", FakeStream(self.log))
        rig = self

        def capture(self, key, args, kwargs, infos, device, ready, warm=None):
            rows = infos[0].obj.shape[0]
            rig.entered.set()
            if rig.gate is not None:
                assert rig.gate.wait(10), "the gate was never opened"
            if rows in rig.fail:
                raise RuntimeError(f"operation not permitted when stream is capturing "
                                   f"(rows={rows})")
            pool, outputs_pool = self.table.pools_for_capture()
            act = pool.activate(0, 0)  # the fake allocator names the pool
            act.close()
            before = sum(s["total_size"] for s in rig.segments
                         if s["segment_pool_id"] == pool.torch_id)
            if not self.table.shared or not before:  # a shared pool grows once
                rig.segments.append({"address": P + len(rig.segments) * SIZE,
                                     "total_size": SIZE, "segment_pool_id": pool.torch_id})
            n = len(rig.captured)
            out = FakeTensor(OUT + 0x100000 * n, (rows,))
            entry = GraphedEntry(key, None, FakeExec(rig.log, rows), pool, out,
                                 FakePlan([i.ptr for i in infos]), frozenset({"torch"}), 0,
                                 outputs_pool=outputs_pool)
            entry.nbytes = 0 if before else SIZE
            rig.captured.append(rows)
            return entry, None

        capturer = self.f._capturer  # this callable's own: a capture thread left running
        monkeypatch.setattr(capturer, "capture", types.MethodType(capture, capturer))

    def call(self, rows, at=0):
        return self.f(FakeTensor(P + 0x10000 * (rows + at), (rows,)))

    def replays(self):
        return [e[1] for e in self.log if e[0] == "launch"]


class FakeEvent:
    def __init__(self, log):
        self.log = log

    def record(self, stream):
        self.log.append(("record", stream))


class FakeStream:
    def __init__(self, log):
        self.log = log

    def wrap(self, h):
        log = self.log
        return type("W", (), {"wait": lambda s, ev: log.append(("wait", h))})()


@pytest.fixture
def torch(monkeypatch):
    return install_torch(monkeypatch)


def test_options_are_checked():
    with pytest.raises(ArgumentError, match="capture must be one of"):
        pcg.graphed(len, capture="later")
    with pytest.raises(ArgumentError, match="fallback must be one of"):
        pcg.graphed(len, fallback="ignore")
    with pytest.raises(ArgumentError, match="pool must be one of"):
        pcg.graphed(len, pool="global")
    with pytest.raises(ArgumentError, match="memory_budget"):
        pcg.graphed(len, memory_budget=-1)
    with pytest.raises(ArgumentError, match="memory_budget"):
        pcg.graphed(len, memory_budget="1 GB")
    with pytest.raises(ArgumentError, match="needs pool='private'"):
        pcg.graphed(len, memory_budget=10, over_budget="evict")
    f = pcg.graphed(len, capture="background", fallback="eager", memory_budget=5,
                    pool="private", over_budget="evict")
    assert (f.capture, f.fallback, f.pool, f.memory_budget) == ("background", "eager",
                                                                "private", 5)


def test_background_runs_eagerly_until_the_capture_is_done(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, capture="background")
    rig.gate = threading.Event()
    first = rig.call(8)
    assert first[0] == "eager" and rig.f.pending and not rig.f.graphs
    for n in range(5):  # the capture is held: each call runs eagerly, none waits
        assert rig.call(8, at=n + 1)[0] == "eager"
    assert rig.f.stats.eager_calls == 6 and rig.f.stats.replays == 0
    assert not rig.f.wait_captures(0.05)  # still held
    rig.gate.set()
    assert rig.f.wait_captures(10)
    assert not rig.f.pending and len(rig.f.graphs) == 1 and rig.f.stats.captures == 1
    entry, = rig.f.graphs.values()
    assert entry.bound[0][0].data_ptr() == P + 0x10000 * 8  # the first call's arguments
    out = rig.call(8, at=9)
    assert out is entry.outputs and rig.replays() == [8]
    assert entry.plan.bound == [P + 0x10000 * 17]  # rebound to the new input
    assert rig.f.stats.eager_calls == 6


def test_a_dropped_callable_goes_without_the_collector(monkeypatch, torch):
    # the capture thread's methods of the callable are held weakly: no cycle keeps a
    # dropped callable, its graphs and their pools until the collector runs (the GPU
    # tests measure the pools' memory coming back)
    rig = Rig(monkeypatch, torch, capture="background")
    rig.call(8)
    assert rig.f.wait_captures(10)
    assert rig.call(8, at=1) is not None and rig.replays() == [8]
    gone = weakref.ref(rig.f)
    gc.collect()
    gc.disable()
    try:
        rig.f = None  # (the rig's capture stand-in refers to the rig)
        assert gone() is None, "the dropped callable waits for the collector"
    finally:
        gc.enable()


def test_background_keys_queue_one_capture_at_a_time(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, capture="background")
    rig.gate = threading.Event()
    for rows in (8, 16, 32):
        assert rig.call(rows)[0] == "eager"
    assert set(k[0][0][1] for k in rig.f.pending) == {(8,), (16,), (32,)}
    rig.gate.set()
    assert rig.f.wait_captures(10)
    assert rig.captured == [8, 16, 32] and len(rig.f.graphs) == 3
    assert [rig.call(r) is not None for r in (8, 16, 32)] and rig.replays() == [8, 16, 32]


@pytest.mark.parametrize("mode", ["inline", "background"])
def test_a_failed_capture_runs_eagerly_with_one_warning(monkeypatch, torch, mode):
    rig = Rig(monkeypatch, torch, capture=mode, fallback="eager")
    rig.fail = {48}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(4):
            for rows in (32, 48):
                out = rig.call(rows, at=n)
                if rows == 48 or (mode == "background" and n == 0):
                    assert out[0] == "eager", (rows, n)
                else:
                    assert out is rig.f.graphs[next(iter(rig.f.graphs))].outputs
                rig.f.wait_captures(10)
    said = [str(m.message) for m in w]
    assert len(said) == 1, said
    assert "<lambda>" in said[0] and "(48,)" in said[0] and "rows=48" in said[0], said[0]
    assert "runs eagerly" in said[0]
    assert len(rig.f.graphs) == 1 and list(rig.f.eager_keys.values())[0] in said[0]
    assert rig.f.stats.failed_captures == 1 and rig.captured == [32]


def test_fallback_raise(monkeypatch, torch):
    rig = Rig(monkeypatch, torch)
    rig.fail = {48}
    for _ in range(2):  # inline: the capture's error, every call (it tries again)
        with pytest.raises(RuntimeError, match="rows=48"):
            rig.call(48)
    assert rig.f.stats.failed_captures == 2 and not rig.f.eager_keys
    bg = Rig(monkeypatch, torch, capture="background")
    bg.fail = {48}
    assert bg.call(48)[0] == "eager" and bg.f.wait_captures(10)
    with pytest.raises(PyCudaGraphError, match="rows=48"):  # once, at the next call
        bg.call(48)
    assert bg.call(48)[0] == "eager" and bg.f.wait_captures(10)  # and it tries again


def test_a_budget_admits_exactly_three_of_five_keys(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, pool="private", memory_budget=SIZE * 7 // 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            outs = [rig.call(rows) for rows in (1, 2, 3, 4, 5)]
    assert [isinstance(o, tuple) for o in outs] == [False, False, False, True, True]  # eager
    assert sorted(k[0][0][1][0] for k in rig.f.graphs) == [1, 2, 3]
    assert len(rig.f.eager_keys) == 2 and rig.captured == [1, 2, 3, 4, 5]
    said = [str(m.message) for m in w]
    assert len(said) == 2 and all("memory_budget=" in s for s in said), said
    mem = rig.f.memory()
    assert mem["total"] == 3 * SIZE and mem["pools"] == 3 and mem["shared"] == 0
    assert sorted(mem["keys"].values()) == [SIZE] * 3


def test_evict_drops_the_least_recently_used(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, pool="private", memory_budget=SIZE * 3,
              over_budget="evict")
    forgot = []
    rig.f._keys.on_change = lambda: forgot.append(1)  # the fast path's forget
    for rows in (1, 2, 3):
        rig.call(rows)
    rig.call(1)  # 2 is now the least recently used
    rig.call(4)
    assert sorted(k[0][0][1][0] for k in rig.f.graphs) == [1, 3, 4]
    assert rig.f.stats.evictions == 1 and not rig.f.eager_keys
    assert rig.f.memory()["total"] == 3 * SIZE and forgot


def test_shared_pool_counted_once(monkeypatch, torch):
    shared = Rig(monkeypatch, torch)
    for rows in (1, 2, 3, 4):
        shared.call(rows)
    mem = shared.f.memory()
    entries = list(shared.f.graphs.values())
    assert len({id(e.pool) for e in entries}) == 1
    # the pool's first key copies nothing out (no earlier scratch in the pool); the others do
    assert entries[0].outputs_pool is None
    assert len({id(e.outputs_pool) for e in entries[1:]}) == 1 and entries[1].outputs_pool
    assert len({id(e.order) for e in entries}) == 1 and entries[0].order.shared
    assert mem["total"] == SIZE and mem["shared"] == SIZE and mem["pools"] == 2
    assert sorted(mem["keys"].values()) == [0, 0, 0, SIZE]  # what each capture added
    private = Rig(monkeypatch, torch, pool="private")
    for rows in (1, 2, 3, 4):
        private.call(rows)
    assert private.f.memory()["total"] == 4 * SIZE
    assert all(e.outputs_pool is None for e in private.f.graphs.values())
    table = KeyTable("shared", True, None, "eager")
    for _ in range(2):
        pool, outputs_pool = table.pools_for_capture()
        assert pool is not None and outputs_pool is None  # outputs copied anyway: none needed
    table = KeyTable("shared", False, None, "eager")
    first, second, third = (table.pools_for_capture() for _ in range(3))
    assert first[1] is None and second[1] is not None and third[1] is second[1]
    assert first[0] is second[0] is third[0]
    table.clear()  # a new pool: its first capture copies nothing again
    again = table.pools_for_capture()
    assert again[1] is None and again[0] is not first[0]


def test_clear_during_a_background_capture_throws_it_away(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, capture="background")
    rig.gate = threading.Event()
    rig.call(8)
    assert rig.f.pending and rig.entered.wait(10)  # the capture thread is inside it
    rig.f.clear()
    assert not rig.f.pending
    rig.gate.set()
    assert rig.f.wait_captures(10)
    assert rig.captured == [8] and not rig.f.graphs  # captured, then thrown away
    assert rig.call(8)[0] == "eager" and rig.f.wait_captures(10)  # captured afresh
    assert len(rig.f.graphs) == 1 and rig.captured == [8, 8]


def test_run_eagerly_wins_over_a_background_capture_in_flight(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, capture="background")
    rig.gate = threading.Event()
    rig.call(8)
    assert rig.entered.wait(10)
    (key,) = rig.f.pending
    rig.f.run_eagerly(key, "this key stays eager")
    assert not rig.f.pending and rig.f.eager_keys == {key: "this key stays eager"}
    rig.gate.set()
    assert rig.f.wait_captures(10)
    assert rig.captured == [8] and not rig.f.graphs  # captured, then thrown away
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert rig.call(8)[0] == "eager" and rig.call(8)[0] == "eager"
    assert [str(m.message) for m in w if "stays eager" in str(m.message)], [str(m.message) for m in w]
    assert rig.f.wait_captures(10) and rig.captured == [8] and not rig.f.pending
    with pytest.raises(ArgumentError, match="run_eagerly: why must be a str"):
        rig.f.run_eagerly(key, None)


def _warnings_of_a_save(monkeypatch, f, path) -> list:
    """The warnings ``f.save(path)`` gives before its first CUDA work (the save itself needs
    a GPU: it is stopped where it would begin)."""
    from pycudagraph.frameworks import graphed_save

    class Stop(Exception):
        pass

    def saver(*args):
        raise Stop
    monkeypatch.setattr(graphed_save, "_Saver", saver)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(Stop):
            f.save(path)
    return [str(m.message) for m in w]


def test_save_names_the_keys_a_background_capture_still_holds(monkeypatch, torch, tmp_path):
    rig = Rig(monkeypatch, torch, capture="background")
    rig.gate = threading.Event()
    rig.call(8)
    assert rig.entered.wait(10)
    with pytest.raises(ArgumentError, match=r"no captured key yet.*; 1 key\(s\) are being "
                       r"captured in the background now: call f.wait_captures\(\) before"):
        rig.f.save(tmp_path / "g")
    rig.gate.set()
    assert rig.f.wait_captures(10) and len(rig.f.graphs) == 1
    rig.gate, rig.entered = threading.Event(), threading.Event()
    rig.call(16)
    assert rig.entered.wait(10) and len(rig.f.pending) == 1
    said = _warnings_of_a_save(monkeypatch, rig.f, tmp_path / "g")
    assert said == [f"save({tmp_path / 'g'}): 1 key(s) are being captured in the background "
                    "now: call f.wait_captures() before f.save() to save them too; they are "
                    "not in this save"], said
    assert not (tmp_path / "g").exists()
    rig.gate.set()
    assert rig.f.wait_captures(10)


def test_save_names_the_keys_that_run_eagerly(monkeypatch, torch, tmp_path):
    rig = Rig(monkeypatch, torch)
    rig.call(8)
    (key,) = rig.f.graphs
    rig.f.run_eagerly(key, "the budget left it out")
    with pytest.raises(ArgumentError, match=r"no captured key yet.*; 1 key\(s\) run eagerly, "
                       r"with no graph to save \(the first because: the budget left it out\)"):
        rig.f.save(tmp_path / "g")
    rig.call(16)
    assert len(rig.f.graphs) == 1 and rig.f.eager_keys == {key: "the budget left it out"}
    said = _warnings_of_a_save(monkeypatch, rig.f, tmp_path / "g")
    assert said == [f"save({tmp_path / 'g'}): 1 key(s) run eagerly, with no graph to save (the "
                    "first because: the budget left it out); they are not in this save (a load "
                    "captures them at their first call)"], said
    assert not (tmp_path / "g").exists()


def test_shared_launches_from_another_stream_wait_for_the_last(monkeypatch, torch):
    rig = Rig(monkeypatch, torch)
    local = threading.local()
    torch.cuda.current_stream = lambda dev=None: type(
        "S", (), {"cuda_stream": getattr(local, "stream", 0x100)})()
    rig.call(1)
    rig.call(2)
    local.stream = 0x200
    rig.call(1, at=5)
    rig.call(2, at=5)
    local.stream = 2  # cudaStreamPerThread: a record after each launch
    rig.call(1, at=6)
    local.stream = 0x300
    rig.call(2, at=7)
    got = rig.log
    assert got == [("launch", 1, 0x100), ("launch", 2, 0x100),
                   ("record", 0x100), ("wait", 0x200), ("launch", 1, 0x200),
                   ("launch", 2, 0x200),
                   ("record", 0x200), ("wait", 2), ("launch", 1, 2), ("record", 2),
                   ("wait", 0x300), ("launch", 2, 0x300)], got


def test_private_handoff_never_waits():
    order = Handoff()
    for h in (1, 5, 2, 9):
        order.follow(h)
        order.after(h)
    assert order.tail is None and order.event is None
