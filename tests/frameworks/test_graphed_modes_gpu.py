"""``pcg.graphed`` modes on a GPU (frameworks/graphed.py, graphed_new_keys.py,
graphed_background.py, graphed_keys.py, graphed_capture.py), each in a child process:

- ``capture="background"``: a new key's first calls run eagerly while the capture thread
  captures it (made slow on purpose: 1.5 s asleep inside the capture); every call made
  meanwhile returns in a small part of that time, for that key (eager) and for a key
  already captured (replay); later calls replay; every result equals eager.
- ``fallback="eager"``: a key whose capture fails (``.item()`` in a branch taken for one
  shape only) runs eagerly with one warning naming the function and the call's shapes,
  inline and in the background; the other keys replay.
- ``memory_budget=``: a budget of 3.5 keys' pools admits exactly 3 of 5 keys (the others
  run eagerly); ``over_budget="evict"`` keeps 3 by dropping the least recently used.
- ``pool="shared"``: six keys hold less memory than with one pool per key; every key's
  static outputs stay right while the others replay; keys replayed alternately from two
  streams without a sync between them equal eager.
"""

import pytest

from tests.support.watchdog import run_ok

PRELUDE = """
import sys, time, threading, warnings
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
torch.manual_seed(0)

def same(got, want):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
"""

BACKGROUND = PRELUDE + """
D = 512
w1 = torch.randn(D, 4 * D, device="cuda") / 32
w2 = torch.randn(4 * D, D, device="cuda") / 64
NAP = 1.5  # seconds the capture sleeps: the capture takes at least this long

def mlp(x):
    if torch.cuda.is_current_stream_capturing():
        time.sleep(NAP)  # only inside the capture (the capture thread's side stream)
    return torch.tanh(torch.relu(x @ w1) @ w2) + x

def eager(x):
    with torch.no_grad():
        return mlp(x)

eager(torch.randn(8, D, device="cuda"))  # cuBLAS set up before anything is timed
torch.cuda.synchronize()
f = pcg.graphed(mlp, capture="background")
x = torch.randn(64, D, device="cuda")
t0 = time.perf_counter()
y = f(x)
first = time.perf_counter() - t0
same(y, eager(x))
assert f.stats.eager_calls == 1 and f.stats.replays == 0, f.stats
assert f.pending, "the first call did not queue a capture"
slowest, during = first, 0
while f.pending:  # every call now runs eagerly: none waits for the capture
    x = torch.randn(64, D, device="cuda")
    t = time.perf_counter()
    y = f(x)
    slowest = max(slowest, time.perf_counter() - t)
    same(y, eager(x))
    during += 1
    time.sleep(0.02)
took = time.perf_counter() - t0
print("first call", first, "slowest call while capturing", slowest, "calls", during,
      "capture took", took, f.stats)
assert took >= NAP and during >= 5, (took, during)
assert slowest < NAP / 4, ("a call waited for the capture", slowest)
assert f.wait_captures(60) and len(f.graphs) == 1 and not f.eager_keys
# a call made just as the capture ended may have replayed already
assert f.stats.captures == 1 and f.stats.eager_calls + f.stats.replays == during + 1, f.stats
assert f.stats.eager_calls >= 5, f.stats
replays = f.stats.replays
for n in range(20):  # now replays, rebinding new inputs
    x = torch.randn(64, D, device="cuda")
    same(f(x), eager(x))
assert f.stats.replays == replays + 20, f.stats

# a second key while the first replays: its calls run eagerly, the first key's replay
x2 = torch.randn(32, D, device="cuda")
same(f(x2), eager(x2))
assert f.pending and len(f.graphs) == 1
replays, slowest, during = f.stats.replays, 0.0, 0
while f.pending:
    for x in (torch.randn(64, D, device="cuda"), torch.randn(32, D, device="cuda")):
        t = time.perf_counter()
        y = f(x)
        slowest = max(slowest, time.perf_counter() - t)
        same(y, eager(x))
        during += 1
    time.sleep(0.02)
print("second key: slowest call while capturing", slowest, "calls", during, f.stats)
assert slowest < NAP / 4, ("a call waited for the capture", slowest)
assert f.stats.replays > replays, "the captured key did not replay during the capture"
assert f.wait_captures(60) and len(f.graphs) == 2
for rows in (64, 32, 64, 32):
    x = torch.randn(rows, D, device="cuda")
    same(f(x), eager(x))

# clear() while a capture runs: the capture is thrown away, calls keep working
f.clear()
x3 = torch.randn(16, D, device="cuda")
same(f(x3), eager(x3))
assert f.pending
f.clear()
assert f.wait_captures(60)
assert not f.graphs and not f.pending, f.graphs
same(f(x3), eager(x3))  # a fresh capture of the key starts
assert f.wait_captures(60) and len(f.graphs) == 1
same(f(x3), eager(x3))
print("OK")
"""

