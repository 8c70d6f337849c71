"""``pcg.find_fault`` on the GPU, each scenario in a process of its own (tests/support/watchdog):

* a 200-node graph of NVRTC kernels in which one kernel writes 4 TiB past a 64-byte
  buffer: the search names that node, its kernel and the argument, with the CUDA error,
  in at most ``log2(200) + 2`` trials; afterwards the caller's process launches another
  graph and gets the right result, and the caller's buffers hold what they held (the
  trials ran on copies in the child);
* a small PyTorch MLP captured with ``pcg.capture`` (cuBLAS matmuls, ReLU, ``index_select``,
  kernels found in the child by a probe resolver, tests/debug/torch_fault_model.py): a
  healthy capture reports no fault; with an out-of-range index planted in the index tensor
  after the capture, the search names the kernel node that reads that tensor; the caller's
  PyTorch keeps working and the graph, its index mended, replays right in the caller.
"""

import pytest

from tests.support.watchdog import run_ok

pytestmark = pytest.mark.gpu

GRAPH_200 = r'''
import math, time
import numpy as np
import pycudagraph as pcg

SRC = r"""
extern "C" __global__ void add_one(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1.0f;
}
extern "C" __global__ void put(float* y, long long at, float v) {
    if (blockIdx.x == 0 && threadIdx.x == 0) y[at] = v;
}
"""
mod = pcg.Program(SRC, name="find_fault_test.cu").compile()
N, LANES, BAD = 256, 8, 137
bufs = [pcg.DeviceBuffer(4 * N) for _ in range(LANES)]
for b in bufs:
    b.zero()
small = pcg.DeviceBuffer(64)
g, nodes, last = pcg.Graph(), [], [None] * LANES
for i in range(200):
    lane = i % LANES
    deps = [last[lane]] if last[lane] is not None else []
    if i == BAD:  # 4 TiB past a 64-byte buffer: an illegal address
        node = g.add_kernel(mod["put"], 1, 32, (small, 1 << 40, 1.0), deps=deps)
    else:
        node = g.add_kernel(mod["add_one"], 1, N, (bufs[lane], N), deps=deps)
    last[lane] = node
    nodes.append(node)

t0 = time.perf_counter()
r = pcg.find_fault(g, timeout=60, progress=print)
took = time.perf_counter() - t0
print(r)
print(f"TIMING find_fault, 200 NVRTC kernel nodes: {took:.2f} s, {len(r.trials)} trials, "
      f"same addresses: {r.same_addresses}")
assert r.node is nodes[BAD], (r.index, r.node)
assert r.index == BAD
ILLEGAL = ("cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS")  # runtime or driver name
assert r.error_name in ILLEGAL and any(e in r.error for e in ILLEGAL), r.error
text = str(r)
assert "node 138 of 200" in text and "'put'" in text and "0x10000000000" in text, text
assert r.error in text, text
assert len(r.trials) <= math.ceil(math.log2(200)) + 2, r.trials
assert r.trials[0].k == 200 and r.trials[0].outcome == "fault", r.trials

# the caller's process keeps working: another graph launches and is right
for b in bufs:  # the trials ran on copies in the child: the caller's memory is as it was
    assert (b.to_numpy(np.float32) == 0.0).all()
out = pcg.DeviceBuffer(4 * N)
out.zero()
h = pcg.Graph()
a = h.add_kernel(mod["add_one"], 1, N, (out, N))
h.add_kernel(mod["add_one"], 1, N, (out, N), deps=[a])
s = pcg.Stream()
h.instantiate().launch(s)
s.synchronize()
assert (out.to_numpy(np.float32) == 2.0).all()

# a healthy graph: no fault, one trial
ok = pcg.find_fault(h)
print(ok)
assert ok.node is None and len(ok.trials) == 1 and ok.trials[0].outcome == "ok", ok
print("OK")
'''

TORCH = r'''
import sys, time
try:
    import torch
except ImportError:
    print("SKIP PyTorch is not installed"); sys.exit(0)
import pycudagraph as pcg
from tests.debug import torch_fault_model as m

t = m.tensors()
g = m.captured(t)
kinds = [str(n.type) for n in g.nodes]
print("captured", len(kinds), "nodes:", kinds)

healthy = pcg.find_fault(g, resolve=m.resolve, timeout=120)
print(healthy)
assert healthy.node is None and len(healthy.trials) == 1, healthy

# planted after the capture: the replay selects column 2**31 - 1 (PyTorch's bound check
# asserts; were it compiled out, 32-bit index math would still reach 8 GiB past the tensor)
t["idx"][3] = (1 << 31) - 1
torch.cuda.synchronize()
readers = [n for n in g.nodes if t["idx"].data_ptr() in {s.address for s in n.sites()}]
assert len(readers) == 1, readers
t0 = time.perf_counter()
r = pcg.find_fault(g, resolve=m.resolve, timeout=120, progress=print)
print(r)
print(f"TIMING find_fault, captured PyTorch MLP of {len(kinds)} nodes: "
      f"{time.perf_counter() - t0:.2f} s, {len(r.trials)} trials, same addresses: "
      f"{r.same_addresses}")
assert r.node is readers[0], (r.index, r.node, readers)
assert r.error_name in ("cudaErrorAssert", "cudaErrorIllegalAddress", "CUDA_ERROR_ASSERT",
                        "CUDA_ERROR_ILLEGAL_ADDRESS"), r.error
assert readers[0].kernel_name in str(r), str(r)  # the kernel, by name

# the caller keeps working: PyTorch, and the graph itself once the index is mended
t["idx"][3] = 6
torch.cuda.synchronize()
exe = g.instantiate()
side = m.side_stream()
with torch.cuda.stream(side):
    exe.launch(pcg.Stream.wrap(side))
side.synchronize()
want = m.tensors()
m.forward(want)
torch.testing.assert_close(t["y"], want["y"], rtol=1e-4, atol=1e-4)
assert torch.equal((torch.ones(4, device="cuda") * 3).cpu(), torch.full((4,), 3.0))
print("OK")
'''


def test_find_fault_names_the_out_of_bounds_node_of_200_and_the_caller_keeps_working():
    out = run_ok(GRAPH_200, timeout=600)
    print(out[-3000:])


def test_find_fault_names_the_planted_bad_index_of_a_captured_pytorch_mlp():
    out = run_ok(TORCH, timeout=600)
    print(out[-3000:])
