"""Saved graphed callables on the GPU, each process a child: process A warms 20 bucket keys of
a model and saves them (``f.save``); process B loads them (``pcg.load_graphed``) and replays
all 20 with no capture of the model (only the probe captures it counts), every output equal
to eager in B and to A's replay; an edit of one weight in B changes B's output (bound, not
copied); a new layout is captured as usual. Then bad files: a truncated key file, another
GPU architecture, a model that differs, each refused naming what differs.

A GPT-2-sized transformers model (random weights from a config, no download), a small
PyTorch model that needs no transformers, and a CuPy function that closes over its
weights."""


import pytest

from tests.support.watchdog import run_ok

#: Both processes build the same model the same way (same seeds: same weights).
GPT2_MODEL = """
import json, os, shutil, sys
from pathlib import Path
try:
    import torch
    import transformers
except ImportError as exc:
    print("SKIP", exc); sys.exit(0)
import pycudagraph as pcg

FOLDER = sys.argv[1]
BUCKETS = list(range(1, 21))  # batch sizes: 20 keys
T = 4
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=256)
model = transformers.GPT2LMHeadModel(config).cuda().eval()  # GPT-2-sized, random weights


def step(ids):
    return model(ids, use_cache=False).logits


gen = torch.Generator().manual_seed(1)
IDS = {b: torch.randint(0, config.vocab_size, (b, T), generator=gen).cuda() for b in BUCKETS}
torch.cuda.synchronize()
TOL = dict(rtol=1e-3, atol=1e-3)  # eager may take another attention path than the capture


def eager(ids):
    with torch.no_grad():
        return step(ids)
"""

#: Process A: warm every bucket, check against eager, save, keep its outputs for B.
SAVE = """
f = pcg.graphed(step)
outs = {b: f(IDS[b]).clone() for b in BUCKETS}
torch.cuda.synchronize()
assert f.stats.captures == len(BUCKETS), f.stats
for b in BUCKETS:
    torch.testing.assert_close(outs[b], eager(IDS[b]), **TOL)
report = f.save(FOLDER)
assert report.keys == len(BUCKETS) and not report.skipped, report
torch.save({b: o.cpu() for b, o in outs.items()}, FOLDER + ".outputs.pt")
index = json.loads(Path(FOLDER, "index.json").read_text())
print("SAVED", report.keys, "keys,", len(index["bindings"]), "bindings,", len(index["pools"]),
      "pool(s),", len(index["workspaces"]), "workspace(s),",
      len({tuple(k["kernels"]) for k in index["keys"]}), "kernel sets")
print("OK")
"""

#: Process B: load, replay every bucket with no capture of the model, compare, edit a weight.
LOAD = """
with pcg.trace() as t:
    f = pcg.load_graphed(FOLDER, step)
    outs = {b: f(IDS[b]).clone() for b in BUCKETS}
    torch.cuda.synchronize()
r = f.load_report
begins = [c for c in t.records if c.api.startswith("cudaStreamBeginCapture")]
print("REPORT", r)
assert r.loaded == len(BUCKETS) and not r.fallback, r
assert f.stats.captures == 0 and f.stats.replays == len(BUCKETS), f.stats
assert len(begins) == r.probes <= r.kernel_sets, (len(begins), r)
from types import SimpleNamespace
from pycudagraph.frameworks.rebind_plan import RebindPlan
for e in f.graphs.values():  # the plan from the file's relocations = a search of every node
    searched = RebindPlan(e.exec, e.graph, [SimpleNamespace(ptr=p, lo=lo, hi=hi)
                                            for p, lo, hi in e.plan.captured])
    assert e.plan.slots == searched.slots and e.plan.slots[0] >= 1, (e.plan.slots,
                                                                     searched.slots)
saved = torch.load(FOLDER + ".outputs.pt")
for b in BUCKETS:
    torch.testing.assert_close(outs[b], eager(IDS[b]), **TOL)
    torch.testing.assert_close(outs[b].cpu(), saved[b], rtol=1e-4, atol=1e-4)  # A's graphs

# bound, not copied: an edit of one weight shows in the next replay
before = f(IDS[4]).clone()
with torch.no_grad():
    model.transformer.h[0].mlp.c_fc.weight.mul_(1.5)
after = f(IDS[4]).clone()
assert not torch.allclose(before, after, rtol=1e-3, atol=1e-3), "the weight was copied"
torch.testing.assert_close(after, eager(IDS[4]), **TOL)

# a layout the file does not hold is captured as usual
f(IDS[3][:, :2].contiguous())
assert f.stats.captures == 1, f.stats

# bad files, each refused naming what differs
def refused(folder, words, fn=step, **kw):
    try:
        pcg.load_graphed(folder, fn, **kw)
    except pcg.GraphFileError as exc:
        assert all(w in str(exc) for w in words), (words, str(exc))
        print("REFUSED", str(exc)[:160])
        return
    raise SystemExit(f"loaded {folder} although {words}")

bad = FOLDER + ".bad"
shutil.copytree(FOLDER, bad)
key5 = Path(bad, "key-005.pcgraph")
key5.write_bytes(key5.read_bytes()[: key5.stat().st_size // 2])
refused(bad, ["key-005.pcgraph", "truncated"])
shutil.rmtree(bad)
shutil.copytree(FOLDER, bad)
ix = json.loads(Path(bad, "index.json").read_text())
ix["arch"] = "sm_10"
Path(bad, "index.json").write_text(json.dumps(ix))
refused(bad, ["saved on sm_10", "this GPU is sm_"])
small = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2)).cuda()
refused(FOLDER, ["the model differs", "transformer.h.1", "is missing"],
        fn=lambda ids: small(ids, use_cache=False).logits)
print("OK")
"""


