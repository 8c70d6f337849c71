"""``pcg.load_graphed(..., memory_budget=)`` on the GPU, each process a child: a budget below
the saved pool loads no key and allocates nothing for them (each runs eagerly, one warning
at its first call, results equal eager); a budget one byte short of the whole load loads
the keys that need no other pool, and saving that callable again saves those keys (naming
the ones that run eagerly); the budget the whole load takes loads every key."""

import pytest

from tests.frameworks.test_graphed_save_gpu import TINY_MODEL, TINY_SAVE, _save_then_load

TINY_LOAD_BUDGET = """
import warnings
ix = json.loads(Path(FOLDER, "index.json").read_text())
sizes = [sum(p["segments"]) for p in ix["pools"]]
first = ix["keys"][0]["pool"]
print("saved pools", sizes, "first key's pool", first)

with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    f = pcg.load_graphed(FOLDER, model, memory_budget=sizes[first] - 1)
    r = f.load_report
    assert r.loaded == 0 and len(r.eager) == len(BUCKETS) and not r.fallback, r
    assert all("memory_budget=" in why for why in r.eager.values()), r.eager
    assert f.memory()["total"] == 0, f.memory()  # nothing allocated for the keys
    assert len(f.eager_keys) == len(BUCKETS), f.eager_keys
    for _ in range(2):
        for b in BUCKETS:
            close(f(IDS[b]), eager(IDS[b]))
    assert f.stats.captures == 0 and f.stats.replays == 0, f.stats
said = [str(m.message) for m in w if "memory_budget=" in str(m.message)]
assert len(said) == len(BUCKETS), said  # one per key, at its first call
assert all(s.startswith("load_graphed(") and "pcgraph" in s
           and s.endswith("runs eagerly from now on") for s in said), said[:2]
print(said[0])

full = pcg.load_graphed(FOLDER, model)
need = full.memory()["total"]
print("the whole load holds", need, "bytes of pools; saved", sum(sizes))
assert full.load_report.loaded == len(BUCKETS) and need >= sum(sizes), (need, sizes)
del full

with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    one = pcg.load_graphed(FOLDER, model, memory_budget=need - 1)  # all but the last pool
    r = one.load_report
    alone = [i for i, k in enumerate(ix["keys"])
             if k["pool"] == first and k["outputs_pool"] is None]
    print("loaded", r.loaded, "eager", len(r.eager), "keys of the first pool alone", alone)
    assert alone and r.loaded == len(alone) and len(r.eager) == len(BUCKETS) - len(alone), r
    assert 0 < one.memory()["total"] < need, one.memory()
    for b in BUCKETS:
        close(one(IDS[b]), eager(IDS[b]))
    assert one.stats.replays == len(alone) and one.stats.captures == 0, one.stats
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    again = one.save(FOLDER + ".part")  # a loaded callable saved: its loaded keys only
said = [str(m.message) for m in w if "run eagerly" in str(m.message)]
assert again.keys == len(alone) and len(again.eager) == len(r.eager), again  # r.eager: by index
assert len(said) == 1 and said[0].startswith("save(%s.part): %d key(s) run eagerly"
                                             % (FOLDER, len(r.eager))), said
part = pcg.load_graphed(FOLDER + ".part", model)
assert part.load_report.loaded == len(alone), part.load_report
for b in BUCKETS:  # the keys left out are captured at their first call
    close(part(IDS[b]), eager(IDS[b]))
assert part.stats.captures == len(BUCKETS) - len(alone), part.stats
del one, part

f = pcg.load_graphed(FOLDER, model, memory_budget=need)
assert f.load_report.loaded == len(BUCKETS) and not f.load_report.eager, f.load_report
for b in BUCKETS:
    close(f(IDS[b]), eager(IDS[b]))
assert f.stats.replays == len(BUCKETS) and not f.eager_keys, f.stats
print("OK")
"""


@pytest.mark.gpu
def test_a_memory_budget_decides_which_saved_keys_load(tmp_path):
    _save_then_load(tmp_path, TINY_MODEL, TINY_SAVE, TINY_LOAD_BUDGET)
