"""The per-call fast path of ``pcg.graphed`` (pycudagraph/frameworks/graphed_fast.py).

CPU, with fake PyTorch and CuPy and a fake capture (an entry per key whose exec logs its
launches and whose plan logs its rebinds): a repeated call structure is served without
building the key; a new address rebinds through the plan; every difference the key would
see (shape, strides, dtype, device, type, a value, keyword arguments, alignment, aliasing)
goes to the slow path and reaches the right graph; moved inputs that overlap the outputs,
``copy_outputs``, ``check``, a refused key, a handoff event and mixed frameworks go to the
slow path having changed nothing; each thread launches on its own current stream (PyTorch's
raw current stream when there is one); ``clear`` forgets, letting the inputs go.
"""

import gc
import threading
import weakref

import pytest

import pycudagraph as pcg
from pycudagraph.frameworks import graphed as graphed_mod
from pycudagraph.frameworks import graphed_fast
from pycudagraph.frameworks.arrays import flatten
from pycudagraph.frameworks.graphed import GraphedEntry
from pycudagraph.frameworks.graphed_fast import KEEP, SLOW
from tests.support.fake_frameworks import (FakeCupyArray, FakeTensor, install_cupy,
                                           install_torch)

P = 0x7F00_0000_0000
OUT = 0x7E00_0000_0000


class FakePlan:
    slots = [1]

    def __init__(self, ptrs, log):
        self.bound = list(ptrs)
        self.log = log

    def apply(self, ptrs, changed):
        self.log.append(("apply", list(ptrs), list(changed)))
        self.bound = list(ptrs)
        return len(changed)


class FakeExec:
    def __init__(self, plan, log, lock, key, watch):
        self.plan, self.log, self.lock, self.key, self.watch = plan, log, lock, key, watch

    def launch(self, stream):
        assert self.lock._is_owned(), "launched outside the callable's lock"
        for fn in self.watch:  # in the calling thread
            fn(stream)
        self.log.append(("launch", stream, list(self.plan.bound), self.key))


class Rig:
    """A graphed callable whose captures make fake entries; counts keys built by the slow
    path (``slow``) and by the fast path's learning (``learned``)."""

    def __init__(self, monkeypatch, torch, **options):
        self.torch, self.log, self.slow, self.learned = torch, [], 0, 0
        self.watch = []  # functions of the launch stream, called by each launch
        self.f = f = pcg.graphed(lambda *a, **k: None, **options)
        self.entries = []

        def counting(counter):
            def flat(args, kwargs):
                setattr(self, counter, getattr(self, counter) + 1)
                return flatten(args, kwargs)
            return flat

        monkeypatch.setattr(graphed_mod, "flatten", counting("slow"))
        monkeypatch.setattr(graphed_fast, "flatten", counting("learned"))

        def capture(key, args, kwargs, infos):
            frameworks = frozenset(i.framework for i in infos)
            plan = FakePlan([i.ptr for i in infos], self.log)
            n = len(self.entries)
            out = FakeTensor(OUT + 0x100000 * n, (64,))
            exe = FakeExec(plan, self.log, f._lock, n, self.watch)
            entry = GraphedEntry(key, None, exe, None, out, plan, frameworks,
                                 infos[0].device if infos else 0)
            f._graphs[key] = entry
            f.stats.captures += 1
            self.entries.append(entry)
            return entry, None

        f._capture = capture

    def launches(self):
        return [e for e in self.log if e[0] == "launch"]


@pytest.fixture
def torch(monkeypatch):
    return install_torch(monkeypatch)


@pytest.fixture
def rig(monkeypatch, torch):
    return Rig(monkeypatch, torch)


