"""``pcg.graphed(fn)`` (pycudagraph/frameworks/graphed.py, arrays.py).

CPU: the input key (shapes, strides, dtypes, devices, alignment, aliasing, other
arguments), refused arguments, argument validation, the decorator forms. GPU (each in a
child process): 100 calls of a graphed PyTorch function (attention + MLP) and of a CuPy
function with new inputs, slices included, equal eager; a later call's trace shows no
capture and no copy; a new shape makes a second graph; ``check=True`` refuses a function
that reads an input address from device memory.
"""

import pytest

import pycudagraph as pcg
from pycudagraph.errors import ArgumentError
from pycudagraph.frameworks.arrays import array_info, flatten, substitute
from tests.support.fake_frameworks import (FakeCupyArray, FakeTensor, install_cupy,
                                           install_torch)
from tests.support.fakes import fake_buffer
from tests.support.watchdog import run_ok

P = 0x7F00_0000_0000


@pytest.fixture
def torch(monkeypatch):
    return install_torch(monkeypatch)


def key_of(*args, **kwargs):
    return flatten(args, kwargs)[0]


def test_same_layout_same_key(torch):
    a, b = FakeTensor(P, (4, 8)), FakeTensor(P + 0x10000, (4, 8))
    assert key_of(a, 2) == key_of(b, 2)
    assert key_of(a, 2) != key_of(a, 3)  # numbers are baked in: part of the key
    assert key_of(a, 2) != key_of(a, 2.0)  # by type too
    assert key_of(a) != key_of(FakeTensor(P, (4, 9)))
    assert key_of(a) != key_of(FakeTensor(P, (4, 8), stride=(1, 4)))
    assert key_of(a) != key_of(FakeTensor(P, (4, 8), device=1))
    assert key_of(a) != key_of(FakeTensor(P, (4, 8), dtype="float16"))


def test_alignment_is_part_of_the_key(torch):
    aligned = FakeTensor(P + 512, (16,))
    assert key_of(aligned) == key_of(FakeTensor(P + 4096, (16,)))  # both >= 256-aligned
    assert key_of(aligned) != key_of(FakeTensor(P + 4, (16,)))  # a vectorized kernel would fault


def test_aliasing_is_part_of_the_key(torch):
    x = FakeTensor(P, (64,))
    apart = key_of(x, FakeTensor(P + 4096, (64,)))
    assert apart == key_of(x, FakeTensor(P + 8192, (64,)))
    overlapping = key_of(x, FakeTensor(P + 128, (64,)))  # bytes 128.. of x
    assert overlapping != apart
    assert overlapping != key_of(x, FakeTensor(P + 64, (64,)))  # another distance
    assert key_of(x, x) != apart


def test_nested_arguments_and_kwargs(torch):
    a, b = FakeTensor(P, (4,)), FakeTensor(P + 4096, (4,))
    key, infos = flatten(([a, (b, 3)], {"k": a}), {"scale": 2.0})
    assert [i.obj for i in infos] == [a, b, a]
    assert key != key_of([a, (b, 4)], {"k": a}, scale=2.0)
    swapped = substitute(([a, (b, 3)], {"k": a}), lambda t: "T")
    assert swapped == (["T", ("T", 3)], {"k": "T"})


def test_refused_arguments(torch):
    import numpy as np
    with pytest.raises(ArgumentError, match="argument 0 is a ndarray"):
        key_of(np.zeros(3))
    with pytest.raises(ArgumentError, match=r"argument 'w'\[0\] is a set"):
        key_of(w=[{1}])
    with pytest.raises(ArgumentError, match="CPU tensor"):
        key_of(FakeTensor(P, (3,), device=-1))


def test_array_spans(torch, monkeypatch):
    install_cupy(monkeypatch)
    t = array_info(FakeTensor(P, (4, 8), stride=(16, 1)))  # rows 64 bytes apart, 32 used
    assert (t.lo, t.hi) == (P, P + 3 * 64 + 32)
    rev = array_info(FakeCupyArray(P + 60, (16,), (-4,)))  # a reversed view
    assert (rev.lo, rev.hi) == (P, P + 64) and rev.ptr == P + 60
    empty = array_info(FakeTensor(P, (0, 8)))
    assert (empty.lo, empty.hi) == (P, P)
    buf = fake_buffer(256)
    buf._dev = 0
    b = array_info(buf)
    assert (b.framework, b.lo, b.hi) == ("buffer", buf.ptr, buf.ptr + 256)
    assert array_info(3) is None and array_info("x") is None


def test_graphed_options_are_checked():
    with pytest.raises(ArgumentError, match="callable"):
        pcg.graphed(3)
    with pytest.raises(ArgumentError, match="check must be"):
        pcg.graphed(len, check="maybe")
    with pytest.raises(ArgumentError, match="warmup"):
        pcg.graphed(len, warmup=0)


def test_decorator_forms_keep_the_function():
    @pcg.graphed
    def f(x):
        """Doubles."""
        return x

    @pcg.graphed(check=True, copy_outputs=True)
    def g(x):
        return x

    assert isinstance(f, pcg.GraphedCallable) and isinstance(g, pcg.GraphedCallable)
    assert f.__name__ == "f" and f.__doc__ == "Doubles." and f.__wrapped__.__name__ == "f"
    assert g.check == "raise" and g.copy_outputs
    assert f.graphs == {} and f.stats.calls == 0

    class Module:
        def __init__(self):
            self.stream = "not ours"

        def __call__(self, x):
            return x

    assert pcg.graphed(Module()).stream is None  # the callable's attributes stay its own


# --- GPU ------------------------------------------------------------------------------

