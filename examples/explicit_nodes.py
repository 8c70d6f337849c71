"""Explicit graph construction: memcpy and kernel nodes with explicit dependencies.

Builds, node by node, the graph

    H2D memcpy  ->  scale kernel  ->  add_one kernel  ->  D2H memcpy

from page-locked host memory (``PinnedBuffer``, ``cudaMallocHost``) to device memory
and back. Raw calls: ``cudaGraphCreate``; ``cudaGraphAddMemcpyNode1D`` for the copies
(the direction, ``cudaMemcpyHostToDevice`` / ``DeviceToHost``, is inferred from the
buffers); ``cuGraphAddKernelNode`` (the driver twin of ``cudaGraphAddKernelNode``) for
the kernels. Dependencies are given with ``deps=`` at creation and, for one edge, added
afterwards with ``cudaGraphAddDependencies``. The graph is then inspected
(``cudaGraphGetNodes``, ``cudaGraphGetEdges``, ``cudaGraphGetRootNodes``, DOT text),
instantiated (``cudaGraphInstantiateWithParams``) and launched twice
(``cudaGraphLaunch``): the copy nodes read the pinned input when the graph runs, so
new host data needs no graph change. Checked against numpy: ``out = 3*x + 1``.
"""

import numpy as np

import pycudagraph as pcg

N = 4096
THREADS = 256
GRID = (N + THREADS - 1) // THREADS


def main():
    mod = pcg.Module.from_file("helpers.cu")
    scale, add_one = mod["scale"], mod["add_one"]
    stream = pcg.Stream()
    rng = np.random.default_rng(1)

    host_in = pcg.PinnedBuffer(4 * N)
    host_out = pcg.PinnedBuffer(4 * N)
    x_in = host_in.array(np.float32)
    x_out = host_out.array(np.float32)
    dev = pcg.DeviceBuffer(4 * N)

    g = pcg.Graph()
    h2d = g.add_memcpy(dev, host_in)                                    # root
    k_scale = g.add_kernel(scale, GRID, THREADS, (dev, 3.0, N), deps=[h2d])
    k_add = g.add_kernel(add_one, GRID, THREADS, (dev, N))              # no deps yet ...
    g.add_dependency(k_scale, k_add)                                    # ... edge added here
    d2h = g.add_memcpy(host_out, dev, deps=[k_add])

    print("nodes:")
    for node in g.nodes:
        print(f"  {node!r}")
    print("edges:")
    for a, b in g.edges:
        print(f"  {a.describe()}  ->  {b.describe()}")
    print("root nodes:", g.root_nodes)
    print("scale node params:", k_scale.params)
    print("h2d copy params:", h2d.params)
    print(g.to_dot())

    assert [n.type for n in g.nodes] == ["memcpy", "kernel", "kernel", "memcpy"]
    assert set(g.edges) == {(h2d, k_scale), (k_scale, k_add), (k_add, d2h)}
    assert g.root_nodes == [h2d] and k_add.dependencies == [k_scale]
    assert h2d.params.kind == "host->device" and d2h.params.kind == "device->host"

    exe = g.instantiate()
    for run in range(2):
        x = rng.standard_normal(N).astype(np.float32)
        x_in[:] = x                     # the H2D node reads this when the graph runs
        exe.launch(stream)
        stream.synchronize()
        want = x * np.float32(3.0) + np.float32(1.0)
        err = float(np.max(np.abs(x_out - want)))
        print(f"launch {run}: max |out - numpy| = {err:.2e}")
        np.testing.assert_allclose(x_out, want, rtol=1e-6, atol=1e-6)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
