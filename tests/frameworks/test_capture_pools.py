"""Memory-safe capture: the private pool PyTorch and CuPy allocate from inside
``pcg.capture`` (pycudagraph/frameworks/pools.py).

CPU: the pool plumbing against fake frameworks (reference counts as PyTorch's allocator
keeps them, CuPy's thread allocator, sharing, release, errors). GPU (each in a child
process): after capturing a PyTorch model with attention and MLP blocks, and CuPy
expressions with temporaries, no array allocated afterwards is written by a replay; the
results equal eager; the pool's memory comes back when graph and execs are gone; memory()
agrees with PyTorch's allocator statistics.
"""

import gc
import warnings
from types import SimpleNamespace

import pytest

import pycudagraph as pcg
from pycudagraph.errors import ArgumentError
from pycudagraph.frameworks import pools
from pycudagraph.frameworks.pools import CapturePool, framework_pools, pool_of
from tests.support.fake_frameworks import (FakeMemoryPool, install_cupy, install_torch,
                                           without_frameworks)
from tests.support.fakes import fake_graph
from tests.support.watchdog import run_ok

STREAM = SimpleNamespace(device=0, ptr=0xABC)


def test_no_framework_no_pool(monkeypatch):
    without_frameworks(monkeypatch)
    assert framework_pools(None, object()) is None  # the stream is not even looked at


def test_torch_without_cuda_takes_no_part(monkeypatch):
    torch = install_torch(monkeypatch, initialized=False)
    act = framework_pools(None, STREAM)
    act.close()
    assert torch.allocator.calls == []


def test_torch_pool_references_follow_the_pool_object(monkeypatch):
    torch = install_torch(monkeypatch)
    pool = CapturePool()
    act = pool.activate(0, 1)
    pid = pool.torch_id
    assert torch.allocator.calls == [("begin", 0, pid)]
    act.close()
    act.close()  # idempotent
    assert torch.allocator.calls[-1] == ("end", 0, pid)
    assert torch.allocator.uses[(0, pid)] == 1  # the pool object's own reference
    pool.activate(0, 1).close()  # a second capture sharing it: begin, end, give back
    assert [c[0] for c in torch.allocator.calls[2:]] == ["begin", "end", "release"]
    assert torch.allocator.uses[(0, pid)] == 1
    pool.activate(1, 1).close()  # another device: a reference of its own
    assert torch.allocator.uses[(1, pid)] == 1
    del pool, act
    gc.collect()
    assert torch.allocator.uses == {(0, pid): 0, (1, pid): 0}


def test_graph_keeps_its_pool(monkeypatch):
    install_torch(monkeypatch)
    g = fake_graph()
    pool = CapturePool()
    g.table.ledger.keep_also(pool)
    assert pool_of(g) is pool
    assert CapturePool.coerce(g) is pool
    ref = __import__("weakref").ref(pool)
    del pool
    gc.collect()
    assert ref() is not None  # the graph holds it
    del g
    gc.collect()
    assert ref() is None


def test_per_stream_form_before_torch_2_8(monkeypatch):
    torch = install_torch(monkeypatch, per_thread=False)
    pool = CapturePool()
    pool.activate(0, 0x77).close()
    assert torch.allocator.stream.cuda_stream == 0x77  # the capture stream was current
    assert [c[0] for c in torch.allocator.calls] == ["begin", "end"]


def test_torch_without_pool_api_warns_once(monkeypatch):
    install_torch(monkeypatch, pool_api=False)
    monkeypatch.setattr(pools, "_warned", set())
    with pytest.warns(RuntimeWarning, match="not memory-safe"):
        CapturePool().activate(0, 1).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CapturePool().activate(0, 1).close()


def test_cupy_allocations_go_to_the_pool_in_relaxed_mode(monkeypatch):
    without_frameworks(monkeypatch)
    cupy = install_cupy(monkeypatch)
    modes = []
    monkeypatch.setattr(pools, "call", lambda fn, mode: modes.append(mode) or "old")
    pool = CapturePool()
    act = framework_pools(pool, STREAM)
    assert act.pool is pool and len(cupy.allocators) == 1
    assert pool.cupy_pool is None  # made on the first allocation
    mp = cupy.allocators[-1](4096)
    assert isinstance(pool.cupy_pool, FakeMemoryPool)
    assert modes == [pools._RELAXED, "old"]  # relaxed around cudaMalloc, then restored
    act.close()
    assert cupy.allocators == []
    assert pool.ranges() == [(mp.ptr, mp.ptr + 4096, "CuPy graph pool")]
    assert pool.reserved_bytes() == {"torch": 0, "cupy": 4096}
    made = pool.cupy_pool
    del pool, act
    gc.collect()
    assert made.freed_all  # its free blocks go back to the driver