def _folder(tmp_path):
    return str(tmp_path / "gpt2.graphs")


def _run(code: str, folder: str, timeout: int) -> str:
    """The check in a child process with ``sys.argv[1]`` the folder; its output."""
    return run_ok(f"import sys\nsys.argv[1:] = [{folder!r}]\n" + code + "\n", timeout=timeout)


def _save_then_load(tmp_path, setup: str, save: str, load: str, timeout: int = 300) -> None:
    """``setup + save`` in one child process, then ``setup + load`` in another, both with
    the folder as ``sys.argv[1]``; their output printed."""
    folder = _folder(tmp_path)
    print(_run(setup + save, folder, timeout))
    print(_run(setup + load, folder, timeout))


@pytest.mark.gpu
def test_gpt2_sized_buckets_saved_in_one_process_replay_in_another(tmp_path):
    _save_then_load(tmp_path, GPT2_MODEL, SAVE, LOAD, 600)


#: A small PyTorch model with attention, no transformers: the same checks, quickly.
TINY_MODEL = """
import json, shutil, sys
from pathlib import Path
try:
    import torch
except ImportError as exc:
    print("SKIP", exc); sys.exit(0)
import torch.nn.functional as F
import pycudagraph as pcg

FOLDER = sys.argv[1]
BUCKETS = list(range(1, 21))


class Tiny(torch.nn.Module):
    def __init__(self, width=64, vocab=500):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=False)
        self.register_buffer("scale", torch.tensor([0.5]))

    def forward(self, ids):
        x = self.emb(ids)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return {"logits": self.head(self.norm(x)) * self.scale, "hidden": (x,)}


torch.manual_seed(0)
model = Tiny().cuda().eval()
gen = torch.Generator().manual_seed(1)
IDS = {b: torch.randint(0, 500, (b, 8), generator=gen).cuda() for b in BUCKETS}
torch.cuda.synchronize()


def eager(ids):
    with torch.no_grad():
        return model(ids)


def close(got, want):
    torch.testing.assert_close(got["logits"], want["logits"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got["hidden"][0], want["hidden"][0], rtol=1e-4, atol=1e-4)
"""

TINY_SAVE = """
f = pcg.graphed(model)
for b in BUCKETS:
    close(f(IDS[b]), eager(IDS[b]))
lines = []
report = f.save(FOLDER, progress=lines.append)
assert report.keys == len(BUCKETS) and not report.skipped, report
assert len(lines) == len(BUCKETS) + 1, lines  # a line per key, then the whole
assert lines[0].startswith("save: key 1/%d saved: key-000.pcgraph (" % len(BUCKETS)), lines[0]
assert lines[-1].startswith("save: %d of %d key(s) saved to " % ((len(BUCKETS),) * 2)), lines[-1]
names = json.loads(Path(FOLDER, "index.json").read_text())["bindings"]
assert "param:qkv.weight" in names and "buffer:scale" in names, sorted(names)
print("OK")
"""

