"""Stream capture on the GPU: own kernels captured and introspected, failures (a synchronous
call, a Python exception), capture modes, capture into an existing graph. CuPy and PyTorch
captures: tests/frameworks/test_interop.py."""

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
