"""Weights that move under a graphed callable (frameworks/weight_watch.py, graphed.py) on
the CPU: fake PyTorch with a fake ``nn.Module`` and its global registration hooks.

The watch alone: nothing recorded means nothing moved; a weight at another address (a
``.data`` set), replaced by another tensor or removed is named; one added since is
recorded, not a move; a replacement is looked for only after a registration; storages are
kept from the first record until ``forget``; a check while another thread records and
forgets reads one whole record.

In a graphed callable: the first graph records the module's weights; an in-place change
replays; a moved weight drops every graph with one warning naming it, and the next call
captures again (the old storages let go); a function that reaches no module has no watch.
"""

import types
import warnings
from types import SimpleNamespace

import pytest

from pycudagraph.frameworks import weight_watch
from pycudagraph.frameworks.weight_watch import WeightWatch, watch_for
from tests.frameworks.test_graphed_modes import Rig
from tests.support.fake_frameworks import FakeTensor, install_torch

W = 0x7D00_0000_0000


class FakeModule:
    """Parameters and buffers by name; called, returns ("eager", x.data_ptr())."""

    def __init__(self, params: dict, buffers: dict = ()):
        self.params, self.buffers = dict(params), dict(buffers)

    def named_parameters(self):
        return iter(self.params.items())

    def named_buffers(self):
        return iter(self.buffers.items())

    def __call__(self, x):
        return ("eager", x.data_ptr())


@pytest.fixture
def torch(monkeypatch):
    torch = install_torch(monkeypatch)
    hooks = []
    module = SimpleNamespace(**{name: hooks.append for name in (
        "register_module_parameter_registration_hook",
        "register_module_buffer_registration_hook",
        "register_module_module_registration_hook")})
    torch.nn = SimpleNamespace(Module=FakeModule, modules=SimpleNamespace(module=module))
    torch.hooks = hooks
    monkeypatch.setattr(weight_watch, "_HOOKED", [False])
    return torch


def registered(torch):
    """What PyTorch does on ``module.weight = ...``: its global hooks run."""
    for hook in torch.hooks:
        assert hook(None, "weight", None) is None  # the value is kept as it is


def weights():
    return FakeModule({"fc.weight": FakeTensor(W, (64, 64)), "fc.bias": FakeTensor(W + 0x4000, (64,))},
                      {"mask": FakeTensor(W + 0x8000, (8,)), "cpu_table": FakeTensor(0x1000, (8,), device=-1)})


def recorded():
    """(a module, its watch with a record made)."""
    m = weights()
    w = WeightWatch(m)
    w.record()
    return m, w


def test_nothing_recorded_nothing_moved(torch):
    w = WeightWatch(weights())
    assert not w.armed and w.moved() is None and w.kept == []
    assert len(torch.hooks) == 3  # PyTorch's three global registration hooks, once a process
    WeightWatch(weights())
    assert len(torch.hooks) == 3


def test_a_weight_at_another_address_is_named(torch):
    m, w = recorded()
    assert w.names == ("param:fc.weight", "param:fc.bias", "buffer:mask")  # CUDA tensors only
    assert w.moved() is None
    m.params["fc.weight"]._ptr = W + 0x10000  # .data set: the same object, another address
    why = w.moved()
    assert why.startswith(f"param:fc.weight moved from 0x{W:x} to 0x{W + 0x10000:x}")
    m.buffers["mask"]._ptr = W + 0x20000
    assert "(and 1 more)" in w.moved()


def test_a_replaced_weight_is_looked_for_after_a_registration_only(torch):
    m, w = recorded()
    m.params["fc.bias"] = FakeTensor(W + 0x4000, (64,))  # same address, another tensor
    assert w.moved() is None  # no registration yet: not walked (each call stays cheap)
    registered(torch)
    assert w.moved() == "param:fc.bias was replaced by another tensor"


def test_a_removed_weight_moves_an_added_one_is_recorded(torch):
    m, w = recorded()
    m.buffers["cache"] = FakeTensor(W + 0x40000, (8,))
    registered(torch)
    assert w.moved() is None
    assert "buffer:cache" in w.names and len(w.kept) == 2  # the old record's storages too
    del m.buffers["mask"]
    registered(torch)
    assert w.moved() == "buffer:mask was removed from the module"


def test_storages_are_kept_until_forget(torch):
    m, w = recorded()
    old = m.params["fc.weight"].untyped_storage()
    assert any(s is old for s in w.kept[0])
    w.forget()
    assert not w.armed and w.kept == [] and w.moved() is None


def test_watch_for_finds_the_module_or_none(torch):
    m = weights()
    assert watch_for(m).module is m
    assert watch_for(lambda x: m(x)).module is m  # the one module it closes over
    assert watch_for(lambda x: x) is None
    other = weights()
    assert watch_for(lambda x: m(other(x))) is None  # several modules: none to watch
    assert watch_for(lambda x: m(other(x)), module=other).module is other


def test_a_pytorch_without_registration_hooks_is_watched_by_address(torch, monkeypatch):
    monkeypatch.setattr(torch.nn, "modules", SimpleNamespace(module=SimpleNamespace()))
    m, w = recorded()
    m.params["fc.weight"]._ptr = W + 0x10000
    assert w.moved().startswith("param:fc.weight moved")


