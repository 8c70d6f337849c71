"""CPU tests of the lifetime ledger: finding holders, deferred frees, and when they run."""

import gc

import pytest

from pycudagraph import _lifetime
from pycudagraph._lifetime import Ledger, defer_free, deferred_frees, holders_of
from pycudagraph.compile.args import ArgPack, Layout
from pycudagraph.compile.signature import parse_params


class Owner:
    def __repr__(self):
        return "<Owner>"


class FakeBuffer:
    """Follows the protocol DeviceBuffer uses: _holders() and _release()."""

    def __init__(self):
        self.released = 0

    def _holders(self, first=False):
        return holders_of(self, first)

    def _release(self):
        self.released += 1


class FakeDevice:
    """Has a device address without CUDA (__cuda_array_interface__)."""

    __cuda_array_interface__ = {"data": (0x1000, False), "shape": (4,), "typestr": "|u1",
                                "version": 3}


@pytest.fixture(autouse=True)
def _clean():
    yield
    _lifetime._pending_frees.clear()


def test_holders_named_through_nested_tuples():
    owner = Owner()
    led = Ledger(owner=owner)
    buf = FakeBuffer()
    led.hold(1, ("x", (buf,)))
    assert holders_of(buf) == ["<Owner>"]
    assert buf in led
    led.drop(1)
    assert holders_of(buf) == []


def test_holders_look_inside_argument_packs():
    layout = Layout("k", parse_params("float* p, int n"))
    dev = FakeDevice()
    pack = ArgPack(layout, None, (dev, 4), 1, 1)
    owner = Owner()
    led = Ledger(owner=owner)
    led.hold("k", pack)
    assert holders_of(dev) == ["<Owner>"]
    pack.set(0, 0x2000)  # the slot no longer refers to dev
    assert holders_of(dev) == []


def test_deferred_free_runs_when_the_ledger_drops():
    led = Ledger(owner=Owner())
    buf = FakeBuffer()
    led.hold(1, buf)
    defer_free(buf)
    led.hold(2, "other")  # a new key releases nothing: no retry, still pending
    assert buf.released == 0 and deferred_frees() == [buf]
    led.drop(1)
    assert buf.released == 1 and deferred_frees() == []


def test_deferred_free_waits_for_retired_until_cleared():
    led = Ledger(owner=Owner())
    buf = FakeBuffer()
    led.retired.append(buf)  # what GraphExec._retire does with what an update replaced
    defer_free(buf)
    _lifetime.retry_frees()
    assert buf.released == 0
    led.clear_retired()
    assert buf.released == 1


def test_deferred_free_runs_when_the_ledger_dies_or_closes():
    buf = FakeBuffer()
    led = Ledger(owner=Owner())
    led.hold(1, buf)
    closing = Ledger(owner=Owner())
    closing.hold(1, buf)
    defer_free(buf)
    del led
    gc.collect()
    assert buf.released == 0  # the second ledger still uses it
    closing.close()  # destroyed owner: holds, but no longer counts as a user
    assert buf.released == 1
    assert closing.held  # what it holds stays alive (a host node may still run)


def test_replacing_a_key_retries():
    led = Ledger(owner=Owner())
    buf = FakeBuffer()
    led.hold(1, buf)
    defer_free(buf)
    led.hold(1, "new value")
    assert buf.released == 1


def test_owner_gone_is_named_without_raising():
    owner = Owner()
    led = Ledger(owner=owner)
    del owner
    gc.collect()
    assert "being destroyed" in led.owner_name()


def test_exit_hooks_run_in_order_and_swallow_errors(monkeypatch):
    seen = []
    monkeypatch.setattr(_lifetime, "_exit_hooks", [])
    _lifetime.on_exit(lambda: seen.append("b"), 20)
    _lifetime.on_exit(lambda: 1 / 0, 15)
    _lifetime.on_exit(lambda: seen.append("a"), 10)
    _lifetime._at_exit()
    assert seen == ["a", "b"]
