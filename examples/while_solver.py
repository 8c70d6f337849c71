"""An iterative solver whose loop runs inside the graph: a while node until converged.

Solves a dense, strictly diagonally dominant 512 x 512 system ``A x = b`` by Jacobi
iteration (kernels/jacobi.cu). The examples in jacobi_graphs.py launch one graph per
iteration or two and read the residual on the host after each launch; here ONE graph
launch runs the whole solve on the GPU:

    memset x0 = 0 -> while(handle) { zero(res); x1 = J(x0); x0 = J(x1); res = |x0 - x1|^2;
                                      continue_while_above(res, tol, iters, handle) }

``g.conditional_handle(default=1)`` (``cudaGraphConditionalHandleCreate``) makes the
handle, ``g.add_while(h)`` (``cudaGraphAddNode``) the node, and the last kernel of the
body calls ``cudaGraphSetConditional(handle, residual >= tol && iters < max)``. The host
waits once, then checks the answer against ``numpy.linalg.solve`` and prints the
iteration count and the residual.
"""

import time

import numpy as np

import pycudagraph as pcg

N = 512
TOL = 1e-9
MAX_ITERS = 5000
RHO = 0.98
J_GRID, J_BLOCK = (N + 7) // 8, 256
R_GRID, R_BLOCK = (N + 255) // 256, 256


def main():
    jac = pcg.Module.from_file("jacobi.cu")
    ctl = pcg.Module.from_file("graph_control.cu")
    rng = np.random.default_rng(5)
    A = rng.uniform(0.0, 1.0, (N, N)).astype(np.float32)
    np.fill_diagonal(A, 0.0)
    np.fill_diagonal(A, A.sum(axis=1) / RHO)
    b = (A.astype(np.float64) @ rng.uniform(-1.0, 1.0, N)).astype(np.float32)
    x_ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))

    stream = pcg.Stream()
    d_A = pcg.DeviceBuffer.from_array(A, stream=stream)
    d_b = pcg.DeviceBuffer.from_array(b, stream=stream)
    x0, x1 = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    d_res, d_iters = pcg.DeviceBuffer(8), pcg.DeviceBuffer(4)

    g = pcg.Graph()
    start = [g.add_memset(x0, 0, 4 * N), g.add_memset(d_iters, 0, 4)]
    h = g.conditional_handle(default=1)  # enter the loop at every launch
    loop = g.add_while(h, deps=start)
    body = loop.body
    z = body.add_kernel(jac["zero_double"], 1, 1, (d_res,))
    j1 = body.add_kernel(jac["jacobi_step"], J_GRID, J_BLOCK, (d_A, d_b, x0, x1, N))
    j2 = body.add_kernel(jac["jacobi_step"], J_GRID, J_BLOCK, (d_A, d_b, x1, x0, N), deps=[j1])
    r = body.add_kernel(jac["residual_sq"], R_GRID, R_BLOCK, (x1, x0, d_res, N), deps=[z, j2])
    body.add_kernel(ctl["continue_while_above"], 1, 1, (d_res, TOL, d_iters, 2, MAX_ITERS, h),
                    deps=[r])
    print(g.to_dot().count("->"), "edges in the DOT picture; nodes:", [str(n.type) for n in g.nodes],
          "body:", [n.kernel_name for n in body.nodes])

    exe = g.instantiate(upload_stream=stream)
    t0 = time.perf_counter()
    exe.launch(stream)  # the whole solve: one launch, one wait
    stream.synchronize()
    elapsed = time.perf_counter() - t0

    iters = int(d_iters.to_numpy(np.int32)[0])
    residual = float(d_res.to_numpy(np.float64)[0])
    sol = x0.to_numpy(np.float32)
    err = np.linalg.norm(sol - x_ref) / np.linalg.norm(x_ref)
    print(f"while node: {iters} iterations, residual {residual:.3e} (tol {TOL:.0e}), "
          f"rel err vs numpy {err:.2e}, {elapsed * 1e3:.2f} ms for one launch")
    assert 0 < iters < MAX_ITERS, f"the loop ran {iters} iterations"
    assert residual < TOL, f"not converged: residual {residual:.3e}"
    assert err < 1e-3, f"relative error {err:.3e} against numpy.linalg.solve"

    # A second launch starts again from x0 = 0 (the memsets) and the default value 1.
    d_res.copy_from(np.array([1.0]))
    exe.launch(stream)
    stream.synchronize()
    again = int(d_iters.to_numpy(np.int32)[0])
    print(f"second launch: {again} iterations")
    assert again == iters, (again, iters)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