TINY_LOAD = """
lines = []
with pcg.trace() as t:
    f = pcg.load_graphed(FOLDER, model, progress=lines.append)
    for b in BUCKETS:
        close(f(IDS[b]), eager(IDS[b]))
r = f.load_report
print("\\n".join(lines))
assert lines[0].startswith("load_graphed: index, model and %d key file(s) checked (" % len(BUCKETS))
assert lines[1].startswith("load_graphed: %d library kernel(s) found, %d probe capture(s)"
                           % (r.kernels, r.probes)), lines[1]
assert [ln.split(":")[1] for ln in lines[2:-1]] == [
    " key %d/%d loaded" % (i + 1, len(BUCKETS)) for i in range(len(BUCKETS))], lines
assert lines[-1].startswith("load_graphed: %d of %d key(s) loaded (" % ((len(BUCKETS),) * 2))
begins = [c for c in t.records if c.api.startswith("cudaStreamBeginCapture")]
print("REPORT", r)
assert r.loaded == len(BUCKETS) and not r.fallback and f.stats.captures == 0, (r, f.stats)
assert len(begins) == r.probes <= r.kernel_sets, (len(begins), r)
from types import SimpleNamespace
from pycudagraph.frameworks.rebind_plan import RebindPlan
for e in f.graphs.values():  # the plan from the file's relocations = a search of every node
    searched = RebindPlan(e.exec, e.graph, [SimpleNamespace(ptr=p, lo=lo, hi=hi)
                                            for p, lo, hi in e.plan.captured])
    assert e.plan.slots == searched.slots and e.plan.slots[0] >= 1, (e.plan.slots,
                                                                     searched.slots)
with torch.no_grad():
    model.scale.fill_(2.0)  # a buffer, bound by name
close(f(IDS[7]), eager(IDS[7]))
again = f.save(FOLDER + ".again")  # loaded keys save again (their workspace, their pool)
assert again.keys == len(BUCKETS) and not again.skipped, again
f3 = pcg.load_graphed(FOLDER + ".again", model)
close(f3(IDS[5]), eager(IDS[5]))
assert f3.stats.captures == 0 and f3.load_report.loaded == len(BUCKETS), f3.load_report
other = Tiny(width=32).cuda()
try:
    pcg.load_graphed(FOLDER, other)
    raise SystemExit("a model of another width was loaded")
except pcg.GraphFileError as exc:
    assert "param:emb.weight is (500, 32) float32" in str(exc), str(exc)
f2 = pcg.load_graphed(FOLDER, model, check=True)  # compares each key's first call with eager
close(f2(IDS[2]), eager(IDS[2]))
assert f2.stats.checks >= 1, f2.stats
print("OK")
"""


@pytest.mark.gpu
def test_small_pytorch_model_saved_and_loaded_in_another_process(tmp_path):
    _save_then_load(tmp_path, TINY_MODEL, TINY_SAVE, TINY_LOAD)


#: A loaded callable from several threads at once.
TINY_LOADED_EDGES = """
import gc, threading, weakref
want = {b: eager(IDS[b]) for b in BUCKETS}
torch.cuda.synchronize()
gc.collect()
gc.disable()  # nothing below may wait for the cyclic collector
f = pcg.load_graphed(FOLDER, model)
assert f.load_report.loaded == len(BUCKETS), f.load_report
bad, errors = [], []


def body(t):
    try:
        s = torch.cuda.Stream()  # each thread its own stream
        with torch.cuda.stream(s):
            for n in range(60):
                b = BUCKETS[(7 * t + n) % len(BUCKETS)]
                try:
                    close(f(IDS[b]), want[b])
                except AssertionError:
                    bad.append((t, n, b))
    except BaseException as exc:
        errors.append(repr(exc))


threads = [threading.Thread(target=body, args=(t,)) for t in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors[:3]
assert not bad, bad[:10]
assert f.stats.captures == 0 and f.stats.replays >= 4 * 60, f.stats
print("OK")
"""

