"""Kernels launched eagerly on the GPU: results checked against numpy, arguments checked against
the signature and the compiled image, a clear error for the wrong arch, sticky errors cleared."""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile import limits as validate

pytestmark = pytest.mark.gpu

SCALE_SRC = r'''
extern "C" __global__ void scale_add(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] * a + 1.0f;
}
'''


@pytest.fixture(scope="module")
def scale_add():
    return pcg.Program(SCALE_SRC, name="scale_add.cu").compile()["scale_add"]


def test_must_show_float_and_cupy_array(scale_add):
    cp = pytest.importorskip("cupy")
    x = cp.arange(1000, dtype=cp.float32)
    scale_add.launch((1000 + 255) // 256, 256, (x, 2.5, 1000))
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(x), np.arange(1000, dtype=np.float32) * 2.5 + 1)
    with pytest.raises(pcg.ArgumentError, match="takes 3 arguments, 2 given"):
        scale_add.launch(1, 256, (x, 2.5))
    with pytest.raises(pcg.ArgumentError, match=r"parameter 1 'a' \(float\)"):
        scale_add.launch(1, 256, (x, "2.5", 1000))


def test_image_param_info_checked(scale_add):
    assert scale_add.image_params == [(0, 8), (8, 4), (12, 4)]
    bad = pcg.Program(SCALE_SRC).compile().get_kernel("scale_add", signature="float*, double, int")
    with pytest.raises(pcg.ArgumentError, match="8 bytes.*4 bytes in the compiled kernel"):
        bad.launch(1, 1, (0, 1.0, 1))


MISALIGNED_SRC = r'''
extern "C" __global__ void mixed(float2 a, char b, float4 c, int d, float* y) {
    y[0] = a.x + a.y; y[1] = b; y[2] = c.x + c.w; y[3] = d;
}
'''


def test_offsets_the_driver_gives_are_the_ones_pack_args_uses(stream):
    """A float4 after a char starts at 16 in the image, where pack_args and arg_bytes put it
    too; the kernel reads each value back, launched and as a graph node."""
    k = pcg.Program(MISALIGNED_SRC, name="mixed.cu").compile()["mixed"]
    assert [off for off, _ in k.image_params] == k.param_offsets() == [0, 8, 16, 32, 40]
    y = pcg.DeviceBuffer(16)
    args = ((1.0, 2.0), 3, (4.0, 5.0, 6.0, 7.0), 8, y)
    k.launch(1, 1, args, stream=stream)
    stream.synchronize()
    assert y.to_numpy(np.float32).tolist() == [3.0, 3.0, 11.0, 8.0]
    g = pcg.Graph()
    node = g.add_kernel(k, 1, 1, ((0.5, 0.5), 9, (1.0, 0.0, 0.0, 2.0), -4, y))
    assert [off for off, _ in node.arg_bytes] == k.param_offsets()
    g.instantiate().launch(stream)
    stream.synchronize()
    assert y.to_numpy(np.float32).tolist() == [1.0, 9.0, 3.0, -4.0]


def test_launch_device_buffer_and_stream(helpers, stream):
    n = 4096
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    bx, by = pcg.DeviceBuffer.from_array(x), pcg.DeviceBuffer.from_array(y)
    helpers["axpy"].launch(16, 256, (by, bx, 3.0, n), stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(by.to_numpy(np.float32), 3.0 * x + y, rtol=1e-5, atol=1e-6)  # FMA


def test_compile_for_wrong_arch_fails_clearly():
    other = "sm_80" if pcg.compile.program.device_arch() != "sm_80" else "sm_90"  # another major: no SASS compatibility
    mod = pcg.Program(SCALE_SRC).compile(arch=other)
    with pytest.raises(pcg.CudaError, match="compiled for sm_"):
        mod["scale_add"].handle


def test_kernel_struct_param_size_from_image():
    src = r'''
    struct Pair { int a; float b; };
    extern "C" __global__ void use_pair(Pair p, float* out) { out[0] = p.a + p.b; }
    '''
    k = pcg.Program(src).compile()["use_pair"]
    out = pcg.DeviceBuffer(4)
    dt = np.dtype([("a", "<i4"), ("b", "<f4")])
    k.launch(1, 1, (np.array((3, 0.5), dt)[()], out))
    assert out.to_numpy(np.float32)[0] == 3.5


def test_errors_clear_sticky_state(helpers, monkeypatch):
    k = helpers["empty"]
    with pytest.raises(pcg.ArgumentError, match="4096 threads per block"):
        k.launch(1, 4096, ())  # refused before CUDA; now let it through to CUDA:
    lim = validate.kernel_limits(k)
    monkeypatch.setattr(lim, "threads", 1 << 20)
    monkeypatch.setattr(lim, "block", (1 << 20, 1 << 20, 1 << 20))
    with pytest.raises(pcg.CudaError, match=r"cuLaunchKernel \(cudaLaunchKernel\) failed"):
        k.launch((1, 1, 1), (4096, 1, 1), ())  # too many threads per block
    helpers["empty"].launch(1, 1, ())  # the next call is not blamed
    pcg.Stream().synchronize()
