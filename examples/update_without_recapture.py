"""Updating an instantiated graph in place instead of re-capturing it.

The graph is ``y = copy(src); y *= a; y += alpha * x`` (a memcpy node, then the
helpers kernels scale and axpy). After ``instantiate`` the exec is changed in place:

* ``exe.set_arg(node, "a", 3.0)`` rewrites one kernel argument and calls
  ``cuGraphExecKernelNodeSetParams`` (``cudaGraphExecKernelNodeSetParams``);
* ``exe.set_params(node, args={...})`` changes several kernel arguments at once
  (same raw call);
* ``exe.set_params(memcpy_node, src=other)`` points the copy at another buffer
  (``cudaGraphExecMemcpyNodeSetParams1D``);
* ``exe.upload(stream)`` (``cudaGraphUpload``) then ``exe.launch(stream)``.

Each step is checked against numpy; the graph itself is left unchanged (a fresh
instantiate still gives the original result). Finally the cost of ``set_arg`` is
compared with re-capturing and re-instantiating (``cudaStreamBeginCapture``,
``cudaStreamEndCapture``, ``cudaGraphInstantiateWithParams``), timed with
``time.perf_counter``; the timings are printed, not asserted.
"""

import time

import numpy as np

import pycudagraph as pcg

N = 1 << 14
THREADS = 256
GRID = (N + THREADS - 1) // THREADS


def main():
    mod = pcg.Module.from_file("helpers.cu")
    scale, axpy = mod["scale"], mod["axpy"]
    stream = pcg.Stream()
    rng = np.random.default_rng(2)
    a_host = rng.standard_normal(N).astype(np.float32)
    b_host = rng.standard_normal(N).astype(np.float32)
    d_a = pcg.DeviceBuffer.from_array(a_host, stream=stream)
    d_b = pcg.DeviceBuffer.from_array(b_host, stream=stream)
    d_y = pcg.DeviceBuffer(4 * N)
    out = np.empty(N, np.float32)

    g = pcg.Graph()
    cp = g.add_memcpy(d_y, d_a)                                              # y = src
    k_scale = g.add_kernel(scale, GRID, THREADS, (d_y, 2.0, N), deps=[cp])    # y *= a
    k_axpy = g.add_kernel(axpy, GRID, THREADS, (d_y, d_a, 1.0, N), deps=[k_scale])
    exe = g.instantiate()

    def run_and_check(what, exe, src, a, alpha, x):
        exe.launch(stream)
        d_y.copy_to(out, stream=stream)
        stream.synchronize()
        want = src * np.float32(a) + np.float32(alpha) * x
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        print(f"{what:<48} ok (max err {float(np.max(np.abs(out - want))):.1e})")

    run_and_check("as built: y = a*2 + 1*a", exe, a_host, 2.0, 1.0, a_host)
    exe.set_arg(k_scale, "a", 3.0)
    run_and_check('set_arg(scale, "a", 3.0): y = a*3 + a', exe, a_host, 3.0, 1.0, a_host)
    exe.set_params(k_axpy, args={"a": -0.5, "x": d_b})
    run_and_check("set_params(axpy, a=-0.5, x=b): y = a*3 - 0.5*b", exe, a_host, 3.0, -0.5, b_host)
    exe.set_params(cp, src=d_b)
    exe.upload(stream)
    run_and_check("set_params(memcpy, src=b): y = b*3 - 0.5*b", exe, b_host, 3.0, -0.5, b_host)
    run_and_check("the graph is unchanged: fresh instantiate", g.instantiate(), a_host, 2.0, 1.0, a_host)

    # Timing: one set_arg versus capturing and instantiating the work again.
    reps = 2000
    t0 = time.perf_counter()
    for i in range(reps):
        exe.set_arg(k_scale, "a", float(i % 7))
    t_set_arg = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for i in range(reps):
        exe.set_params(k_axpy, args={"a": float(i % 5), "x": d_b})
    t_set_params = (time.perf_counter() - t0) / reps

    def recapture(a):
        with pcg.capture(stream) as cap:
            scale.launch(GRID, THREADS, (d_y, a, N), stream=stream)
            axpy.launch(GRID, THREADS, (d_y, d_b, -0.5, N), stream=stream)
        return cap.graph.instantiate()

    reps_cap = 100
    t0 = time.perf_counter()
    for i in range(reps_cap):
        recapture(float(i % 7)).close()
    t_recapture = (time.perf_counter() - t0) / reps_cap
    print(f"exe.set_arg:                      {t_set_arg * 1e6:9.2f} us")
    print(f"exe.set_params(args={{2 args}}):   {t_set_params * 1e6:9.2f} us")
    print(f"re-capture + instantiate:         {t_recapture * 1e6:9.2f} us "
          f"({t_recapture / t_set_arg:.0f}x set_arg)")

    # The exec still works after thousands of updates.
    exe.set_arg(k_scale, "a", 3.0)
    exe.set_params(k_axpy, args={"a": -0.5})
    run_and_check("after the timing loops", exe, b_host, 3.0, -0.5, b_host)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
