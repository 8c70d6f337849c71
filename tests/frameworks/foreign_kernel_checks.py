"""GPU checks of kernels made elsewhere, one source per process.

    python tests/frameworks/foreign_kernel_checks.py NAME     (from the repository root)

NAME is one of ``template``, ``images``, ``raw``, ``cupy``, ``triton``, ``numba``. Each
check launches its kernels eagerly and as graph nodes, changes arguments of the
instantiated graph with ``set_arg`` (by name where the signature is known), and compares
every result with numpy. It prints ``PASS NAME`` at the end, or ``SKIP NAME: reason``
when the library it needs is missing; anything else (a traceback) is a failure.
``test_foreign_kernels_gpu.py`` runs each in its own process, so a crash cannot take
pytest down.
"""

import sys
from pathlib import Path

import numpy as np

import pycudagraph as pcg

DATA = Path(__file__).resolve().parents[1] / "compile" / "data"
N = 1000
THREADS = 128
GRID = (N + THREADS - 1) // THREADS
RNG = np.random.default_rng(7)


class Skip(Exception):
    pass


def rand(n=N, dtype=np.float32):
    return RNG.standard_normal(n).astype(dtype)


def dev(a):
    return pcg.DeviceBuffer.from_array(a)


def close(got, want, what, tol=1e-5):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def axpy_rounds(kernel, block, make_args, read, y0, x, what, a_key="a", y_key="y",
                a_value=float, new=dev):
    """Eager launch, then a graph node, then set_arg of the output ``y_key`` and of the
    scalar ``a_key`` (names or indices); all checked against numpy: ``y = a * x + y``.
    ``make_args(y, a)`` builds the arguments around an output made by ``new(y0)``."""
    s = pcg.Stream()
    y = new(y0)
    kernel.launch(GRID, block, make_args(y, a_value(2.0)), stream=s)
    s.synchronize()
    close(read(y), np.float32(2.0) * x + y0, f"{what}: eager launch")

    y2 = new(y0)
    g = pcg.Graph()
    node = g.add_kernel(kernel, GRID, block, make_args(y2, a_value(2.0)))
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    close(read(y2), np.float32(2.0) * x + y0, f"{what}: graph launch")

    y3 = new(y0)
    exe.set_arg(node, y_key, y3)
    exe.set_arg(node, a_key, a_value(-3.0))
    exe.launch(s)
    s.synchronize()
    close(read(y3), np.float32(-3.0) * x + y0, f"{what}: after set_arg")
    close(read(y2), np.float32(2.0) * x + y0, f"{what}: the old output is untouched")
    return node, exe


def read_buffer(buf):
    return buf.to_numpy(np.float32)


# --- sources -------------------------------------------------------------------------

TEMPLATE_SRC = r'''
namespace demo {
template <typename T> __global__ void axpby(T* y, T a, const T* x, T b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b * y[i];
}
}
'''


def check_template():
    mod = pcg.Program(TEMPLATE_SRC, name="axpby.cu").compile()
    k = mod.get_kernel("demo::axpby<float>")
    assert [p.name for p in k.params] == ["y", "a", "x", "b", "n"], k.params
    assert k.symbol.startswith("_ZN4demo5axpbyIfEE"), k.symbol
    x, y0 = rand(), rand()
    X = dev(x)
    node, _ = axpy_rounds(k, THREADS, lambda y, a: (y, a, X, 1.0, N), read_buffer, y0, x,
                          "axpby<float>")
    assert node.kernel_name == "demo::axpby<float>" and node.mangled_name == k.symbol
    kd = mod.get_kernel("demo::axpby<double>")
    xd, yd = x.astype(np.float64), y0.astype(np.float64)
    Y, XD = dev(yd), dev(xd)
    s = pcg.Stream()
    kd.launch(GRID, THREADS, (Y, 0.5, XD, 2.0, N), stream=s)
    s.synchronize()
    close(Y.to_numpy(np.float64), 0.5 * xd + 2.0 * yd, "axpby<double>", tol=1e-12)


def check_images():
    x, y0 = rand(), rand()
    X = dev(x)
    for name in ("images.ptx", "images.cubin", "images.fatbin", "images_compressed.fatbin"):
        mod = pcg.Module.from_file(DATA / name)
        if mod.arch.startswith("sm_") and mod.arch != pcg.Device(0).arch:
            continue  # SASS for another GPU
        k = mod.get_kernel("axpy", signature="float* y, float a, const float* x, int n")
        axpy_rounds(k, THREADS, lambda y, a: (y, a, X, N), read_buffer, y0, x, name)
        raw = mod.get_kernel("axpy")  # no signature: the PTX's types, or the image's sizes
        Y = dev(y0)
        s = pcg.Stream()
        scalar = (np.float32(2.0), np.int32(N)) if raw.params[1].kind == "struct" else (2.0, N)
        raw.launch(GRID, THREADS, (Y, scalar[0], X, scalar[1]), stream=s)
        s.synchronize()
        close(Y.to_numpy(np.float32), 2 * x + y0, f"{name}: axpy by its image's parameters")
        scale = mod.get_kernel("_ZN2ns5scaleIfEEvPT_S1_i")  # a mangled name
        Z = dev(y0)
        scale.launch(GRID, THREADS, (Z, np.float32(4.0), np.int32(N)), stream=s)
        s.synchronize()
        close(Z.to_numpy(np.float32), 4 * y0, f"{name}: ns::scale<float> by its mangled name")


