"""``benchmarks.timing.split_around``, which the instantiate / update profiles use to split a
public call around the hot call it makes (CPU: a stand-in module and a stand-in clock that
the calls advance, so the parts are exact)."""

import types

import pytest

from benchmarks import timing
from benchmarks.timing import split_around


@pytest.fixture
def clock(monkeypatch):
    now = [0]
    monkeypatch.setattr(timing.time, "perf_counter_ns", lambda: now[0])
    return now


def test_it_splits_around_the_wrapped_call_and_puts_it_back(clock):
    def hot(x):
        clock[0] += 20_000  # 20 us in the hot call
        return x + 1

    module = types.SimpleNamespace(hot=hot)

    def public():
        clock[0] += 7_000  # before it
        out = module.hot(1)
        clock[0] += 3_000  # after it
        return out

    res = {"before": [1.0], "call": [], "after": []}
    assert split_around(res, module, "hot", public) == 2
    assert module.hot is hot
    assert res == {"before": [1.0, 7.0], "call": [20.0], "after": [3.0]}


def test_a_raising_run_puts_the_call_back(clock):
    module = types.SimpleNamespace(hot=lambda: None)
    original = module.hot

    def boom():
        module.hot()
        raise KeyError("no")

    res = {"a": [], "b": [], "c": []}
    with pytest.raises(KeyError):
        split_around(res, module, "hot", boom)
    assert module.hot is original and res == {"a": [], "b": [], "c": []}
