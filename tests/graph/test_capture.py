"""GPU tests for stream capture (own kernels, CuPy, PyTorch, failures, modes), trace and bucketed graphs."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1024


def arr(seed=0, n=N):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)

def test_capture_own_kernels_and_introspect(helpers, stream):
    dev = pcg.DeviceBuffer.from_array(np.zeros(N, np.float32))
    with pcg.capture(stream) as cap:
        helpers["fill"].launch(4, 256, (dev, 1.0, N), stream=stream)
        helpers["scale"].launch(4, 256, (dev, 3.0, N), stream=stream)
    assert cap.status == "none"
    nodes = cap.graph.nodes
    assert [n.type for n in nodes] == ["kernel", "kernel"]
    assert [n.kernel_name for n in nodes] == ["fill", "scale"]
    assert nodes[1].params.grid == (4, 1, 1)
    exe = cap.graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 3.0).all()


def test_capture_cupy_and_torch(helpers, stream):
    cp = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    a = cp.arange(N, dtype=cp.float32)
    b = cp.ones(N, dtype=cp.float32)
    c = cp.empty(N, dtype=cp.float32)
    t = torch.zeros(N, device="cuda")
    with pcg.capture(stream) as cap:
        with cp.cuda.Stream.from_external(stream):
            cp.add(a, b, out=c)
            cp.multiply(c, 2, out=c)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr)):
            t.add_(torch.as_tensor(c, device="cuda"))
        cap.keep(a, b, c, t)
    kinds = [n.type for n in cap.graph.nodes]
    assert kinds.count("kernel") >= 3
    names = [n.kernel_name for n in cap.graph.nodes if n.type == "kernel"]
    assert any("add" in nm for nm in names[:1]) and any("multiply" in nm for nm in names)
    assert any("at::native" in nm for nm in names), names
    exe = cap.graph.instantiate()
    c.fill(0)
    exe.launch(stream)
    stream.synchronize()
    expect = (np.arange(N) + 1) * 2
    np.testing.assert_array_equal(cp.asnumpy(c), expect)
    np.testing.assert_array_equal(t.cpu().numpy(), expect)


def test_capture_broken_by_sync_call(helpers, stream):
    dev = pcg.DeviceBuffer(4 * N)
    with pytest.raises(pcg.CaptureError, match="synchronous call") as info:
        with pcg.capture(stream):
            helpers["fill"].launch(4, 256, (dev, 1.0, N), stream=stream)
            stream.synchronize()  # synchronous: not allowed while capturing
    assert info.value.failed_call == "cudaStreamSynchronize"
    assert pcg.capture_status(stream) == "none"
    helpers["fill"].launch(4, 256, (dev, 2.0, N), stream=stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 2.0


def test_capture_python_exception_ends_capture(stream):
    with pytest.raises(pcg.CaptureError, match="KeyError") as info:
        with pcg.capture(stream):
            raise KeyError("oops")
    assert isinstance(info.value.__cause__, KeyError)
    assert pcg.capture_status(stream) == "none"


def test_capture_modes_and_legacy_refused(helpers, stream):
    for mode in ("global", "thread_local", "relaxed"):
        with pcg.capture(stream, mode=mode) as cap:
            helpers["empty"].launch(1, 1, (), stream=stream)
        assert len(cap.graph) == 1
    with pytest.raises(pcg.PyCudaGraphError, match="legacy default stream"):
        with pcg.capture(0):
            pass
    with pytest.raises(ValueError, match="capture mode"):
        pcg.capture(stream, mode="bogus")


def test_capture_into_existing_graph(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    g = pcg.Graph()
    first = g.add_kernel(helpers["fill"], 1, 1, (dev, 1.0, 1))
    with pcg.capture(stream, graph=g, deps=[first]) as cap:
        helpers["add_one"].launch(1, 1, (dev, 1), stream=stream)
    assert cap.graph is g and len(g) == 2
    assert g.nodes[1].dependencies == [first]
    g.instantiate().launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 2.0


def test_trace_records_calls_as_c(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    with pcg.trace() as t:
        g = pcg.Graph()
        a = g.add_kernel(helpers["fill"], 1, 32, (dev, 2.0, 1))
        g.add_kernel(helpers["fill"], 1, 32, (dev, 3.0, 1), deps=[a])
        exe = g.instantiate()
        exe.launch(stream)
    text = str(t)
    assert "cudaGraphCreate" in text
    assert "cuGraphAddKernelNode(&n1, g0, {n0}, 1, {func=fill, grid=(1,1,1), block=(32,1,1)" in text
    assert "2.0f" in text and "test_capture.py" in text
    assert "cuGraphLaunch(exec0" in text


def test_bucketed_graphs_pad_replay_slice_fallback(helpers):
    class Step:
        def __init__(self, size):
            self.size = size
            self.buf = pcg.DeviceBuffer(4 * size)
            self.host = np.zeros(size, np.float32)

        def load(self, x):
            padded = np.zeros(self.size, np.float32)
            padded[: len(x)] = x
            self.buf.copy_from(padded)

        def run(self, stream):
            helpers["scale"].launch(max(1, self.size // 256), 256, (self.buf, 2.0, self.size), stream=stream)

        def read(self, n):
            return self.buf.to_numpy(np.float32)[:n]

    pool = pcg.BucketedGraphs([64, 16, 32], Step)
    assert pool.buckets == [16, 32, 64] and pool.bucket_for(17) == 32 and pool.bucket_for(65) is None
    for n in (5, 16, 20, 9, 100):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(pool(n, x), 2 * x)
    s = pool.stats
    assert (s.hits, s.misses, s.captures, s.fallbacks) == (2, 2, 2, 1)
    assert s.per_bucket == {16: 3, 32: 1}