def check_raw():
    mod = pcg.Module.from_file(DATA / "images.cu")
    k = mod["axpy"]
    x, y0 = rand(), rand()
    X = dev(x)
    from cuda.bindings import driver as dr
    as_int = pcg.Kernel.from_function(k.function())  # an int: a CUfunction of this device
    assert as_int.name == "axpy", as_int.name
    assert [(p.kind, p.size) for p in as_int.params] == [("pointer", 8), ("struct", 4),
                                                         ("pointer", 8), ("struct", 4)]
    axpy_rounds(as_int, THREADS, lambda y, a: (y, a, X, np.int32(N)), read_buffer, y0, x,
                "CUfunction (int)", a_key=1, y_key=0, a_value=np.float32)
    typed = pcg.Kernel.from_function(dr.CUkernel(int(k.handle)),
                                     signature="float* y, float a, const float* x, int n")
    assert typed.name == "axpy" and typed.origin.device == -1
    axpy_rounds(typed, THREADS, lambda y, a: (y, a, X, N), read_buffer, y0, x, "CUkernel")
    rt_kernel = pcg.Kernel.from_function(k.handle, signature="float* y, float a, const float* x, int n")
    axpy_rounds(rt_kernel, THREADS, lambda y, a: (y, a, X, N), read_buffer, y0, x, "cudaKernel_t")
    fn = pcg.Kernel.from_function(dr.CUfunction(k.function()), signature="float* y, float a, float* x, int n")
    try:
        fn.launch(GRID, THREADS, (dev(y0), 1.0, X), stream=pcg.Stream())
    except pcg.ArgumentError as exc:
        assert "takes 4 arguments, 3 given" in str(exc), exc
    else:
        raise AssertionError("a short argument list was launched")
    wrong = pcg.Kernel.from_function(k.function(), signature="float* y, double a, float* x, int n")
    try:
        wrong.layout
    except pcg.ArgumentError as exc:
        assert "parameter 1 'a' is double (8 bytes)" in str(exc) and "4 bytes" in str(exc), exc
    else:
        raise AssertionError("a signature that disagrees with the image was accepted")


CUPY_SRC = r'''
extern "C" __global__ void cupy_axpy(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T> __global__ void tscale(T* y, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
'''


def check_cupy():
    try:
        import cupy as cp
    except ImportError as exc:
        raise Skip(f"CuPy is not importable ({exc})")
    raw = cp.RawKernel(CUPY_SRC, "cupy_axpy")
    k = pcg.Kernel.from_function(raw)
    assert [p.name for p in k.params] == ["x", "y", "a", "n"], k.params
    assert k.origin.obj is raw
    x, y0 = rand(), rand()
    X = cp.asarray(x)

    def make(y, a):
        return (X, y, a, N)

    def fresh(y_host):
        arr = cp.asarray(y_host)
        cp.cuda.runtime.deviceSynchronize()  # CuPy's copy is on its stream, the launch on ours
        return arr

    axpy_rounds(k, THREADS, make, cp.asnumpy, y0, x, "CuPy RawKernel", new=fresh)
    mod = cp.RawModule(code=CUPY_SRC, name_expressions=("tscale<float>",))
    tk = pcg.Kernel.from_function(mod.get_function("tscale<float>"),
                                  signature="float* y, float a, int n")
    Y = fresh(y0)
    s = pcg.Stream()
    tk.launch(GRID, THREADS, (Y, 3.0, N), stream=s)
    s.synchronize()
    close(cp.asnumpy(Y), 3 * y0, "CuPy RawModule template instance")
    fk = pcg.Kernel.from_function(raw.kernel, signature="const float* x, float* y, float a, int n")
    Y = fresh(y0)
    fk.launch(GRID, THREADS, (X, Y, 2.0, N), stream=s)
    s.synchronize()
    close(cp.asnumpy(Y), 2 * x + y0, "CuPy Function")


def _triton_kernels(triton, tl):
    @triton.jit
    def t_axpy(x_ptr, y_ptr, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
                 mask=m)

    @triton.jit
    def t_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
    return t_axpy, t_matmul