def test_a_callable_whose_attributes_raise_is_not_watched(torch):
    class Proxy:
        def __call__(self, x):
            return x

        def __getattr__(self, name):
            raise RuntimeError(f"remote object: no local {name}")
    assert watch_for(Proxy()) is None


def test_watch_for_without_pytorch_modules(monkeypatch):
    install_torch(monkeypatch)  # a torch with no nn: nothing to watch, nothing raised
    assert watch_for(lambda x: x) is None


def test_a_moved_weight_drops_the_graphs_once_and_captures_again(monkeypatch, torch):
    m = weights()
    rig = Rig(monkeypatch, torch, fn=m)
    watch = rig.f.weight_watch
    assert watch.module is m and not watch.armed
    rig.call(4)
    rig.call(8)
    assert rig.captured == [4, 8] and watch.armed
    rig.call(4)
    assert rig.replays() == [4, 8, 4]
    m.params["fc.weight"]._ptr = W + 0x10000  # module.to() / .half() / p.data = ...
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        rig.call(4)
        rig.call(8)
    assert [str(w.message) for w in got] == [
        f"graphed({type(m).__name__}): param:fc.weight moved from 0x{W:x} to 0x{W + 0x10000:x} "
        "(.data set, .to(), .half()); its 2 graph(s) read the weights they were captured "
        "with, so they are dropped and each key is captured again on its next call"]
    assert got[0].category is RuntimeWarning
    assert rig.captured == [4, 8, 4, 8]  # each key captured again, with the new address
    assert watch.ptrs[0] == W + 0x10000 and len(watch.kept) == 1  # the old storages let go
    assert rig.f.stats.replays == 5


def test_an_in_place_change_replays_and_clear_lets_the_weights_go(monkeypatch, torch):
    m = weights()
    rig = Rig(monkeypatch, torch, fn=m)
    rig.call(4)
    registered(torch)  # some other module built somewhere: walked once, nothing moved
    rig.call(4)
    assert rig.captured == [4] and rig.replays() == [4, 4]
    rig.f.clear()
    assert not rig.f.weight_watch.armed and rig.f.weight_watch.kept == []


def test_a_function_with_no_module_has_no_watch(monkeypatch, torch):
    rig = Rig(monkeypatch, torch)
    assert rig.f.weight_watch is None
    rig.call(4)
    rig.call(4)
    assert rig.replays() == [4, 4]


def test_a_check_while_another_thread_records_and_forgets_never_raises(torch):
    import threading
    m, w = recorded()
    stop, errors, said = threading.Event(), [], set()

    def check():
        while not stop.is_set():
            try:
                said.add(w.moved())
            except Exception as exc:  # a torn record would raise here
                errors.append(repr(exc))
                return
    threads = [threading.Thread(target=check) for _ in range(2)]
    for t in threads:
        t.start()
    for n in range(3000):
        w.forget() if n % 2 else w.record()
    stop.set()
    for t in threads:
        t.join(10)
    assert not errors, errors[:3]
    assert said == {None}  # nothing moved: every read saw one whole record


def test_a_background_capture_during_which_a_weight_moved_is_thrown_away(monkeypatch, torch):
    import threading
    m = weights()
    rig = Rig(monkeypatch, torch, fn=m, capture="background")
    rig.gate = threading.Event()
    assert rig.call(4)[0] == "eager"  # queued, with the weights as they are now
    assert rig.entered.wait(10)
    m.params["fc.weight"]._ptr = W + 0x10000  # moved while the capture runs
    rig.gate.set()
    assert rig.f.wait_captures(10)
    assert rig.captured == [4] and not rig.f.graphs and not rig.f.pending  # thrown away
    assert rig.call(4)[0] == "eager"  # queued again, with the new weights
    assert rig.f.wait_captures(10)
    assert rig.captured == [4, 4] and list(rig.f.graphs)
    rig.call(4)
    assert rig.replays() == [4]
    assert rig.f.weight_watch.ptrs[0] == W + 0x10000


def test_weights_that_move_during_every_background_capture_run_the_key_eagerly(
        monkeypatch, torch):
    import threading
    m = weights()
    rig = Rig(monkeypatch, torch, fn=m, capture="background")
    for n in range(2):  # a function that replaces its own buffer each time it runs
        rig.gate, rig.entered = threading.Event(), threading.Event()
        assert rig.call(8)[0] == "eager"
        assert rig.entered.wait(10)
        m.buffers["mask"] = FakeTensor(W + 0x90000 + n * 0x1000, (8,))
        registered(torch)
        rig.gate.set()
        assert rig.f.wait_captures(10)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert rig.call(8)[0] == "eager"
    assert not rig.f.graphs and rig.captured == [8, 8]
    assert len(got) == 1 and "buffer:mask was replaced by another tensor while each of 2 " \
        "captures of this key ran" in str(got[0].message)
    assert "runs eagerly from now on" in str(got[0].message)
    rig.f.clear()
    assert rig.f.eager_keys == {}  # a clear forgets the count with the keys
