"""The idea of CUDA Samples' simpleCudaGraphs, written from scratch with pycudagraph.

A sum reduction is expressed as a graph two ways, and the graph is cloned:

1. built by hand: H2D copy of the input (``cudaGraphAddMemcpyNode1D``) and a memset of
   the result (``cudaGraphAddMemsetNode``) as two roots; two ``reduce_sum`` kernel
   nodes (``cudaGraphAddKernelNode``), one per half of the array, running in parallel;
   a D2H copy of the result; a host node (``cudaGraphAddHostNode``) that runs a Python
   callable recording the sum;
2. captured from streams (``cudaStreamBeginCapture``): the same copies, memset and
   kernels issued with ``cudaMemcpyAsync``, ``cudaMemsetAsync`` and ``cuLaunchKernel``,
   forked onto a second stream and joined back with events (``cudaEventRecord``,
   ``cudaStreamWaitEvent``); the host node is added to the captured graph afterwards;
3. ``cudaGraphClone`` of the hand-built graph; ``cudaGraphNodeFindInClone`` finds the
   clone's host node, which is pointed at another label
   (``cudaGraphHostNodeSetParams``) without touching the original.

All three are instantiated and launched for several iterations with new input each
time; every recorded sum is checked against numpy.
"""

import numpy as np

import pycudagraph as pcg

N = 1 << 20
HALF = N // 2
THREADS = 256  # reduce_sum needs blocks of 256 threads
GRID = 64      # blocks per half (grid-stride loop inside the kernel)
ITERATIONS = 3


def main():
    reduce_sum = pcg.Module.from_file("helpers.cu")["reduce_sum"]
    stream, side = pcg.Stream(), pcg.Stream()
    rng = np.random.default_rng(4)

    h_x = pcg.PinnedBuffer(4 * N)
    h_sum = pcg.PinnedBuffer(4)
    x, total = h_x.array(np.float32), h_sum.array(np.float32)
    d_x, d_sum = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4)
    second_half = d_x.ptr + 4 * HALF  # a raw device address is a valid pointer argument
    results = []

    def record(label):  # runs on a CUDA host thread: no CUDA calls in here
        results.append((label, float(total[0])))

    # 1. By hand.
    g = pcg.Graph()
    h2d = g.add_memcpy(d_x, h_x)
    zero = g.add_memset(d_sum, 0, 1, element_size=4)
    k0 = g.add_kernel(reduce_sum, GRID, THREADS, (d_x, d_sum, HALF), deps=[h2d, zero])
    k1 = g.add_kernel(reduce_sum, GRID, THREADS, (second_half, d_sum, N - HALF), deps=[h2d, zero])
    d2h = g.add_memcpy(h_sum, d_sum, deps=[k0, k1])
    host = g.add_host(record, args=("manual",), deps=[d2h])
    print(f"manual graph: {len(g)} nodes, {len(g.edges)} edges, roots {g.root_nodes}")

    # 2. Captured: warm up eagerly first, then capture with a fork/join over two streams.
    reduce_sum.launch(GRID, THREADS, (d_x, d_sum, HALF), stream=stream)
    stream.synchronize()
    fork, join = pcg.Event(timing=False), pcg.Event(timing=False)
    with pcg.capture(stream) as cap:
        d_x.copy_from(x, stream=stream)
        d_sum.zero(stream=stream)
        fork.record(stream)
        side.wait(fork)                      # side joins the capture
        reduce_sum.launch(GRID, THREADS, (d_x, d_sum, HALF), stream=stream)
        reduce_sum.launch(GRID, THREADS, (second_half, d_sum, N - HALF), stream=side)
        join.record(side)
        stream.wait(join)                    # and is joined back before the end
        d_sum.copy_to(total, stream=stream)
        cap.keep(h_x, h_sum)
    captured = cap.graph
    leaves = [n for n in captured.nodes if not n.dependents]
    captured.add_host(record, args=("captured",), deps=leaves)
    print("captured graph:", [str(n.type) for n in captured.nodes])
    assert sorted(str(n.type) for n in captured.nodes) == sorted(str(n.type) for n in g.nodes)

    # 3. Clone, find the host node in the clone, relabel it there only.
    clone = g.clone()
    clone_host = clone.find(host)
    clone_host.set_params(record, args=("clone",))
    print(f"clone.find({host!r}) -> {clone_host!r}")
    assert clone_host != host and clone_host.graph is clone

    execs = {"manual": g.instantiate(), "captured": captured.instantiate(),
             "clone": clone.instantiate()}
    for it in range(ITERATIONS):
        x[:] = rng.random(N, dtype=np.float32)
        want = float(x.astype(np.float64).sum())
        for label, exe in execs.items():
            results.clear()
            exe.launch(stream)
            stream.synchronize()
            assert len(results) == 1 and results[0][0] == label, results
            got = results[0][1]
            print(f"iteration {it} {label:<8}: sum = {got:.3f} (numpy {want:.3f})")
            assert abs(got - want) <= 1e-4 * abs(want), (label, got, want)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