def test_a_given_cupy_pool_is_not_emptied(monkeypatch):
    install_cupy(monkeypatch)
    mine = FakeMemoryPool()
    pool = CapturePool.coerce(mine)
    assert pool.cupy_pool is mine
    del pool
    gc.collect()
    assert not mine.freed_all


def test_torch_segments_and_pool_bytes(monkeypatch):
    torch = install_torch(monkeypatch)
    pool = CapturePool()
    pool.activate(0, 1).close()
    torch.allocator.segments[:] = [
        {"address": 0x1000, "total_size": 2 << 20, "segment_pool_id": pool.torch_id},
        {"address": 0x900000, "total_size": 1 << 20, "segment_pool_id": (0, 0)}]
    assert pool.torch_segments() == [(0x1000, 2 << 20)]
    assert pool.reserved_bytes()["torch"] == 2 << 20
    assert pool.ranges() == [(0x1000, 0x1000 + (2 << 20), "PyTorch graph pool")]


def test_coerce_pool_arguments(monkeypatch):
    install_torch(monkeypatch)
    p = CapturePool()
    assert CapturePool.coerce(p) is p
    assert isinstance(CapturePool.coerce(None), CapturePool)
    assert CapturePool.coerce((0, 42)).torch_id == (0, 42)
    mempool = type("MemPool", (), {"id": (0, 7)})()
    assert CapturePool.coerce(mempool).torch_id == (0, 7)
    with pytest.raises(ArgumentError, match="pool= must be"):
        CapturePool.coerce("pool")
    with pytest.raises(ArgumentError, match="torch_pool must be"):
        CapturePool(torch_pool=(1, "x"))
    with pytest.raises(ArgumentError, match="not captured with a framework pool"):
        CapturePool.coerce(fake_graph())


def test_close_ends_torch_even_when_cupy_fails(monkeypatch):
    torch = install_torch(monkeypatch)
    install_cupy(monkeypatch)
    act = CapturePool().activate(0, 1)

    class Broken:
        def __exit__(self, *exc):
            raise RuntimeError("cupy says no")

    act._cupy = Broken()
    with pytest.raises(RuntimeError, match="cupy says no"):
        act.close()
    assert torch.allocator.calls[-1][0] == "end"


def test_release_never_raises(monkeypatch):
    torch = install_torch(monkeypatch)
    pool = CapturePool()
    pool.activate(0, 1).close()

    def broken(dev, pid):
        raise RuntimeError("gone")

    monkeypatch.setattr(torch._C, "_cuda_releasePool", broken)
    del pool
    gc.collect()  # the finalizer swallows it


# --- GPU ------------------------------------------------------------------------------

TORCH_SAFE = """
import gc, sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
torch.manual_seed(0)
D, H, T = 64, 4, 32

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(D, H, batch_first=True)
        self.norm1, self.norm2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(),
                                       torch.nn.Linear(4 * D, D))
    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))

model = torch.nn.Sequential(Block(), Block()).cuda().eval()
sizes = set()
for m in model.modules():
    m.register_forward_hook(lambda _m, _i, o: sizes.add(
        (o[0] if isinstance(o, tuple) else o).numel()))
side = torch.cuda.Stream()
x = torch.randn(2, T, D, device="cuda")
with torch.no_grad():  # warm up on both streams: cuBLAS workspaces are made per stream
    for _ in range(3):
        model(x)
        with torch.cuda.stream(side):
            model(x)
torch.cuda.synchronize()
gc.collect(); torch.cuda.empty_cache()
r0 = torch.cuda.memory_reserved()
with torch.no_grad(), torch.cuda.stream(side):
    with pcg.capture(pcg.Stream.wrap(side), mode="thread_local") as cap:
        y = model(x)
r1 = torch.cuda.memory_reserved()
assert cap.pool is not None and cap.pool.torch_id is not None
mem = cap.graph.memory()
print("memory", mem, "reserved by the capture", r1 - r0)
assert mem["graph_pool_bytes"] == r1 - r0 > 0, (mem, r1 - r0)
seg_total = sum(s["total_size"] for s in torch.cuda.memory_snapshot())
assert 2 <= mem["allocations"] and mem["pinned_bytes"] <= seg_total
exe = cap.graph.instantiate()
# many tensors allocated on the capture stream after it, of the intermediates' sizes
with torch.cuda.stream(side):
    later = [torch.full((n,), -7.0, device="cuda") for n in sorted(sizes) for _ in range(6)]
    later += [torch.full((n,), -7.0, device="cuda") for n in range(1000, 200000, 7919)]
for trial in range(3):
    x.copy_(torch.randn(2, T, D, device="cuda"))
    torch.cuda.synchronize()
    exe.launch(side.cuda_stream)
    side.synchronize()
    bad = sum(int((t != -7.0).any()) for t in later)
    assert bad == 0, f"a replay wrote into {bad} of {len(later)} later tensors"
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)
print("written later tensors: 0 of", len(later))
import weakref
pool_ref = weakref.ref(cap.pool)
del later
torch.cuda.synchronize()
del cap, exe, y, mem
gc.collect()
assert pool_ref() is None, "the pool outlived its graph and exec"
torch.cuda.empty_cache()
r2 = torch.cuda.memory_reserved()
print("reserved", r0, r1, r2)
assert r2 <= r0, (r0, r1, r2)
print("OK")
"""