def test_a_repeat_is_served_without_building_the_key(rig):
    f, x = rig.f, FakeTensor(P, (64,))
    assert f(x, 2) is rig.entries[0].outputs  # the capture: the slow path
    assert (rig.slow, rig.learned) == (1, 1)  # the fast path looked, found no graph yet
    for _ in range(10):
        assert f(x, 2) is rig.entries[0].outputs
    assert (rig.slow, rig.learned) == (1, 2)  # learned once, then served from memory
    assert f._fast.known == 1
    assert f.stats.calls == 11 and f.stats.replays == 11 and f.stats.captures == 1
    assert rig.entries[0].calls == 11 and f.stats.set_params == 0
    assert rig.launches()[-1] == ("launch", 0x5151, [P], 0)
    assert rig.entries[0].bound[0] == (x, 2)


def test_a_new_address_rebinds_through_the_plan(rig):
    f = rig.f
    xs = [FakeTensor(P + 0x10000 * i, (64,)) for i in range(2)]
    f(xs[0])
    f(xs[0])
    for n in range(10):
        f(xs[n % 2])
    assert rig.slow == 1
    applies = [e for e in rig.log if e[0] == "apply"]
    assert applies[0] == ("apply", [P + 0x10000], [0]) and len(applies) == 9
    assert [b for _, _, b, _ in rig.launches()][-2:] == [[P], [P + 0x10000]]
    assert f.stats.set_params == 9 and f.stats.rebound_inputs == 9
    assert rig.entries[0].bound[0][0] is xs[1]


@pytest.mark.parametrize("other", [
    lambda: (FakeTensor(P, (65,)), 2),  # shape
    lambda: (FakeTensor(P, (64,), dtype="float16"), 2),  # dtype
    lambda: (FakeTensor(P, (64,), stride=(2,)), 2),  # strides: every other element
    lambda: (FakeTensor(P, (64,), device=1), 2),  # device
    lambda: (FakeTensor(P, (64,)), 3),  # a value
    lambda: (FakeTensor(P, (64,)), 2.0),  # a value of another type
    lambda: (FakeTensor(P + 4, (64,)), 2),  # alignment: 4, not 256
    lambda: (FakeTensor(P, (64,)),),  # fewer arguments
])
def test_each_difference_reaches_its_own_graph(rig, other):
    f = rig.f
    base = (FakeTensor(P, (64,)), 2)
    f(*base)
    f(*base)  # learned
    slow = rig.slow
    args = other()
    assert f(*args) is rig.entries[1].outputs  # a new key: captured by the slow path
    assert rig.slow == slow + 1 and rig.entries[1].key != rig.entries[0].key
    assert f(*base) is rig.entries[0].outputs and f(*args) is rig.entries[1].outputs
    assert rig.slow == slow + 1  # both learned now
    assert f._fast.known == 2


def test_a_subclass_with_the_same_key_is_its_own_structure(rig):
    f = rig.f
    sub = type("Sub", (FakeTensor,), {})
    f(FakeTensor(P, (64,)))
    f(FakeTensor(P, (64,)))
    f(sub(P + 0x1000, (64,)))  # the key has no Python type: the same graph, rebound
    f(sub(P + 0x1000, (64,)))
    assert len(rig.entries) == 1 and rig.slow == 1 and f._fast.known == 2
    assert rig.launches()[-1][2] == [P + 0x1000]


def test_keyword_arguments_take_the_slow_path(rig):
    f, x = rig.f, FakeTensor(P, (64,))
    f(x, scale=2)
    f(x, scale=2)
    assert rig.slow == 2 and rig.learned == 0 and f._fast.known == 0


def test_aliasing_is_checked_when_addresses_move(rig):
    f = rig.f
    a, b = FakeTensor(P, (128,)), FakeTensor(P + 0x1000, (128,))  # 512 bytes each
    f(a, b)
    f(a, b)
    slow = rig.slow
    f(FakeTensor(P + 0x8000, (128,)), FakeTensor(P + 0x9000, (128,)))  # apart: rebound fast
    assert rig.slow == slow and len(rig.entries) == 1 and f.stats.rebound_inputs == 2
    f(a, FakeTensor(P + 256, (128,)))  # b now overlaps a (same alignment): another key
    assert rig.slow == slow + 1 and len(rig.entries) == 2
    f(a, a)  # the same array twice: another key again
    assert rig.slow == slow + 2 and len(rig.entries) == 3
    c = FakeTensor(P + 0x20000, (128,))
    f(c, c)  # the aliasing of the third key, moved: learned and rebound, no new graph
    f(c, c)
    assert len(rig.entries) == 3 and rig.slow == slow + 2
    assert rig.launches()[-1][2:] == ([P + 0x20000, P + 0x20000], 2)
    f(a, b)  # the first structure is still served
    assert rig.slow == slow + 2 and rig.launches()[-1][2:] == ([P, P + 0x1000], 0)