TORCH_CALLS = """
import sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
torch.manual_seed(0)
D, H, T, B = 64, 4, 16, 8

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(D, H, batch_first=True)
        self.norm = torch.nn.LayerNorm(D)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(),
                                       torch.nn.Linear(4 * D, D))
    def forward(self, x, scale):
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return (x + self.mlp(x)) * scale

model = Block().cuda().eval()
f = pcg.graphed(model)
big = torch.randn(48, T, D, device="cuda")
for i in range(100):
    x = big[i % 40: i % 40 + B] if i % 3 == 0 else torch.randn(B, T, D, device="cuda")
    y = f(x, 0.5)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x, 0.5), rtol=1e-4, atol=1e-4)
print("graphs", len(f.graphs), f.stats)
assert len(f.graphs) == 1 and f.stats.captures == 1 and f.stats.replays == 100
assert f.stats.set_params > 0 and f.stats.rebound_inputs >= 90
entry, = f.graphs.values()
assert entry.plan.slots[0] > 0, entry.plan.slots
x = torch.randn(B, T, D, device="cuda")
with pcg.trace() as t:
    y = f(x, 0.5)
apis = [r.api for r in t.records]
print(apis)
assert "cuGraphLaunch" in apis and "cuGraphExecKernelNodeSetParams" in apis, apis
assert not [a for a in apis if "Capture" in a or "Instantiate" in a or a.startswith("cudaMemcpy")]
with torch.no_grad():
    torch.testing.assert_close(y, model(x, 0.5), rtol=1e-4, atol=1e-4)
y2 = f(torch.randn(B + 1, T, D, device="cuda"), 0.5)
assert len(f.graphs) == 2 and y2.shape[0] == B + 1
copies = pcg.graphed(model, copy_outputs=True)
a = copies(x, 0.5); b = copies(torch.randn(B, T, D, device="cuda"), 0.5)
assert a.data_ptr() != b.data_ptr()
with torch.no_grad():
    torch.testing.assert_close(a, model(x, 0.5), rtol=1e-4, atol=1e-4)
print("OK")
"""

CUPY_CALLS = """
import sys
try:
    import cupy as cp
except ImportError:
    print("SKIP no cupy"); sys.exit(0)
import pycudagraph as pcg

def g(x, y):
    return cp.tanh(x) * y + x.sum(axis=1, keepdims=True)

f = pcg.graphed(g)
big = cp.random.rand(64, 256, dtype=cp.float32)
for i in range(100):
    x = big[i % 32: i % 32 + 16] if i % 3 == 0 else cp.random.rand(16, 256, dtype=cp.float32)
    y = cp.random.rand(16, 256, dtype=cp.float32)
    cp.testing.assert_allclose(f(x, y), g(x, y), rtol=1e-5, atol=1e-5)
print("graphs", len(f.graphs), f.stats)
assert len(f.graphs) == 1 and f.stats.captures == 1 and f.stats.set_params > 0
x, y = cp.random.rand(16, 256, dtype=cp.float32), cp.random.rand(16, 256, dtype=cp.float32)
with pcg.trace() as t:
    out = f(x, y)
apis = [r.api for r in t.records]
assert "cuGraphLaunch" in apis, apis
assert not [a for a in apis if "Capture" in a or "Instantiate" in a or a.startswith("cudaMemcpy")]
cp.testing.assert_allclose(out, g(x, y), rtol=1e-5, atol=1e-5)
f(cp.random.rand(8, 256, dtype=cp.float32), cp.random.rand(8, 256, dtype=cp.float32))
assert len(f.graphs) == 2
print("OK")
"""

CHECK_REFUSES = """
import sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
k = pcg.Program('''
extern "C" __global__ void deref(const long long* table, float* out, int n) {
    const float* src = (const float*)(table[0] + 8);  // the input's address (table holds x - 8 bytes)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * src[i];
}''', name="deref.cu").compile()["deref"]

def hidden(x):  # reads x through a table in device memory, holding x - 8 bytes
    table = torch.empty(1, dtype=torch.int64, device="cuda")
    table.fill_(x.data_ptr() - 8)
    out = torch.empty(x.numel() - 2, device="cuda")
    k.launch((out.numel() + 255) // 256, 256, (table, out, out.numel()),
             stream=torch.cuda.current_stream().cuda_stream)
    return out

f = pcg.graphed(hidden, check=True)
x = torch.randn(1024, device="cuda")
try:
    # the capture may have run on copies of the inputs (warm-up): then the very first
    # replay already reads a stale address and is refused; else the next new input is
    torch.testing.assert_close(f(x), 2 * x[:-2])
    f(torch.randn(1024, device="cuda"))
except pcg.PyCudaGraphError as exc:
    assert "device memory" in str(exc), exc
    print("refused:", exc)
else:
    raise SystemExit("check=True did not refuse a stale device-memory address")
try:
    f(torch.randn(1024, device="cuda"))
    raise SystemExit("the refused key ran again")
except pcg.PyCudaGraphError:
    pass
eager = pcg.graphed(hidden, check="eager")
eager(x)
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    z = torch.randn(1024, device="cuda")
    torch.testing.assert_close(eager(z), 2 * z[:-2])
assert eager.stats.eager_calls == 1 and w
safe = pcg.graphed(lambda a, b: a * b + 1, check=True)
for _ in range(3):
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    torch.testing.assert_close(safe(a, b), a * b + 1)
assert safe.stats.checks == 2
print("OK")
"""




@pytest.mark.gpu
def test_graphed_torch_rebinds_100_calls():
    print(run_ok(TORCH_CALLS))


@pytest.mark.gpu
def test_graphed_cupy_rebinds_100_calls():
    print(run_ok(CUPY_CALLS))


@pytest.mark.gpu
def test_check_refuses_addresses_in_device_memory():
    print(run_ok(CHECK_REFUSES))
