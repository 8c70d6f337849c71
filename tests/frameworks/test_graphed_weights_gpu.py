"""Weights that move under ``pcg.graphed`` on a GPU (frameworks/weight_watch.py), each in a
child process, PyTorch's own modules and allocator, no ``gc.collect()``:

- an in-place edit (``mul_``, ``load_state_dict``) replays the same graph and shows;
- ``p.data = ...`` on every weight, ``module.weight = nn.Parameter(...)``,
  ``load_state_dict(..., assign=True)`` and ``module.half()`` each drop the graphs with one
  warning naming what moved; the next call captures again and equals eager, though the
  allocator handed the old weights' memory to other tensors in between;
- the old weights' memory stays allocated while a graph may read it and is given back
  to PyTorch when the graphs are dropped (``watch_weights=False``: not kept);
- a callable loaded by ``pcg.load_graphed`` is watched the same way;
- a background capture during which the weights moved (``.data`` set while it sleeps
  inside the capture) is thrown away; the key is captured again with the new weights;
- four threads calling while the weights move: one warning, every later result right.
"""

import pytest

from tests.support.watchdog import run_ok

PRELUDE = """
import sys, os, tempfile, threading, warnings
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
torch.manual_seed(0)

def same(got, want, tol=1e-4):
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)

def model():
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 64)).cuda()

def eager(m, x):
    with torch.no_grad():
        return m(x)

def junk():  # take back whatever memory the allocator has free, and scribble on it
    return [torch.full((256, 256), 7.0, device="cuda") for _ in range(64)]

def calls(f, x, want_warnings):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        y = f(x).clone()
    msgs = [str(w.message) for w in got if "captured with" in str(w.message)]
    assert len(msgs) == len(want_warnings), msgs
    for m, want in zip(msgs, want_warnings):
        assert want in m and "captured again on its next call" in m, m
    return y
"""

MOVES = PRELUDE + """
x = torch.randn(8, 256, device="cuda")
cases = {
    "data": (lambda m: [setattr(p, "data", p.data * 2) for p in m.parameters()],
             "param:0.weight moved from 0x"),
    "parameter": (lambda m: setattr(m[2], "weight", torch.nn.Parameter(m[2].weight * 2)),
                  "param:2.weight was replaced by another tensor"),
    "assign": (lambda m: m.load_state_dict({k: v * 2 for k, v in m.state_dict().items()},
                                           assign=True), "was replaced by another tensor"),
    "half": (lambda m: m.half(), "param:0.weight moved from 0x"),
}
for name, (change, said) in cases.items():
    m = model()
    f = pcg.graphed(m)
    assert f.weight_watch is not None and f.weight_watch.module is m
    calls(f, x, [])
    same(calls(f, x, []), eager(m, x))
    assert f.stats.captures == 1 and f.stats.replays == 2 and f.weight_watch.armed
    with torch.no_grad():
        m[0].weight.mul_(0.5)  # in place: the same graph replays it
    same(calls(f, x, []), eager(m, x))
    assert f.stats.captures == 1
    with torch.no_grad():
        change(m)
    held = junk()
    xi = x.half() if name == "half" else x
    y = calls(f, xi, [said])
    same(y, eager(m, xi), tol=1e-2 if name == "half" else 1e-4)
    assert f.stats.captures == 2, (name, f.stats)
    same(calls(f, xi, []), eager(m, xi), tol=1e-2 if name == "half" else 1e-4)
    print(name, "ok", f.stats.captures, "captures")
print("OK")
"""

KEPT = PRELUDE + """
from torch.multiprocessing.reductions import StorageWeakRef
big = torch.nn.Linear(4096, 4096, bias=False).cuda()  # 64 MiB of weight
f = pcg.graphed(big)
x = torch.randn(4, 4096, device="cuda")
f(x); f(x)
torch.cuda.synchronize()
MiB = 1 << 20
base = torch.cuda.memory_allocated()
old = StorageWeakRef(big.weight.untyped_storage())
with torch.no_grad():
    big.weight.data = big.weight.data.clone()  # the old 64 MiB has no owner but the watch
kept = torch.cuda.memory_allocated() - base
assert kept >= 63 * MiB and not old.expired(), f"the old weight was given back: {kept / MiB:.1f} MiB"
held = junk()
y = calls(f, x, ["param:weight moved from 0x"])
same(y, eager(big, x))
assert old.expired(), "the old weight outlived the graphs that read it"
print(f"old weight kept ({kept / MiB:.0f} MiB more allocated) until the graphs were dropped")

# watch_weights=False: nothing kept, nothing said (the caller's choice)
f.clear()  # (f's graphs keep the weight they read now)
g = pcg.graphed(big, watch_weights=False)
g(x)
assert g.weight_watch is None
old = StorageWeakRef(big.weight.untyped_storage())
with torch.no_grad():
    big.weight.data = big.weight.data.clone()
assert old.expired()  # (a replay now would read memory PyTorch may hand out again)
print("OK")
"""