def test_an_input_over_the_outputs_takes_the_slow_path(rig, monkeypatch):
    f = rig.f
    f(FakeTensor(P, (64,)))
    f(FakeTensor(P, (64,)))
    copies = []

    def twin(t):
        copies.append(t)
        return FakeTensor(P + 0x50000, t.shape)

    monkeypatch.setattr(graphed_mod, "twin", twin)
    y = rig.entries[0].outputs
    f(y)  # y = f(x); f(y): the input is the graph's own output, copied first
    f(y)
    assert copies == [y, y] and f.stats.copied_inputs == 2 and f._fast.known == 1
    assert rig.launches()[-1][2] == [P + 0x50000] and len(rig.entries) == 1


@pytest.mark.parametrize("change", ["copy_outputs", "check", "refused", "handoff"])
def test_what_the_fast_path_leaves_alone(rig, change):
    f, x = rig.f, FakeTensor(P, (64,))
    f(x)
    f(x)
    entry = rig.entries[0]
    if change == "copy_outputs":
        f.copy_outputs = True
    elif change == "check":
        f.check = "raise"
    elif change == "refused":
        entry.refused = "no"
    elif hasattr(entry, "order"):  # the handoff event lives in the entry's order
        entry.order.event = object()
    else:
        entry.handoff = object()
    calls, log = f.stats.calls, list(rig.log)
    assert f._fast.call(f, (FakeTensor(P + 0x1000, (64,)),), {}) is SLOW
    assert f.stats.calls == calls and rig.log == log and entry.plan.bound == [P]


def test_mixed_frameworks_are_not_learned(rig, monkeypatch):
    install_cupy(monkeypatch)
    f = rig.f
    args = (FakeTensor(P, (64,)), FakeCupyArray(P + 0x10000, (64,), (4,)))
    f(*args)
    f(*args)
    assert rig.slow == 2 and rig.learned == 0 and f._fast.known == 0


def test_cupy_arrays_are_served(monkeypatch):
    cupy = install_cupy(monkeypatch)
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    cupy.cuda.get_current_stream = lambda: type("S", (), {"ptr": 0xC0C0})()
    rig = Rig(monkeypatch, None)
    f = rig.f
    a, b = FakeCupyArray(P, (8, 8), (32, 4)), FakeCupyArray(P + 0x1000, (8, 8), (32, 4))
    f(a)
    for n in range(6):
        f((a, b)[n % 2])
    assert rig.slow == 1 and f.stats.rebound_inputs == 5
    assert rig.launches()[-1] == ("launch", 0xC0C0, [P + 0x1000], 0)
    f(FakeCupyArray(P, (8, 8), (4, 32)))  # transposed strides: another key
    assert rig.slow == 2 and len(rig.entries) == 2


