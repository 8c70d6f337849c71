"""Kernels made elsewhere as nodes of one graph: Triton, Numba-CUDA, CuPy, a PTX file and
a C++ template instance.

Each kernel becomes a ``pcg.Kernel`` -- ``pcg.Kernel.from_function`` for a Triton compiled
kernel (its CUBIN loaded with ``cudaLibraryLoadData``, block and shared memory from its
metadata, its hidden scratch parameters passed as null), a Numba-CUDA kernel (each array
argument filling its several kernel parameters) and a CuPy ``RawKernel`` (names from its
source); ``pcg.Module.from_file`` for a ``.ptx`` file (JIT-compiled by the driver); an NVRTC
name expression (``nvrtcAddNameExpression`` / ``nvrtcGetLoweredName``) for
``demo::clamp_scale<float>``. All of them become kernel nodes of one explicit graph
(``cuGraphAddKernelNode``), which is instantiated and launched (``cudaGraphLaunch``);
then ``exe.set_arg`` (``cuGraphExecKernelNodeSetParams``) changes a scalar of every node by
name and one node's output buffer, and the graph is launched again. Every result is
checked against numpy. A source whose library is not importable is skipped with a
printed reason.
"""

from pathlib import Path

import numpy as np

import pycudagraph as pcg

N = 4096
THREADS = 256
GRID = N // THREADS
PTX = Path(__file__).resolve().parent / "data" / "affine.ptx"

TEMPLATE_SRC = r'''
namespace demo {
template <typename T> __global__ void clamp_scale(T* out, const T* x, T a, T lo, T hi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = min(max(a * x[i], lo), hi);
}
}
'''

CUPY_SRC = r'''
extern "C" __global__ void square_scale(const float* x, float* out, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] * x[i];
}
'''


class Float32Array:
    """A float32 view of a DeviceBuffer, for kernels that take typed arrays (Numba)."""

    def __init__(self, buf: pcg.DeviceBuffer, n: int):
        self.buf = buf  # kept alive with the view, so with the graph node that holds it
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "version": 3,
                                         "data": (buf.ptr, False), "strides": None}


def triton_kernel(cc):
    """``out = a * x`` compiled by Triton for this GPU, or the reason it cannot be."""
    try:
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
    except ImportError as exc:
        return None, f"Triton is not importable ({exc})"

    @triton.jit
    def scale(x_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=mask), mask=mask)

    src = triton.compiler.ASTSource(
        fn=scale, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "a": "fp32", "n": "i32",
                             "BLOCK": "constexpr"}, constexprs={"BLOCK": THREADS})
    compiled = triton.compile(src, target=GPUTarget("cuda", cc, 32), options={"num_warps": 4})
    return pcg.Kernel.from_function(compiled), None


