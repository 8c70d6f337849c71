"""Capture basics: the ``torch.cuda.graph`` pattern, done with pycudagraph.

Shows the usual recipe for turning a few kernel launches into a replayable graph:

1. allocate *static* input and output buffers (``cudaMalloc``): a graph bakes in the
   addresses it was captured with, so new data is copied into the same memory;
2. run the work once eagerly on the stream as a warm-up (``cuLaunchKernel``); this
   also loads the module (``cudaLibraryLoadData``) outside the capture;
3. capture the same launches: ``with pcg.capture(stream) as cap:`` calls
   ``cudaStreamBeginCapture`` / ``cudaStreamEndCapture``, and the kernels launched on
   the stream inside the block become kernel nodes of ``cap.graph`` instead of running;
4. instantiate (``cudaGraphInstantiateWithParams``) and, for each new input, copy it
   into the static input (``cudaMemcpyAsync``), replay (``cudaGraphLaunch``) and read
   the static output back.

The work is ``y = ((1 + 2*x) * 0.5) + 1`` with the helpers kernels fill, axpy, scale
and add_one; every replay is checked against numpy.
"""

import numpy as np

import pycudagraph as pcg

N = 1 << 16
THREADS = 256
GRID = (N + THREADS - 1) // THREADS


def expected(x: np.ndarray) -> np.ndarray:
    y = np.float32(1.0) + np.float32(2.0) * x
    return y * np.float32(0.5) + np.float32(1.0)


def main():
    mod = pcg.Module.from_file("helpers.cu")
    fill, axpy, scale, add_one = mod["fill"], mod["axpy"], mod["scale"], mod["add_one"]
    stream = pcg.Stream()
    rng = np.random.default_rng(0)

    # 1. Static buffers: the graph will always read static_x and write static_y.
    static_x = pcg.DeviceBuffer(4 * N)
    static_y = pcg.DeviceBuffer(4 * N)
    host_y = np.empty(N, np.float32)

    def step():
        fill.launch(GRID, THREADS, (static_y, 1.0, N), stream=stream)
        axpy.launch(GRID, THREADS, (static_y, static_x, 2.0, N), stream=stream)
        scale.launch(GRID, THREADS, (static_y, 0.5, N), stream=stream)
        add_one.launch(GRID, THREADS, (static_y, N), stream=stream)

    # 2. Warm-up: run eagerly once (and check the eager result too).
    x0 = rng.standard_normal(N).astype(np.float32)
    static_x.copy_from(x0, stream=stream)
    step()
    static_y.copy_to(host_y, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(host_y, expected(x0), rtol=1e-5, atol=1e-5)
    print("eager warm-up matches numpy")

    # 3. Capture: the launches are recorded as nodes, nothing runs now.
    with pcg.capture(stream) as cap:
        step()
    graph = cap.graph
    print(f"captured {len(graph)} nodes:")
    for node in graph.nodes:
        p = node.params
        print(f"  {node.type}: {node.kernel_name} grid={p.grid} block={p.block}")
    assert [n.kernel_name for n in graph.nodes] == ["fill", "axpy", "scale", "add_one"]

    # 4. Instantiate once, then replay with new data in the static input.
    exe = graph.instantiate()
    for i in range(3):
        x = rng.standard_normal(N).astype(np.float32)
        static_x.copy_from(x, stream=stream)  # same address the graph was captured with
        exe.launch(stream)
        static_y.copy_to(host_y, stream=stream)
        stream.synchronize()
        err = float(np.max(np.abs(host_y - expected(x))))
        print(f"replay {i}: max |y - numpy| = {err:.2e}")
        np.testing.assert_allclose(host_y, expected(x), rtol=1e-5, atol=1e-5)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