LOADED = PRELUDE + """
m = model()
f = pcg.graphed(m)
xs = [torch.randn(n, 256, device="cuda") for n in (4, 8)]
for x in xs:
    f(x)
folder = os.path.join(tempfile.mkdtemp(), "mlp.graphs")
f.save(folder)
g = pcg.load_graphed(folder, m)
assert g.weight_watch is not None and g.weight_watch.armed  # the loaded keys read the weights
for x in xs:
    same(calls(g, x, []), eager(m, x))
assert g.stats.captures == 0, g.stats
with torch.no_grad():
    m[0].weight.data = m[0].weight.data * 3
held = junk()
same(calls(g, xs[0], ["param:0.weight moved from 0x"]), eager(m, xs[0]))
same(calls(g, xs[1], []), eager(m, xs[1]))
assert g.stats.captures == 2, g.stats
h = pcg.load_graphed(folder, lambda x: m(x), module=m)  # module= names what is watched
assert h.weight_watch.module is m and h.weight_watch.armed
assert pcg.load_graphed(folder, m, watch_weights=False).weight_watch is None
print("OK")
"""

THREADS = PRELUDE + """
m = model()
f = pcg.graphed(m, copy_outputs=True)
xs = [torch.randn(8, 256, device="cuda") for _ in range(4)]
for x in xs:
    f(x)
torch.cuda.synchronize()
start, moved = threading.Barrier(5), threading.Event()
errors = []

def body(i):
    try:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            start.wait()
            for n in range(200):
                f(xs[i])
                if n == 100:
                    moved.wait(10)
        s.synchronize()
    except Exception as exc:
        errors.append(repr(exc))

with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    threads = [threading.Thread(target=body, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    start.wait()
    with torch.no_grad():
        for p in m.parameters():
            p.data = p.data * 2
    moved.set()
    for t in threads:
        t.join(60)
assert not errors, errors
said = [str(w.message) for w in got if "moved from" in str(w.message)]
assert len(said) == 1, said
torch.cuda.synchronize()
for x in xs:
    same(f(x), eager(m, x))
print("OK", f.stats)
"""

BACKGROUND = PRELUDE + """
import time
class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(256, 256)
    def forward(self, x):
        if torch.cuda.is_current_stream_capturing():
            time.sleep(1.0)  # only inside the capture: the weights move meanwhile
        return torch.relu(self.fc(x))
m = Slow().cuda()
f = pcg.graphed(m, capture="background")
x = torch.randn(8, 256, device="cuda")
same(f(x), eager(m, x))  # eager; the capture is queued
time.sleep(0.5)
with torch.no_grad():
    m.fc.weight.data = m.fc.weight.data * 2
assert f.wait_captures(30)
assert not f.graphs and not f.pending, (f.graphs, f.pending)  # thrown away
held = junk()
same(f(x), eager(m, x))  # eager again, queued with the new weights
assert f.wait_captures(30) and len(f.graphs) == 1
same(f(x), eager(m, x))
assert f.stats.replays == 1, f.stats
print("OK")
"""


@pytest.mark.gpu
def test_moved_weights_drop_the_graphs_and_capture_again():
    print(run_ok(MOVES))


@pytest.mark.gpu
def test_old_weights_stay_allocated_while_a_graph_reads_them():
    print(run_ok(KEPT))


@pytest.mark.gpu
def test_a_loaded_callable_watches_its_weights():
    print(run_ok(LOADED))


@pytest.mark.gpu
def test_a_background_capture_whose_weights_moved_is_thrown_away():
    print(run_ok(BACKGROUND))


@pytest.mark.gpu
def test_threads_calling_while_the_weights_move():
    print(run_ok(THREADS))
