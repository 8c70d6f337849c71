"""The fast path of ``pcg.graphed`` on a GPU (frameworks/graphed_fast.py), each check in a
child process. The slow path's key builder is counted (``graphed.flatten``) to show which
calls took the fast path.

- PyTorch, a tiny function and an MLP: calls alternating between inputs, fresh inputs,
  interior slices equal eager, with only the first call building the key; an unaligned
  slice gets its own graph; the launch is ordered on the caller's current stream (a
  non-blocking stream kept busy, the input written there just before the call); a blocked
  exec refuses the call; a repeat's trace holds the launch alone.
- Threads: 8 threads x 200 calls, each on its own stream, equal eager.
- Aliasing: ``y = f(x); f(y)`` (an input that is the graph's own output is copied), the same
  array twice and overlapping inputs, each at new addresses, equal eager.
- CuPy: alternating inputs, on the default and on a non-blocking stream, equal the function.
"""

import pytest

from tests.support.watchdog import run_ok

COUNT = """
from pycudagraph.frameworks import graphed as graphed_mod
slow = [0]
_flatten = graphed_mod.flatten
def _counting(args, kwargs):
    slow[0] += 1
    return _flatten(args, kwargs)
graphed_mod.flatten = _counting
"""

TORCH_HEAD = """
import sys, threading
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
torch.manual_seed(0)
""" + COUNT

ALTERNATING = TORCH_HEAD + """
def tiny(x, scale):
    return x * scale + 1

f = pcg.graphed(tiny)
xs = [torch.randn(1024, device="cuda") for _ in range(3)]
for i in range(60):
    x = xs[i % 3]
    torch.testing.assert_close(f(x, 2.0), x * 2.0 + 1)
print("alternating", f.stats, "slow", slow[0])
assert f.stats.captures == 1 and f.stats.replays == 60 and slow[0] == 1, (f.stats, slow)
assert f.stats.rebound_inputs == 59 and f.stats.set_params >= 59, f.stats
for i in range(50):  # fresh inputs (the allocator reuses addresses now and then)
    x = torch.randn(1024, device="cuda")
    torch.testing.assert_close(f(x, 2.0), x * 2.0 + 1)
big = torch.randn(8192, device="cuda")
for k in range(8):  # interior slices, 1 KiB apart: the same alignment class
    x = big[256 * k: 256 * k + 1024]
    torch.testing.assert_close(f(x, 2.0), x * 2.0 + 1)
assert slow[0] == 1 and f.stats.captures == 1, (f.stats, slow)
x = big[1:1025]  # 4-byte aligned: its own key
torch.testing.assert_close(f(x, 2.0), x * 2.0 + 1)
torch.testing.assert_close(f(xs[0], 3.0), xs[0] * 3.0 + 1)  # another value: its own key
assert f.stats.captures == 3 and slow[0] == 3, (f.stats, slow)
torch.testing.assert_close(f(xs[1], 2.0), xs[1] * 2.0 + 1)  # back to the first key: fast
assert slow[0] == 3, slow

# ordered on the caller's current stream: a busy non-blocking stream, the input written
# there just before the call; a launch on any other stream would read it too early
s = torch.cuda.Stream()
for value in (3.0, 5.0):
    with torch.cuda.stream(s):
        x = xs[2] if value == 5.0 else torch.empty(1024, device="cuda")
        torch.cuda._sleep(50_000_000)
        x.fill_(value)
        y = f(x, 2.0)
        got = y.clone()
    s.synchronize()
    assert bool((got == 2 * value + 1).all()), (value, got[:4])

entry = next(iter(f.graphs.values()))  # the first key's
f(xs[0], 2.0)
with pcg.trace() as t:
    f(xs[0], 2.0)
apis = [r.api for r in t.records]
print(apis)
assert "cuGraphLaunch" in apis, apis
assert not [a for a in apis if "Capture" in a or "Instantiate" in a or "SetParams" in a], apis
if hasattr(entry.exec, "block_launches"):
    entry.exec.block_launches("asleep for the test")
    try:
        f(xs[1], 2.0)
    except pcg.PyCudaGraphError as exc:
        assert "asleep for the test" in str(exc), exc
    else:
        raise SystemExit("a blocked exec launched")
    entry.exec.block_launches(None)
    torch.testing.assert_close(f(xs[1], 2.0), xs[1] * 2.0 + 1)

model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                            torch.nn.Linear(512, 256)).cuda().eval()
g = pcg.graphed(model)
before = slow[0]
inputs = [torch.randn(32, 256, device="cuda") for _ in range(3)]
for i in range(60):
    x = inputs[i % 3]
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(g(x), want, rtol=1e-4, atol=1e-4)
assert g.stats.captures == 1 and slow[0] == before + 1, (g.stats, slow)
print("OK")
"""

