"""CuPy and PyTorch meet pycudagraph on the GPU: their arrays, streams and DLPack as kernel
arguments, their kernels captured into one graph, and a PyTorch CUDA graph adopted and rebound."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1024


def test_torch_tensor_and_stream(helpers):
    torch = pytest.importorskip("torch")
    t = torch.ones(1000, device="cuda")
    s = torch.cuda.Stream()
    torch.cuda.synchronize()  # ones ran on PyTorch's stream, not ordered before s
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
    cp.cuda.Device().synchronize()  # the zeros ran on CuPy's stream, not ordered before cs
    start, end = pcg.Event(), pcg.Event()
    start.record(s)
    helpers["fill"].launch(256, 256, (a, 7.0, a.size), stream=s)
    end.record(s)
    end.synchronize()
    assert end.query() and start.elapsed_ms(end) >= 0.0
    assert float(a[-1]) == 7.0


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
    cp.cuda.Device().synchronize()  # fill (and the inputs) ran on CuPy's stream, not ordered
    exe.launch(stream)
    stream.synchronize()
    expect = (np.arange(N) + 1) * 2
    np.testing.assert_array_equal(cp.asnumpy(c), expect)
    np.testing.assert_array_equal(t.cpu().numpy(), expect)


def test_rebind_a_torch_cuda_graph_input():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 32)).cuda()
    static_in = torch.randn(16, 64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    tg = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.no_grad(), torch.cuda.graph(tg):
        static_out = model(static_in)
    tg.instantiate()
    g = pcg.Graph.wrap(tg.raw_cuda_graph(), owner=tg)
    exe = pcg.GraphExec.wrap(tg.raw_cuda_graph_exec(), owner=tg, graph=g)
    other = torch.randn(16, 64, device="cuda")
    assert exe.rebind(static_in, other) >= 1
    exe.launch(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    with torch.no_grad():
        torch.testing.assert_close(static_out, model(other))