def check_triton():
    try:
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
    except ImportError as exc:
        raise Skip(f"Triton is not importable ({exc})")
    t_axpy, t_matmul = _triton_kernels(triton, tl)
    major, minor = pcg.Device(0).compute_capability
    target = GPUTarget("cuda", major * 10 + minor, 32)
    src = triton.compiler.ASTSource(fn=t_axpy, signature={"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                          "n": "i32", "a": "fp32",
                                                          "BLOCK": "constexpr"},
                                    constexprs={"BLOCK": THREADS})
    compiled = triton.compile(src, target=target, options={"num_warps": 4})
    k = pcg.Kernel.from_function(compiled)
    assert [p.name for p in k.params] == ["x_ptr", "y_ptr", "n", "a"], k.params
    assert k.block == (128, 1, 1) and k.shared_mem == compiled.metadata.shared
    x, y0 = rand(), rand()
    X = dev(x)
    axpy_rounds(k, k.block, lambda y, a: (X, y, N, a), read_buffer, y0, x, "Triton axpy",
                y_key="y_ptr")
    axpy_rounds(k, None, lambda y, a: (X, y, N, a), read_buffer, y0, x, "Triton axpy, block=None",
                y_key="y_ptr")

    # a kernel with more than 48 KiB of dynamic shared memory and 256-thread blocks
    src = triton.compiler.ASTSource(
        fn=t_matmul, signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32",
                                "N": "i32", "K": "i32", "BM": "constexpr", "BN": "constexpr",
                                "BK": "constexpr"},
        constexprs={"BM": 128, "BN": 128, "BK": 64})
    mm = triton.compile(src, target=target, options={"num_warps": 8, "num_stages": 3})
    km = pcg.Kernel.from_function(mm)
    shared = mm.metadata.shared
    assert km.block == (256, 1, 1) and km.shared_mem == shared, (km.block, km.shared_mem, shared)
    size = 256
    a = rand(size * size).astype(np.float16)
    b = rand(size * size).astype(np.float16)
    want = a.astype(np.float32).reshape(size, size) @ b.astype(np.float32).reshape(size, size)
    A, B, C = dev(a), dev(b), pcg.DeviceBuffer(4 * size * size)
    s = pcg.Stream()
    km.launch((2, 2), None, (A, B, C, size, size, size), stream=s)  # shared memory: its own
    s.synchronize()
    close(C.to_numpy(np.float32).reshape(size, size), want, "Triton matmul, eager", tol=1e-2)
    g = pcg.Graph()
    C2 = pcg.DeviceBuffer(4 * size * size)
    node = g.add_kernel(km, (2, 2), km.block, (A, B, C2, size, size, size))
    assert node.params.block == (256, 1, 1) and node.params.shared_mem == shared, node.params
    passed = node.arg_bytes  # one per kernel parameter: the six given, then the hidden zeros
    assert [len(b) for _, b in passed[:6]] == [8, 8, 8, 4, 4, 4], passed
    assert all(b == bytes(8) for _, b in passed[6:]) and len(passed) == 6 + len(km.origin.hidden)
    assert [off for off, _ in passed] == [off for off, _ in km.image_params], passed
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    close(C2.to_numpy(np.float32).reshape(size, size), want, "Triton matmul, graph", tol=1e-2)
    C3 = pcg.DeviceBuffer(4 * size * size)
    exe.set_arg(node, "c_ptr", C3)
    exe.set_arg(node, "a_ptr", B)
    exe.set_arg(node, "b_ptr", A)
    exe.launch(s)
    s.synchronize()
    want2 = b.astype(np.float32).reshape(size, size) @ a.astype(np.float32).reshape(size, size)
    close(C3.to_numpy(np.float32).reshape(size, size), want2, "Triton matmul, set_arg", tol=1e-2)
    try:
        exe.set_params(node, shared_mem=0)
    except pcg.ArgumentError as exc:
        assert f"needs {shared} bytes" in str(exc), exc
    else:
        raise AssertionError("a Triton node accepted less shared memory than it needs")
    _check_triton_launch_result(triton, t_axpy)


def _check_triton_launch_result(triton, t_axpy):
    """What a launch fn[grid](...) returns, with its alignment assumptions (needs PyTorch)."""
    try:
        import torch
    except ImportError:
        print("note: PyTorch is not importable: the fn[grid](...) result was not checked")
        return
    x, y0 = rand(), rand()
    xt, yt = torch.from_numpy(x).cuda(), torch.from_numpy(y0).cuda()
    compiled = t_axpy[(GRID,)](xt, yt, N, 2.0, BLOCK=THREADS)
    torch.cuda.synchronize()
    k = pcg.Kernel.from_function(compiled)
    assert [p.name for p in k.params] == ["x_ptr", "y_ptr", "n", "a"], k.params
    X = dev(x)
    axpy_rounds(k, None, lambda y, a: (X, y, N, a), read_buffer, y0, x, "Triton fn[grid] result",
                y_key="y_ptr")
    if k.params[0].convert is not None:  # Triton assumed x_ptr 16-byte aligned
        g = pcg.Graph()
        node = g.add_kernel(k, GRID, None, (X, dev(y0), N, 1.0))
        exe = g.instantiate()
        try:
            exe.set_arg(node, "x_ptr", X.ptr + 4)
        except pcg.ArgumentError as exc:
            assert "multiple of 16" in str(exc), exc
        else:
            raise AssertionError("a misaligned pointer was accepted")