#: A loaded callable dropped with the collector off: its pool goes back to the driver.
TINY_LOADED_DROP = """
import gc, weakref
gc.collect()
gc.disable()  # nothing below may wait for the cyclic collector
f = pcg.load_graphed(FOLDER, model)
for b in BUCKETS:
    close(f(IDS[b]), eager(IDS[b]))
pools = f.memory()["total"]
torch.cuda.synchronize()
torch.cuda.empty_cache()
before = torch.cuda.memory_reserved()
gone = weakref.ref(f)
del f
torch.cuda.synchronize()
torch.cuda.empty_cache()
after = torch.cuda.memory_reserved()
gc.enable()
print("pools", pools, "reserved before the drop", before, "after", after)
assert gone() is None, "the loaded callable is kept alive by a reference cycle"
assert before - after >= pools > 0, (before, after, pools)
print("OK")
"""


@pytest.mark.gpu
def test_a_loaded_callable_serves_four_threads_at_once(tmp_path):
    _save_then_load(tmp_path, TINY_MODEL, TINY_SAVE, TINY_LOADED_EDGES)


@pytest.mark.gpu
def test_a_dropped_loaded_callable_gives_its_pool_back_without_the_collector(tmp_path):
    _save_then_load(tmp_path, TINY_MODEL, TINY_SAVE, TINY_LOADED_DROP)


#: Large inputs and a small output: what a loaded key holds is its pool, not a scratch input.
BIG_INPUTS = """
import gc, sys
try:
    import torch
except ImportError as exc:
    print("SKIP", exc); sys.exit(0)
import pycudagraph as pcg

FOLDER = sys.argv[1]
WIDTH = 1 << 20
XS = {rows: torch.randn(rows, WIDTH, device="cuda") for rows in (4, 8)}  # 16 and 32 MiB


def colsum(x):
    return x.sum(dim=0)  # 4 MiB out
"""

BIG_SAVE = """
f = pcg.graphed(colsum)
for x in XS.values():
    torch.testing.assert_close(f(x), colsum(x))
report = f.save(FOLDER)
assert report.keys == 2 and not report.skipped, report
print("OK")
"""

BIG_LOAD = """
torch.cuda.synchronize()
gc.collect()
base = torch.cuda.memory_allocated()
f = pcg.load_graphed(FOLDER, colsum)
torch.cuda.synchronize()
grown = torch.cuda.memory_allocated() - base
pools = f.memory()["total"]
inputs = sum(x.numel() * x.element_size() for x in XS.values())
print("grown", grown, "pools", pools, "scratch inputs would be", inputs)
assert f.load_report.loaded == 2, f.load_report
assert grown <= pools + (2 << 20), (grown, pools, inputs)  # no scratch input is kept
for x in XS.values():
    torch.testing.assert_close(f(x), colsum(x))
assert f.stats.captures == 0, f.stats
print("OK")
"""


@pytest.mark.gpu
def test_a_loaded_key_keeps_its_pool_and_not_a_scratch_input(tmp_path):
    _save_then_load(tmp_path, BIG_INPUTS, BIG_SAVE, BIG_LOAD)


#: CuPy: a function that closes over its weights; bound by name (closure:w, closure:bias).
#: A dense layer as a broadcast product and a reduction: CuPy refuses cuBLAS (``x @ w``)
#: inside a stream capture. Batches of 2 or more: each key's arrays keep their dimensions
#: (CuPy drops dimensions of size 1, which would make other kernels of the same name).
CUPY_FN = """
import json, sys
from pathlib import Path
try:
    import cupy as cp
except ImportError as exc:
    print("SKIP", exc); sys.exit(0)
import pycudagraph as pcg

FOLDER = sys.argv[1]
rng = cp.random.default_rng(0)
W = rng.standard_normal((128, 128), dtype=cp.float32) / 8
B = rng.standard_normal(128, dtype=cp.float32)


def make_layer(w, bias):
    def layer(x):
        return cp.tanh((x[:, :, None] * w[None]).sum(axis=1) + bias)
    return layer


layer = make_layer(W, B)
XS = {n: cp.random.default_rng(n).standard_normal((n, 128), dtype=cp.float32) for n in (2, 8, 64)}


def reference(x):  # the same layer through cuBLAS, outside any capture
    return cp.tanh(x @ W + B)
"""