def numba_kernel():
    """``out = x + b`` compiled by Numba-CUDA, or the reason it cannot be."""
    if not hasattr(np, "row_stack"):  # Numba before numpy 2.5 calls it; 2.5 removed the
        np.row_stack = np.vstack      # alias of np.vstack (this does not affect pycudagraph)
    try:
        from numba import cuda
    except ImportError as exc:
        return None, f"Numba-CUDA is not importable ({exc})"
    try:
        if not cuda.is_available():
            return None, "numba.cuda.is_available() is False"

        @cuda.jit("void(float32[::1], float32[::1], float32, int32)")
        def shift(x, out, b, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = x[i] + b
    except Exception as exc:  # no NVVM / libdevice for Numba here
        return None, f"Numba-CUDA cannot compile here ({type(exc).__name__}: {exc})"
    return pcg.Kernel.from_function(shift), None


def cupy_kernel():
    """``out = a * x * x`` as a CuPy RawKernel, or the reason it cannot be."""
    try:
        import cupy
    except ImportError as exc:
        return None, f"CuPy is not importable ({exc})"
    return pcg.Kernel.from_function(cupy.RawKernel(CUPY_SRC, "square_scale")), None


def main():
    stream = pcg.Stream()  # no GPU: CudaNotAvailableError here, before any other output
    major, minor = stream.device.compute_capability
    rng = np.random.default_rng(3)
    x = rng.standard_normal(N).astype(np.float32)
    X = pcg.DeviceBuffer.from_array(x)

    def out():
        return pcg.DeviceBuffer(4 * N)

    # source -> (kernel, block, args, the scalar to change, its new value, numpy of it)
    nodes = {}
    tk, why = triton_kernel(major * 10 + minor)
    if tk is None:
        print(f"skipping Triton: {why}")
    else:
        print(f"Triton:   {tk!r} block={tk.block} shared_mem={tk.shared_mem}")
        nodes["triton"] = (tk, tk.block, [X, out(), 2.0, N], "a", 3.0,
                           lambda a: a * x)
    nk, why = numba_kernel()
    if nk is None:
        print(f"skipping Numba-CUDA: {why}")
    else:
        print(f"Numba:    {nk!r}")
        o = out()
        nodes["numba"] = (nk, THREADS, [Float32Array(X, N), Float32Array(o, N), 1.5, N], "b",
                          -0.5, lambda b: x + np.float32(b))
    ck, why = cupy_kernel()
    if ck is None:
        print(f"skipping CuPy: {why}")
    else:
        print(f"CuPy:     {ck!r}")
        nodes["cupy"] = (ck, THREADS, [X, out(), 0.5, N], "a", 2.0, lambda a: a * x * x)
    ptx = pcg.Module.from_file(PTX).get_kernel(
        "affine", signature="const float* x, float* out, float a, float b, int n")
    print(f"PTX file: {ptx!r} ({PTX.name}, JIT-compiled by the driver)")
    nodes["ptx"] = (ptx, THREADS, [X, out(), 2.0, 1.0, N], "a", -1.0,
                    lambda a: a * x + np.float32(1.0))
    tmpl = pcg.Program(TEMPLATE_SRC, name="clamp_scale.cu").compile()["demo::clamp_scale<float>"]
    print(f"template: {tmpl!r} = {tmpl.symbol}")
    nodes["template"] = (tmpl, THREADS, [out(), X, 2.0, -1.0, 1.0, N], "a", 0.5,
                         lambda a: np.clip(a * x, -1.0, 1.0))

    g = pcg.Graph()
    added = {name: g.add_kernel(k, GRID, block, tuple(args))
             for name, (k, block, args, *_rest) in nodes.items()}
    exe = g.instantiate()

    def output(name):
        args = nodes[name][2]
        o = args[1] if name != "template" else args[0]
        return o.buf if isinstance(o, Float32Array) else o

    def check(when, scalars):
        exe.launch(stream)
        stream.synchronize()
        for name, (_k, _b, args, key, _new, numpy_fn) in nodes.items():
            want = numpy_fn(np.float32(scalars[name]))
            got = output(name).to_numpy(np.float32)
            err = float(np.max(np.abs(got - want)))
            print(f"  {when:>14} {name:<8} max |out - numpy| = {err:.1e}")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    check("first launch", {name: nodes[name][2][2] for name in nodes})  # each scalar is arg 2

    # change one scalar of every node by name, and give the PTX node a new output buffer
    for name, (_k, _b, args, key, new, _f) in nodes.items():
        exe.set_arg(added[name], key, new)
    old_out = nodes["ptx"][2][1]
    new_out = out()
    exe.set_arg(added["ptx"], "out", new_out)
    nodes["ptx"][2][1] = new_out
    check("after set_arg", {name: nodes[name][4] for name in nodes})
    np.testing.assert_allclose(old_out.to_numpy(np.float32), 2.0 * x + 1.0, rtol=1e-5, atol=1e-5)
    print(f"ran {len(nodes)} kernels from {', '.join(nodes)} in one graph")
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
