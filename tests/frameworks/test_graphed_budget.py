"""The memory budget's arithmetic on the CPU (frameworks/graphed_keys.py,
graphed_load_keys.py): which keys ``over_budget="evict"`` drops when keys share pools (only
those whose going frees what is needed; none when nothing would bring the pools within the
budget), what a load checks before it makes a key's pools, and what it does with a key the
budget leaves out."""

import contextlib
import types

import pytest

from pycudagraph.frameworks import graphed_keys
from pycudagraph.frameworks.graphed_keys import GraphedStats, KeyTable
from pycudagraph.frameworks.graphed_load_keys import KeyLoader


class Pool:
    torch_id = None
    cupy_pool = None

    def __init__(self, size):
        self.size = size


def entry(key, last_used, *pools):
    return types.SimpleNamespace(key=key, last_used=last_used, device=0, order=None,
                                 pools=lambda: pools)


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(graphed_keys, "pools_bytes", lambda pools: {id(p): p.size for p in pools})

    def make(budget, *entries):
        t = KeyTable("private", False, budget, "evict")
        for e in entries:
            t.graphs[e.key] = e
        return t
    return make


def test_evicts_the_least_recently_used_until_the_pools_fit(table):
    t = table(4, entry("a", 1, Pool(2)), entry("b", 2, Pool(2)))
    stats = GraphedStats()
    assert t.admit(entry("n", 3, Pool(2)), stats) == ""
    assert sorted(t.graphs) == ["b", "n"] and stats.evictions == 1


def test_a_key_whose_going_frees_nothing_needed_stays(table):
    # evicting a (1) then b (3) fits; with b gone, a fits again: only b goes
    t = table(4, entry("a", 1, Pool(1)), entry("b", 2, Pool(3)))
    stats = GraphedStats()
    assert t.admit(entry("n", 3, Pool(2)), stats) == ""
    assert sorted(t.graphs) == ["a", "n"] and stats.evictions == 1


def test_keys_sharing_a_pool_go_together_or_not_at_all(table):
    shared = Pool(2)
    t = table(4, entry("a", 1, shared), entry("b", 2, shared), entry("c", 3, Pool(1)))
    stats = GraphedStats()
    assert t.admit(entry("n", 4, Pool(2)), stats) == ""  # 2 + 1 + 2 > 4: a and b free 2
    assert sorted(t.graphs) == ["c", "n"] and stats.evictions == 2


def test_nothing_is_evicted_when_no_eviction_brings_the_pools_within(table):
    shared = Pool(5)  # the new key shares it with a: evicting a frees nothing
    t = table(4, entry("a", 1, shared), entry("b", 2, Pool(1)))
    stats = GraphedStats()
    why = t.admit(entry("n", 3, shared), stats)
    assert why == "its graph alone takes 5 bytes of pools, beyond memory_budget=4"
    assert sorted(t.graphs) == ["a", "b"] and stats.evictions == 0
    assert t.eager["n"] == [why, False]


def test_eager_budget_says_the_total_it_would_reach(table):
    t = table(4, entry("a", 1, Pool(3)))
    t.over_budget = "eager"
    why = t.admit(entry("n", 2, Pool(2)), GraphedStats())
    assert why == "its graph would take the pools to 5 bytes, beyond memory_budget=4"
    assert sorted(t.graphs) == ["a"]


class Callable:
    def __init__(self, budget, over="eager", held=0):
        self.memory_budget, self.over_budget, self.held = budget, over, held

    def memory(self):
        return {"total": self.held}


IX = {"pools": [{"segments": [2 << 20, 2 << 20]}, {"segments": [1 << 20]}]}


def loader(f):
    return KeyLoader(f, IX, None, {}, {})


def test_a_load_checks_the_pools_a_key_would_make_before_making_them():
    rec = {"pool": 0, "outputs_pool": 1}
    assert loader(Callable(None)).over_budget(rec) == ""  # no budget
    assert loader(Callable(5 << 20)).over_budget(rec) == ""  # 5 MiB: fits
    why = loader(Callable(4 << 20)).over_budget(rec)
    assert why == f"its graph alone takes {5 << 20} bytes of pools, beyond memory_budget={4 << 20}"
    why = loader(Callable(6 << 20, held=2 << 20)).over_budget(rec)
    assert why == (f"its graph would take the pools to {7 << 20} bytes, beyond "
                   f"memory_budget={6 << 20}")
    # evicting may make room: the budget's evictions decide once the key is made
    assert loader(Callable(6 << 20, "evict", held=2 << 20)).over_budget(rec) == ""


def test_pools_an_earlier_key_made_cost_a_key_nothing_more():
    ld = loader(Callable(1 << 20, held=5 << 20))
    ld.pools = {0: None, 1: None}  # both made for an earlier key of the load
    assert ld.over_budget({"pool": 0, "outputs_pool": 1}) == ""
    assert ld.over_budget({"pool": None, "outputs_pool": None}) == ""
    ld.pools = {0: None}
    assert "beyond memory_budget" in ld.over_budget({"pool": 0, "outputs_pool": 1})


class Finder:
    def missing(self, need, variants=None):
        return []


class Adopter:
    """A graphed callable's adopt/run_eagerly, recorded; ``refuse``: adopt's answer."""

    def __init__(self, refuse=""):
        self.refuse, self.eager, self.adopted = refuse, {}, []

    def adopt(self, entry):
        self.adopted.append(entry)
        return self.refuse

    def run_eagerly(self, key, why):
        self.eager[key] = why


class Loader:
    def __init__(self, outcome):
        self.outcome, self.folder = outcome, "/srv/gpt2.graphs"

    def entry(self, rec, finder, entry_class):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


REC = {"device": 0, "file": "key-003.pcgraph", "kernels": []}


def test_a_key_the_budget_leaves_out_runs_eagerly_naming_the_load_and_the_key(monkeypatch):
    from pycudagraph.frameworks import graphed_load
    from pycudagraph.frameworks.graphed_load_keys import OverBudget
    monkeypatch.setattr(graphed_load, "device_scope", lambda dev: contextlib.nullcontext())
    monkeypatch.setattr(graphed_load, "describe_key", lambda rec: "key-003.pcgraph ((4, 8) int64)")
    f = Adopter()
    why = "its graph would take the pools to 9 bytes, beyond memory_budget=8"
    got = graphed_load._load_key(f, Loader(OverBudget("k", why)), Finder(), REC, 3)
    assert got == (None, why, True) and not f.adopted  # nothing made, nothing adopted
    said = f"load_graphed(/srv/gpt2.graphs): key-003.pcgraph ((4, 8) int64): {why}"
    assert f.eager == {"k": said}
    # made, then refused once its real size was counted
    entry = types.SimpleNamespace(key="k2")
    f = Adopter(refuse=why)
    assert graphed_load._load_key(f, Loader(entry), Finder(), REC, 3) == (None, why, True)
    assert f.adopted == [entry] and f.eager["k2"].endswith(why)
    # admitted: loaded
    f = Adopter()
    assert graphed_load._load_key(f, Loader(entry), Finder(), REC, 3) == (entry, None, False)
    assert not f.eager