CUPY_SAVE = """
f = pcg.graphed(layer)
for x in XS.values():
    cp.testing.assert_allclose(f(x), layer(x), rtol=1e-5, atol=1e-5)
    cp.testing.assert_allclose(f(x), reference(x), rtol=1e-4, atol=1e-4)
assert f.stats.captures == 3, f.stats
report = f.save(FOLDER)
assert report.keys == 3 and not report.skipped, report
names = json.loads(Path(FOLDER, "index.json").read_text())["bindings"]
assert "closure:w" in names and "closure:bias" in names, sorted(names)
print("OK")
"""

CUPY_LOAD = """
with pcg.trace() as t:
    f = pcg.load_graphed(FOLDER, layer)
    for x in XS.values():
        cp.testing.assert_allclose(f(x), layer(x), rtol=1e-5, atol=1e-5)
r = f.load_report
print("REPORT", r)
assert r.loaded == 3 and not r.fallback and f.stats.captures == 0, (r, f.stats)
assert sum(c.api.startswith("cudaStreamBeginCapture") for c in t.records) == r.probes
assert r.probes <= r.kernel_sets, r
before = f(XS[8]).copy()
W *= 2  # in place: the graphs read W itself (bound, not copied)
after = f(XS[8]).copy()
assert not cp.allclose(before, after, rtol=1e-3, atol=1e-3), "the weight was copied"
cp.testing.assert_allclose(after, layer(XS[8]), rtol=1e-5, atol=1e-5)
cp.testing.assert_allclose(after, reference(XS[8]), rtol=1e-4, atol=1e-4)
print("OK")
"""


@pytest.mark.gpu
def test_cupy_function_closing_over_its_weights_saved_and_loaded(tmp_path):
    _save_then_load(tmp_path, CUPY_FN, CUPY_SAVE, CUPY_LOAD)


#: A value in an argument the kernel does not read, naming a live array that is none of
#: the function's weights: a left-over (another array in each capture, as a library's
#: by-value struct may hold whatever the host stack held), saved as a number; the same
#: array in every capture, and read, keeps the key out with the reason.
LEFT_OVER = """
import itertools, sys
try:
    import torch
except ImportError as exc:
    print("SKIP", exc); sys.exit(0)
import pycudagraph as pcg

FOLDER = sys.argv[1]
SRC = r'''
// `other` is an integer, as a library's by-value struct holds bytes: no typed pointer
extern "C" __global__ void twice(float* y, const float* x, unsigned long long other, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
extern "C" __global__ void twice_plus(float* y, const float* x, unsigned long long other,
                                      int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + ((const float*)other)[0];
}
'''
mod = pcg.Program(SRC, name="left_over.cu").compile()


class Hidden:  # arrays no closure, global or module names: bound to nothing
    pass


hidden = Hidden()
hidden.others = [torch.full((256,), float(v + 1), device="cuda") for v in range(64)]
flip = itertools.count()


def make(kernel, pick):
    def fn(x):
        y = torch.empty_like(x)
        kernel.launch(1, 256, (y, x, hidden.others[pick()].data_ptr(), 256),
                      stream=torch.cuda.current_stream().cuda_stream)
        return y
    return fn


x = torch.arange(256, device="cuda", dtype=torch.float32)
f = pcg.graphed(make(mod["twice"], lambda: next(flip) % 64))  # another array each call
torch.testing.assert_close(f(x), 2 * x)
report = f.save(FOLDER + ".unread")
assert report.keys == 1 and not report.skipped, report
(places,) = report.left_overs.values()
assert places == ["arg 2 of twice"], report.left_overs
g = pcg.graphed(make(mod["twice_plus"], lambda: 0))
torch.testing.assert_close(g(x), 2 * x + 1)
try:
    g.save(FOLDER + ".read")
    raise SystemExit("a key whose graph reads an unbound live array was saved")
except pcg.ArgumentError as exc:
    assert "(live)" in str(exc) and "arg 2 of twice_plus" in str(exc), str(exc)
print("OK")
"""


@pytest.mark.gpu
def test_a_left_over_value_is_told_from_an_address_the_graph_reads(tmp_path):
    print(_run(LEFT_OVER, str(tmp_path / "k"), 300))