CUPY_SAFE = """
import gc, sys, weakref
try:
    import cupy as cp
except ImportError:
    print("SKIP no cupy"); sys.exit(0)
import pycudagraph as pcg
N = 1 << 16
s = pcg.Stream()
cs = cp.cuda.Stream.from_external(s)
with cs:  # made on the stream that reads it: no race with CuPy's own stream
    x = cp.linspace(0, 1, N, dtype=cp.float32)
def f(x):
    return cp.sin(x) * 2 + cp.exp(x) - x ** 2 + x.sum()   # temporaries of every size
with cs:
    want = f(x)
    cp.testing.assert_allclose(want, want)  # load the kernels the checks below use now:
    int((want != -7.0).any())              # a module loaded later takes device memory
s.synchronize()


def used():
    # Device memory this process uses: nvidia-smi's figure for this pid where it lists it
    # (other processes on the GPU, such as a test suite run beside this one, do not count);
    # else the device's used memory.
    import os, subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return int(mib) << 20
    free, total = cp.cuda.runtime.memGetInfo()
    return total - free


cp.get_default_memory_pool().free_all_blocks()
used0 = used()
with pcg.capture(s, mode="thread_local") as cap:
    with cs:
        y = f(x)
assert cap.pool is not None and cap.pool.cupy_pool is not None
print("memory", cap.graph.memory())
assert cap.graph.memory()["graph_pool"]["cupy"] > 0
exe = cap.graph.instantiate()
with cs:
    later = [cp.full(n, -7.0, dtype=cp.float32) for n in (N, N, N, N, 1, 1, 64) * 8]
for trial in range(3):
    exe.launch(s)
    s.synchronize()
    bad = sum(int((a != -7.0).any()) for a in later)
    assert bad == 0, f"a replay wrote into {bad} of {len(later)} later arrays"
    cp.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
pool_ref = weakref.ref(cap.pool)
del later, cap, exe, y
gc.collect()
assert pool_ref() is None, "the pool outlived its graph and exec"
cp.get_default_memory_pool().free_all_blocks()
used2 = used()
print("used", used0, used2)
assert used2 <= used0 + (2 << 20), (used0, used2)
print("OK")
"""

SHARED = """
import sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
side = torch.cuda.Stream()
s = pcg.Stream.wrap(side)
x = torch.randn(1 << 16, device="cuda")
torch.cuda.synchronize()  # randn ran on PyTorch's stream, not ordered before side
with torch.cuda.stream(side):
    (x * 2).sum()
    with pcg.capture(s, mode="thread_local") as one:
        a = (x * 2).exp()
    with pcg.capture(s, mode="thread_local", pool=one.pool) as two:
        b = (x * 3).exp()
    with pcg.capture(s, mode="thread_local", pool=one.graph) as three:
        c = (x * 4).exp()
assert two.pool is one.pool is three.pool
for cap in (one, two, three):
    cap.graph.instantiate().launch(side.cuda_stream)
side.synchronize()
torch.testing.assert_close(b, (x * 3).exp())
print("OK")
"""




@pytest.mark.gpu
def test_torch_capture_is_memory_safe():
    print(run_ok(TORCH_SAFE))


@pytest.mark.gpu
def test_cupy_capture_is_memory_safe():
    print(run_ok(CUPY_SAFE))


@pytest.mark.gpu
def test_captures_share_a_pool():
    run_ok(SHARED)


def test_capture_signature_takes_pool():
    import inspect
    assert "pool" in inspect.signature(pcg.capture).parameters
    assert "pool" in inspect.signature(pcg.recapture).parameters


def test_a_capture_inside_a_capture_shares_the_outer_pool(monkeypatch):
    torch = install_torch(monkeypatch)
    outer = framework_pools(None, STREAM)
    inner = framework_pools(None, STREAM)  # a capture into a body, opened inside
    assert inner.pool is outer.pool
    assert [c[0] for c in torch.allocator.calls] == ["begin"]  # routed once: no double begin
    inner.close()
    assert [c[0] for c in torch.allocator.calls] == ["begin"]
    own = framework_pools(CapturePool(), STREAM)  # one given its own pool routes there
    assert own.pool is not outer.pool
    own.close()
    outer.close()
    assert [c[0] for c in torch.allocator.calls] == ["begin", "begin", "end", "end"]
    fresh = framework_pools(None, STREAM)
    fresh.close()
    assert fresh.pool is not outer.pool  # none open: a new pool
    assert pools._open_here() == []