THREADS = TORCH_HEAD + """
D = 256
w1, w2 = torch.randn(D, 4 * D, device="cuda") / 16, torch.randn(4 * D, D, device="cuda") / 32

def mlp(x):
    return torch.tanh(torch.relu(x @ w1) @ w2) + x.sum(dim=1, keepdim=True)

f = pcg.graphed(mlp)
f(torch.randn(32, D, device="cuda"))
use = threading.Lock()  # the documented rule: read the static output before the next call
bad, errors = [], []

def body(t):
    try:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for n in range(200):
                x = torch.randn(32, D, device="cuda") * (1 + t)
                with use:
                    y = f(x).cpu()
                with torch.no_grad():
                    want = mlp(x).cpu()
                if not torch.allclose(y, want, rtol=1e-4, atol=1e-4):
                    bad.append((t, n))
    except BaseException as exc:
        errors.append(repr(exc))

ts = [threading.Thread(target=body, args=(t,)) for t in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("threads", f.stats, "slow", slow[0], "wrong", len(bad))
assert not errors, errors[:3]
assert not bad, bad[:10]
assert f.stats.captures == 1 and f.stats.replays == 1601, f.stats
assert slow[0] < 10, slow  # the fast path served (nearly) every call
print("OK")
"""

ALIASING = TORCH_HEAD + """
def g(a, b):
    return a * 2 + b

f = pcg.graphed(g)
x, w = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
want = g(x, w)
y = f(x, w)
torch.testing.assert_close(y, want)
f(x, w)  # learned
for n in range(5):  # y = f(y): the input is the graph's own output, copied first
    want = g(want, w)
    y = f(y, w)
    torch.testing.assert_close(y, want)
assert f.stats.copied_inputs == 5 and f.stats.captures == 1, f.stats

h = pcg.graphed(g)
big = [torch.randn(8192, device="cuda") for _ in range(3)]
for i in range(30):
    b = big[i % 3]
    a = b[:4096]
    torch.testing.assert_close(h(a, a), 3 * a)  # the same array twice
    torch.testing.assert_close(h(a, b[1024:5120]), 2 * a + b[1024:5120])  # overlapping
    c = torch.randn(4096, device="cuda")
    torch.testing.assert_close(h(a, c), 2 * a + c)  # apart
print("aliasing", h.stats, "slow", slow[0])
assert h.stats.captures == 3, h.stats
assert h.stats.replays == 90 and h.stats.rebound_inputs > 0, h.stats
print("OK")
"""

CUPY = """
import sys
try:
    import cupy as cp
except ImportError:
    print("SKIP no cupy"); sys.exit(0)
import pycudagraph as pcg
""" + COUNT + """
def g(x, y):
    return cp.tanh(x) * y + 1

f = pcg.graphed(g)
xs = [cp.random.rand(16, 256, dtype=cp.float32) for _ in range(3)]
ys = [cp.random.rand(16, 256, dtype=cp.float32) for _ in range(3)]
for i in range(60):
    x, y = xs[i % 3], ys[(i + 1) % 3]
    cp.testing.assert_allclose(f(x, y), g(x, y), rtol=1e-5, atol=1e-5)
assert f.stats.captures == 1 and f.stats.replays == 60 and slow[0] == 1, (f.stats, slow)
s = cp.cuda.Stream(non_blocking=True)
with s:
    for i in range(30):
        x, y = cp.random.rand(16, 256, dtype=cp.float32), ys[i % 3]
        cp.testing.assert_allclose(f(x, y), g(x, y), rtol=1e-5, atol=1e-5)
s.synchronize()
print("cupy", f.stats, "slow", slow[0])
assert f.stats.captures == 1 and slow[0] == 1, (f.stats, slow)
print("OK")
"""


@pytest.mark.gpu
def test_fast_path_alternating_addresses_equal_eager():
    print(run_ok(ALTERNATING))


@pytest.mark.gpu
def test_fast_path_threads_with_their_own_streams():
    print(run_ok(THREADS, timeout=600))


@pytest.mark.gpu
def test_fast_path_inputs_aliasing_outputs_and_each_other():
    print(run_ok(ALIASING))


@pytest.mark.gpu
def test_fast_path_cupy():
    print(run_ok(CUPY))
