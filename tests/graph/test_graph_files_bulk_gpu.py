"""Graph files of format 2 on the GPU, in a child process: a 1,000-node chain of NVRTC
kernels (with a memset before it and a kernel in a child graph) saved as binary records,
loaded with other buffers; the loaded graph computes what the built one does, its nodes
are ordinary kernel nodes (``set_arg`` by name on the exec, ``set_params`` on the node,
a whole-graph update), made from their records on first use, also after an exec was made,
which keeps what it launches, and it saves again as format 2."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import sys
import numpy as np
import pycudagraph as pcg
from pycudagraph.files import archive as files

SRC = r"""
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
extern "C" __global__ void scale(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
"""
path, path2, N, NODES = sys.argv[1], sys.argv[2], 4096, 1000
mod = pcg.Program(SRC, name="bulk_gpu.cu").compile()
axpy, scale = mod["axpy"], mod["scale"]


def build(x, y, a=0.5):
    g = pcg.Graph()
    prev = (g.add_memset(y, 0, N, 4),)
    for i in range(NODES):
        if i % 2:
            prev = (g.add_kernel(scale, N // 256, 256, (y, 0.999, N), deps=prev),)
        else:
            prev = (g.add_kernel(axpy, N // 256, 256, (y, x, a if i else 0.25, N), deps=prev),)
    child = pcg.Graph()
    child.add_kernel(axpy, N // 256, 256, (y, x, 1.0, N))
    g.add_child_graph(child, deps=prev)
    return g


rng = np.random.default_rng(3)
xs = rng.standard_normal(N).astype(np.float32)
x, y = pcg.DeviceBuffer.from_array(xs), pcg.DeviceBuffer(4 * N)
s = pcg.Stream()
g = build(x, y)
g.instantiate().launch(s)
s.synchronize()
want = y.to_numpy(np.float32)
g.save(path, slots={"x": x, "y": y})
gf = files.read_file(path)
assert gf.version == (2, 0), gf.version
types = [n["type"] for n in gf.manifest["root"]["nodes"]]
assert types == ["memset", "kernel_run", "child_graph"], types
assert gf.manifest["root"]["nodes"][1]["count"] == NODES
print("SAVED", len(gf.bulk[0]), "records")

pad = pcg.DeviceBuffer(1 << 20)  # other addresses than the saving graph's
x2, y2 = pcg.DeviceBuffer.from_array(xs), pcg.DeviceBuffer(4 * N)
loaded = pcg.load(path, bind={"x": x2, "y": y2})
assert len(loaded.nodes) == NODES + 2
exe = loaded.instantiate()
exe.launch(s)
s.synchronize()
np.testing.assert_allclose(y2.to_numpy(np.float32), want, rtol=1e-5, atol=1e-6)
print("LOADED equal")

first = next(n for n in loaded.nodes if n.type == "kernel" and n.params.args.get("a") == 0.25)
assert first.params.args["y"] == y2.ptr, (first.params.args, y2.ptr)
exe.set_arg(first, "a", 2.0)  # by parameter name, on a loaded node
exe.launch(s)
s.synchronize()
g3 = build(x, y)
for n in g3.nodes:
    if n.type == "kernel" and n.params.args.get("a") == 0.25:
        n.set_params(args={"a": 2.0})
        break
g3.instantiate().launch(s)
s.synchronize()
np.testing.assert_allclose(y2.to_numpy(np.float32), y.to_numpy(np.float32), rtol=1e-5, atol=1e-6)
print("SET_ARG by name")

# an exec made before any node object: the objects are made from the records on first
# use, and the exec finds its own parameters by them (not the graph's, changed since)
late = pcg.load(path, bind={"x": x2, "y": y2})
late_exe = late.instantiate()
# none yet but the last of the chain, which the child graph node after it depends on
assert sum(type(n) is pcg.KernelNode for n in late.table.nodes.values()) == 1
node = next(n for n in late.nodes if n.type == "kernel" and n.params.args.get("a") == 0.25)
assert type(node) is pcg.KernelNode and node.kernel.name == "axpy"
node.set_params(args={"n": 0})  # the graph's node only: the exec still has n = N
late_exe.set_arg(node, "a", 2.0)  # by name, on the exec's parameters
late_exe.launch(s)
s.synchronize()
np.testing.assert_allclose(y2.to_numpy(np.float32), y.to_numpy(np.float32), rtol=1e-5, atol=1e-6)
del late, node  # the exec keeps what it launches (the kernels' module)
import gc
gc.collect()
late_exe.launch(s)
s.synchronize()
np.testing.assert_allclose(y2.to_numpy(np.float32), y.to_numpy(np.float32), rtol=1e-5, atol=1e-6)
print("LATE objects")

# a clone of a loaded graph carries its kernel nodes as the loaded ones are (names and all);
# a node removed goes from what the table would make objects from
fresh = pcg.load(path, bind={"x": x2, "y": y2})
twin = fresh.clone()
kinds = [type(n).__name__ for n in twin.nodes if n.type == "kernel"]
assert kinds == ["KernelNode"] * NODES, set(kinds)
assert twin.find(fresh.nodes[5]).kernel is fresh.nodes[5].kernel
gone = fresh.nodes[3]
handle = int(gone)
fresh.remove_node(gone)
assert handle not in fresh.table.deferred.handles() and len(fresh.nodes) == NODES + 1
print("CLONE and REMOVE")

loaded.save(path2, slots={"x": x2, "y": y2})
again = pcg.load(path2, bind={"x": x, "y": y})
assert files.read_file(path2).version == (2, 0)
exe.update(again)
exe.launch(s)
s.synchronize()
np.testing.assert_allclose(y.to_numpy(np.float32), want, rtol=1e-5, atol=1e-6)
print("HEALTHY")
'''


@pytest.mark.gpu
def test_a_chain_saved_as_records_loads_and_stays_an_ordinary_graph(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONFAULTHANDLER="1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT),
                           str(tmp_path / "a.pcgraph"), str(tmp_path / "b.pcgraph")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-4000:]}"
    assert "LOADED equal" in out and "SET_ARG by name" in out and "HEALTHY" in out, out
    assert "LATE objects" in out and "CLONE and REMOVE" in out, out
