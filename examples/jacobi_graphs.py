"""The idea of CUDA Samples' jacobiCudaGraphs, written from scratch with pycudagraph.

Solves a dense, strictly diagonally dominant 512 x 512 system ``A x = b`` by Jacobi
iteration (kernels/jacobi.cu) four ways, until ``||x_new - x_old||^2 < TOL``:

a. eager: ``zero_double``, ``jacobi_step``, ``residual_sq`` launched each iteration
   (``cuLaunchKernel``) plus a ``cudaMemcpyAsync`` of the residual;
b. ping-pong graph: two Jacobi steps (x0 -> x1 -> x0) captured once
   (``cudaStreamBeginCapture``) and replayed unchanged (``cudaGraphLaunch``);
c. per-node updates: a one-step graph built by hand (``cudaGraphAddKernelNode``,
   ``cudaGraphAddMemcpyNode1D``) whose x_old / x_new pointers are swapped in the exec
   after every launch with ``exe.set_params`` / ``exe.set_arg``
   (``cudaGraphExecKernelNodeSetParams``);
d. whole-graph update: the same one-step graph rebuilt with swapped pointers each
   iteration and applied with ``exe.update`` (``cudaGraphExecUpdate``).

Each must match ``numpy.linalg.solve`` to 1e-3 relative error; timings are printed.
"""

import time

import numpy as np

import pycudagraph as pcg

N = 512
TOL = 1e-9
MAX_ITERS = 5000
RHO = 0.98  # off-diagonal row sum / diagonal: strictly diagonally dominant, slow enough to time
J_GRID, J_BLOCK = (N + 7) // 8, 256
R_GRID, R_BLOCK = (N + 255) // 256, 256


def main():
    mod = pcg.Module.from_file("jacobi.cu")
    jacobi, residual, zero = mod["jacobi_step"], mod["residual_sq"], mod["zero_double"]
    stream = pcg.Stream()
    rng = np.random.default_rng(5)
    A = rng.uniform(0.0, 1.0, (N, N)).astype(np.float32)
    np.fill_diagonal(A, 0.0)
    np.fill_diagonal(A, A.sum(axis=1) / RHO)
    b = (A.astype(np.float64) @ rng.uniform(-1.0, 1.0, N)).astype(np.float32)
    x_ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))

    d_A = pcg.DeviceBuffer.from_array(A, stream=stream)
    d_b = pcg.DeviceBuffer.from_array(b, stream=stream)
    x = (pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N))
    d_res, h_res = pcg.DeviceBuffer(8), pcg.PinnedBuffer(8)
    res = h_res.array(np.float64)

    def eager_step(src, dst):
        zero.launch(1, 1, (d_res,), stream=stream)
        jacobi.launch(J_GRID, J_BLOCK, (d_A, d_b, src, dst, N), stream=stream)
        residual.launch(R_GRID, R_BLOCK, (src, dst, d_res, N), stream=stream)

    def build(src, dst):  # one Jacobi step as a graph: (zero, jacobi) -> residual -> copy
        g = pcg.Graph()
        z = g.add_kernel(zero, 1, 1, (d_res,))
        j = g.add_kernel(jacobi, J_GRID, J_BLOCK, (d_A, d_b, src, dst, N))
        r = g.add_kernel(residual, R_GRID, R_BLOCK, (src, dst, d_res, N), deps=[z, j])
        g.add_memcpy(h_res, d_res, deps=[r])
        return g, j, r

    def solve(name, setup, iterate, per_launch=1):
        state = setup()
        for buf in x:  # start from x0 = 0
            buf.zero(stream=stream)
        it, cur = 0, 0  # x[cur] holds the latest iterate
        t0 = time.perf_counter()
        while it < MAX_ITERS:
            cur = iterate(state, cur)
            it += per_launch
            stream.synchronize()
            if res[0] < TOL:
                break
        elapsed = time.perf_counter() - t0
        sol = x[cur].to_numpy(np.float32)
        err = np.linalg.norm(sol - x_ref) / np.linalg.norm(x_ref)
        print(f"{name:<22} {it:5d} iterations  {elapsed * 1e3:8.2f} ms  "
              f"{elapsed / it * 1e6:7.2f} us/iter  rel err {err:.2e}")
        assert res[0] < TOL, f"{name} did not converge: residual {res[0]:.3e}"
        assert err < 1e-3, f"{name}: relative error {err:.3e}"
        return sol

    def eager_iter(_, cur):
        eager_step(x[cur], x[1 - cur])
        d_res.copy_to(res, stream=stream)
        return 1 - cur

    def pingpong_setup():  # (the eager variant ran first: kernels are loaded)
        with pcg.capture(stream) as cap:
            jacobi.launch(J_GRID, J_BLOCK, (d_A, d_b, x[0], x[1], N), stream=stream)
            eager_step(x[1], x[0])  # the residual of the second step
            d_res.copy_to(res, stream=stream)
        return cap.graph.instantiate(upload_stream=stream)

    def pingpong_iter(exe, cur):
        exe.launch(stream)
        return 0  # the result is back in x[0]

    def set_params_iter(state, cur):
        exe, j, r = state
        exe.launch(stream)
        new = 1 - cur  # next launch reads x[new] and writes x[cur]
        exe.set_params(j, args={"x_old": x[new], "x_new": x[cur]})
        exe.set_arg(r, "x_old", x[new])
        exe.set_arg(r, "x_new", x[cur])
        return new

    def update_iter(state, cur):
        state[0].launch(stream)
        new = 1 - cur
        state[0].update(build(x[new], x[cur])[0])
        return new

    def one_step_exec():
        g, j, r = build(x[0], x[1])
        return g.instantiate(upload_stream=stream), j, r

    sols = [solve("a. eager", lambda: None, eager_iter),
            solve("b. ping-pong graph", pingpong_setup, pingpong_iter, per_launch=2),
            solve("c. exec set_params", one_step_exec, set_params_iter),
            solve("d. exec update", one_step_exec, update_iter)]
    spread = max(float(np.max(np.abs(s - sols[0]))) for s in sols)
    print(f"max difference between variants: {spread:.2e}")
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