FALLBACK = PRELUDE + """
def branchy(x):
    y = x * 2
    if x.shape[0] == 48 and bool((y.abs().sum() >= 0).item()):  # a host sync: 48 rows only
        y = y - 3
    return y + 1

def eager(x):
    with torch.no_grad():
        return branchy(x)

def run(f, settle):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(4):
            for rows in (32, 48, 64):
                x = torch.randn(rows, 256, device="cuda")
                same(f(x), eager(x))
                settle()
    said = [str(m.message) for m in w if "runs eagerly" in str(m.message)]
    print(f.stats, said)
    assert len(said) == 1, said
    assert "branchy" in said[0] and "(48, 256)" in said[0], said[0]
    assert "capture" in said[0], said[0]
    assert len(f.graphs) == 2 and len(f.eager_keys) == 1, (f.graphs, f.eager_keys)
    assert f.stats.failed_captures == 1, f.stats
    assert f.stats.eager_calls >= 4, f.stats

run(pcg.graphed(branchy, fallback="eager"), lambda: None)
bg = pcg.graphed(branchy, fallback="eager", capture="background")
run(bg, lambda: bg.wait_captures(60))
try:  # fallback="raise" keeps raising the capture's error
    pcg.graphed(branchy)(torch.randn(48, 256, device="cuda"))
except pcg.PyCudaGraphError as exc:
    print("raised:", type(exc).__name__, str(exc)[:200])
else:
    raise SystemExit("fallback='raise' did not raise")
print("OK")
"""

BUDGET = PRELUDE + """
D = 256
w1 = torch.randn(D, 4 * D, device="cuda") / 16
w2 = torch.randn(4 * D, D, device="cuda") / 32

def fn(x, k):
    return torch.relu(x @ w1) @ w2 * k  # k is part of the key: one graph per value

def eager(x, k):
    with torch.no_grad():
        return fn(x, k)

x = torch.randn(64, D, device="cuda")
probe = pcg.graphed(fn, pool="private")
probe(x, 0)
one = probe.memory()["total"]
assert one > 0, probe.memory()
budget = one * 7 // 2
for over in ("eager", "evict"):
    f = pcg.graphed(fn, pool="private", memory_budget=budget, over_budget=over)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for rnd in range(2):
            for k in range(5):
                x = torch.randn(64, D, device="cuda")
                same(f(x, k), eager(x, k))
    mem = f.memory()
    print(over, "one key", one, "budget", budget, mem["total"], f.stats)
    assert len(f.graphs) == 3, f.graphs
    assert mem["total"] <= budget and mem["pools"] == 3, mem
    if over == "eager":
        assert sorted(k[0][1][1] for k in f.graphs) == [0, 1, 2], list(f.graphs)
        assert len(f.eager_keys) == 2 and f.stats.eager_calls == 4, f.stats
        assert f.stats.replays == 6 and f.stats.captures == 5, f.stats
        said = [m for m in w if "memory_budget" in str(m.message)]
        assert len(said) == 2, [str(m.message) for m in w]
    else:
        assert not f.eager_keys and f.stats.evictions >= 2, f.stats
print("OK")
"""

SHARED = PRELUDE + """
D, H = 1024, 4096
w1 = torch.randn(D, H, device="cuda") / 32
w2 = torch.randn(H, D, device="cuda") / 64

def mlp(x):
    return torch.relu(x @ w1) @ w2 + 1

def eager(x):
    with torch.no_grad():
        return mlp(x)

rows = (1024, 896, 768, 640, 512, 384)  # the largest first, as servers capture
xs = [torch.randn(r, D, device="cuda") for r in rows]
want = [eager(x) for x in xs]
shared = pcg.graphed(mlp)
private = pcg.graphed(mlp, pool="private")
outs = []
for x, w in zip(xs, want):
    outs.append(shared(x))
    same(outs[-1], w)
    same(private(x), w)
for x, w in zip(reversed(xs), reversed(want)):  # replays in another order
    same(shared(x), w)
for o, w in zip(outs, want):  # each key's static outputs, after every other key replayed
    same(o, w)
ms, mp = shared.memory(), private.memory()
print("shared", ms["total"], ms["pools"], "private", mp["total"], mp["pools"])
assert ms["pools"] == 2 and mp["pools"] == len(rows), (ms, mp)
assert ms["total"] < mp["total"], (ms, mp)
assert set(ms["keys"]) == set(shared.graphs) and ms["shared"] == ms["total"], ms
entries = list(shared.graphs.values())  # the pool's first key copies nothing out, the rest do
assert entries[0].outputs_pool is None and all(e.outputs_pool for e in entries[1:])

# keys replayed alternately on two streams, no sync between: ordered by the handoff
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
s1.wait_stream(torch.cuda.current_stream())
s2.wait_stream(torch.cuda.current_stream())
got = []
for n in range(24):
    s = s1 if n % 2 else s2
    i = (n * 5) % len(rows)
    with torch.cuda.stream(s):
        got.append((i, shared(xs[i]).clone()))
torch.cuda.synchronize()
for i, y in got:
    same(y, want[i])
print("OK")
"""


@pytest.mark.gpu
def test_background_capture_first_calls_eager_then_replays_no_call_waits():
    print(run_ok(BACKGROUND, timeout=600))


@pytest.mark.gpu
def test_failed_capture_runs_eagerly_with_one_warning():
    print(run_ok(FALLBACK))


@pytest.mark.gpu
def test_memory_budget_admits_three_of_five_keys():
    print(run_ok(BUDGET))


@pytest.mark.gpu
def test_shared_pool_holds_less_than_private_pools_and_keeps_outputs():
    print(run_ok(SHARED))
