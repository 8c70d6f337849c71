"""GPU tests for the foundation: launches checked against numpy, interop, streams, events."""

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


def test_launch_device_buffer_and_stream(helpers, stream):
    n = 4096
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    bx, by = pcg.DeviceBuffer.from_array(x), pcg.DeviceBuffer.from_array(y)
    helpers["axpy"].launch(16, 256, (by, bx, 3.0, n), stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(by.to_numpy(np.float32), 3.0 * x + y, rtol=1e-5, atol=1e-6)  # FMA


def test_torch_tensor_and_stream(helpers):
    torch = pytest.importorskip("torch")
    t = torch.ones(1000, device="cuda")
    s = torch.cuda.Stream()
    helpers["scale"].launch(4, 256, (t, 4.0, 1000), stream=s)
    s.synchronize()
    assert torch.all(t == 4.0).item()
    assert pcg.Stream.wrap(s).ptr == s.cuda_stream


def test_dlpack_pointer():
    cp = pytest.importorskip("cupy")

    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = cp.zeros(8, dtype=cp.float32)
    assert pcg.device_pointer(OnlyDLPack(a[2:])) == a.data.ptr + 8


def test_cupy_stream_wrap_and_events(helpers):
    cp = pytest.importorskip("cupy")
    cs = cp.cuda.Stream(non_blocking=True)
    s = pcg.Stream.wrap(cs)
    assert s.ptr == cs.ptr
    a = cp.zeros(1 << 20, dtype=cp.float32)
    start, end = pcg.Event(), pcg.Event()
    start.record(s)
    helpers["fill"].launch(256, 256, (a, 7.0, a.size), stream=s)
    end.record(s)
    end.synchronize()
    assert end.query() and start.elapsed_ms(end) >= 0.0
    assert float(a[-1]) == 7.0


def test_pinned_buffer_and_async_copy(stream):
    pinned = pcg.PinnedBuffer(4096)
    view = pinned.array(np.float32)
    view[:] = np.arange(1024)
    dev = pcg.DeviceBuffer(4096)
    dev.copy_from(view, stream=stream)
    out = np.zeros(1024, np.float32)
    dev.copy_to(out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, np.arange(1024))


def test_compile_for_wrong_arch_fails_clearly():
    other = "sm_80" if pcg.program.device_arch() != "sm_80" else "sm_90"  # another major: no SASS compatibility
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
    with pytest.raises(pcg.CudaError, match="cuLaunchKernel failed"):
        k.launch((1, 1, 1), (4096, 1, 1), ())  # too many threads per block
    helpers["empty"].launch(1, 1, ())  # the next call is not blamed
    pcg.Stream().synchronize()


def test_device_buffer_errors():
    with pytest.raises(ValueError, match="positive size"):
        pcg.DeviceBuffer(0)
    b = pcg.DeviceBuffer(16)
    with pytest.raises(ValueError, match="32 bytes but the buffer only 16"):
        b.copy_from(np.zeros(8, np.float32))
    b.free()
    b.free()