def _numpy_for_old_numba() -> None:
    """Numba releases older than numpy 2.5 call ``np.row_stack``, which numpy 2.5 removed
    (it was an alias of ``np.vstack`` since numpy 2.0): give them the alias back in this
    test process, so that Numba's compiler, not pycudagraph, is what such a numba lacks."""
    import numpy
    if not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack


def check_numba():
    _numpy_for_old_numba()
    try:
        import numba
        print(f"numba {numba.__version__}")
        from numba import cuda
    except ImportError as exc:
        raise Skip(f"Numba-CUDA is not importable ({exc})")
    try:
        if not cuda.is_available():
            raise Skip("numba.cuda.is_available() is False")

        @cuda.jit("void(float32[::1], float32[::1], float32, int32)")
        def nb_axpy(x, y, a, n):
            i = cuda.grid(1)
            if i < n:
                y[i] = a * x[i] + y[i]

        @cuda.jit("void(float64[:, ::1], complex64, UniTuple(float64, 2))")
        def nb_fill(m, c, t):
            i, j = cuda.grid(2)
            if i < m.shape[0] and j < m.shape[1]:
                m[i, j] = c.real * t[0] + c.imag * t[1] + i * 10 + j
    except Skip:
        raise
    except Exception as exc:  # no NVVM / libdevice for Numba here
        raise Skip(f"Numba-CUDA could not compile a kernel here ({type(exc).__name__}: {exc})")
    k = pcg.Kernel.from_function(nb_axpy)
    assert [p.name for p in k.params] == ["x", "y", "a", "n"], k.params
    assert [len(p.parts) for p in k.params] == [7, 7, 0, 0]
    x, y0 = rand(), rand()
    X = cuda.to_device(x)

    def fresh(y_host):
        arr = cuda.to_device(y_host)
        cuda.synchronize()  # the copy is on the legacy stream, the launches on ours
        return arr

    axpy_rounds(k, THREADS, lambda y, a: (X, y, a, N), lambda d: d.copy_to_host(), y0, x,
                "Numba axpy", new=fresh)
    g = pcg.Graph()  # held while its node is read: a node does not keep its graph alive
    node = g.add_kernel(k, GRID, THREADS, (X, cuda.to_device(y0), 1.0, N))
    passed = node.arg_bytes  # one per kernel parameter: an array fills seven
    assert len(passed) == 16 and [off for off, _ in passed] == [o for o, _ in k.image_params]
    assert int.from_bytes(passed[2][1], "little") == N  # x's nitems
    kf = pcg.Kernel.from_function(nb_fill)
    M = cuda.device_array((5, 7), np.float64)
    s = pcg.Stream()
    kf.launch(1, (8, 8), (M, 1 + 2j, (3.0, 4.0)), stream=s)
    s.synchronize()
    i, j = np.indices((5, 7))
    close(M.copy_to_host(), 3.0 + 8.0 + 10.0 * i + j, "Numba 2-d array, complex, tuple", tol=1e-6)
    g = pcg.Graph()
    node = g.add_kernel(kf, 1, (8, 8), (M, 1 + 2j, (3.0, 4.0)))
    exe = g.instantiate()
    M2 = cuda.device_array((4, 6), np.float64)
    exe.set_arg(node, "m", M2)
    exe.set_arg(node, "t", (1.0, 1.0))
    exe.launch(s)
    s.synchronize()
    i, j = np.indices((4, 6))
    close(M2.copy_to_host(), 1.0 + 2.0 + 10.0 * i + j, "Numba set_arg of an array and a tuple",
          tol=1e-6)
    try:
        exe.set_arg(node, "m", cuda.device_array(6, np.float64))
    except pcg.ArgumentError as exc:
        assert "2-d array" in str(exc), exc
    else:
        raise AssertionError("a 1-d array was accepted for a 2-d parameter")


CHECKS = {"template": check_template, "images": check_images, "raw": check_raw,
          "cupy": check_cupy, "triton": check_triton, "numba": check_numba}


def main(name):
    try:
        CHECKS[name]()
    except Skip as why:
        print(f"SKIP {name}: {why}")
        return
    print(f"PASS {name}")


if __name__ == "__main__":
    main(sys.argv[1])