def test_raw_current_stream_and_each_threads_own(rig, torch):
    local = threading.local()
    asked = []

    def raw(device):
        asked.append(device)
        return getattr(local, "stream", 0x5151)

    torch._C._cuda_getCurrentRawStream = raw
    f = rig.f
    f(FakeTensor(P, (64,)))
    launched = []

    def watch(stream):  # runs in the launching thread
        launched.append(stream)
        assert stream == getattr(local, "stream", 0x5151), "launched on another thread's stream"

    rig.watch.append(watch)
    errors = []

    def body(i):
        try:
            local.stream = 0x1000 + i
            for n in range(20):
                f(FakeTensor(P + 0x1000 * (1 + i * 64 + n), (64,)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    assert rig.slow == 1 and f.stats.replays == 81 and set(asked) == {0}
    assert len(launched) == 80 and set(launched) == {0x1000, 0x1001, 0x1002, 0x1003}


def test_a_fixed_stream_is_used(monkeypatch, torch):
    rig = Rig(monkeypatch, torch, stream=0x4242)
    x = FakeTensor(P, (64,))
    rig.f(x)
    rig.f(x)
    assert rig.launches()[-1][1] is rig.f.stream and rig.learned == 2 and rig.slow == 1
    assert rig.f.stream.ptr == 0x4242


def test_clear_forgets_and_lets_the_inputs_go(rig):
    f = rig.f
    gc.disable()
    try:
        x = FakeTensor(P, (64,))
        ref = weakref.ref(x)
        f(x)
        f(x)
        assert f._fast.known == 1
        f.clear()
        assert f._fast.known == 0
        del x
        rig.entries.clear()
        assert ref() is None
    finally:
        gc.enable()
    f(FakeTensor(P, (64,)))  # captured again, not served from a forgotten entry
    assert f.stats.captures == 2


def test_memory_is_bounded_and_most_recent_first(rig):
    f = rig.f
    shapes = [(n,) for n in range(1, KEEP + 3)]
    for s in shapes:
        f(FakeTensor(P, s))
        f(FakeTensor(P, s))
    assert f._fast.known == KEEP
    slow = rig.slow
    f(FakeTensor(P, shapes[-1]))  # the latest: served
    assert rig.slow == slow and rig.learned == len(shapes) * 2
    f(FakeTensor(P, shapes[0]))  # forgotten: learned again (its graph is still there)
    assert rig.slow == slow and len(rig.entries) == len(shapes)


def test_a_failed_rebind_changes_nothing_more(rig):
    f = rig.f
    x = FakeTensor(P, (64,))
    f(x)
    f(x)
    entry = rig.entries[0]

    def fail(ptrs, changed):
        raise RuntimeError("set params failed")

    entry.plan.apply = fail
    with pytest.raises(RuntimeError, match="set params"):
        f(FakeTensor(P + 0x1000, (64,)))
    assert entry.bound[0][0] is x and f.stats.replays == 2


def test_a_shared_pool_orders_each_change_of_stream(rig, torch, monkeypatch):
    """Keys of a shared pool: a launch from another stream than the last one follows it
    (``Handoff.follow``: event on the old stream, wait on the new), a launch on
    ``cudaStreamPerThread`` always (``Handoff.after`` records there), a repeat on the same
    stream makes no ordering call."""
    from pycudagraph.frameworks.graphed_keys import Handoff
    current = [0x5151]
    torch._C._cuda_getCurrentRawStream = lambda device: current[0]
    f, x = rig.f, FakeTensor(P, (64,))
    f(x)
    rig.entries[0].order = Handoff(shared=True)
    seen = []
    follow, after = Handoff.follow, Handoff.after
    monkeypatch.setattr(Handoff, "follow", lambda self, h: (seen.append(("follow", h)),
                                                            follow(self, h)))
    monkeypatch.setattr(Handoff, "after", lambda self, h: (seen.append(("after", h)),
                                                           after(self, h)))
    waits = []
    monkeypatch.setattr(graphed_mod.Stream, "wrap",
                        staticmethod(lambda h: type("S", (), {"wait": lambda s, e: waits.append(h)})()))

    class Tail:
        def record(self, h):
            seen.append(("record", h))
    rig.entries[0].order.tail = Tail()
    for stream in (0x5151, 0x5151, 0x6161, 0x6161, 2, 2, 0x5151):
        current[0] = stream
        f(x)
    assert seen == [("follow", 0x5151), ("after", 0x5151),          # the first: no last yet
                    ("follow", 0x6161), ("record", 0x5151), ("after", 0x6161),
                    ("follow", 2), ("record", 0x6161), ("after", 2), ("record", 2),
                    ("follow", 2), ("after", 2), ("record", 2),      # per thread: always
                    ("follow", 0x5151), ("after", 0x5151)]
    assert waits == [0x6161, 2, 2, 0x5151] and f.stats.replays == 8
