"""GPU tests for lifetime: what graphs and execs keep alive, closing, collection during capture."""

import gc

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1024


def arr(seed=0, n=N):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)

def test_lifetime_graph_and_buffers_dropped(helpers, stream):
    g = pcg.Graph()
    dev = pcg.DeviceBuffer(4 * N)
    ptr = dev.ptr
    g.add_kernel(helpers["fill"], 4, 256, (dev, 6.0, N))
    exe = g.instantiate()
    del dev, g
    gc.collect()
    exe.launch(stream)
    stream.synchronize()
    out = np.zeros(N, np.float32)
    pcg._cuda.call(pcg._cuda.rt.cudaMemcpy, out.ctypes.data, ptr, 4 * N,
                   pcg._cuda.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost)
    assert (out == 6.0).all()


def test_graph_close_while_exec_lives(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 1, (dev, 2.0, 1))
    exe = g.instantiate()
    g.close()
    exe.set_arg(k, 1, 3.0)
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 3.0


def test_set_arg_replaced_buffer_kept_until_sync(helpers, stream):
    import weakref
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 1, (pcg.DeviceBuffer(4), 2.0, 1))
    exe = g.instantiate()
    only_exec = pcg.DeviceBuffer(4)  # referenced by the exec alone, not by the graph
    exe.set_arg(k, 0, only_exec)
    helpers["spin"].launch(1, 1, (50_000_000,), stream=stream)
    exe.launch(stream)
    ref = weakref.ref(only_exec)
    exe.set_arg(k, 0, pcg.DeviceBuffer(4))
    del only_exec
    gc.collect()
    assert ref() is not None  # the queued launch may still write it
    exe.synchronize()
    gc.collect()
    assert ref() is None


def test_garbage_collected_during_capture_does_not_break_it(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    garbage = pcg.DeviceBuffer(1024)
    cycle = [garbage]
    cycle.append(cycle)  # only the cycle collector frees it
    del garbage, cycle
    with pcg.capture(stream) as cap:
        gc.collect()  # runs cudaFree's finalizer inside the capture: deferred
        helpers["fill"].launch(1, 1, (dev, 9.0, 1), stream=stream)
    assert pcg._lifetime._deferred == []
    cap.graph.instantiate().launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 9.0


def test_a_dropped_graph_frees_what_it_kept_without_the_collector(helpers, stream):
    import weakref
    gc.collect()
    gc.disable()  # nothing below may wait for the cyclic collector
    try:
        g = pcg.Graph()
        dev = pcg.DeviceBuffer(4 * N)
        node = g.add_kernel(helpers["fill"], 4, 256, (dev, 6.0, N))
        exe = g.instantiate()
        kept, graph = weakref.ref(dev), weakref.ref(g)
        del dev, g
        assert graph() is not None and kept() is not None  # the exec keeps both
        exe.set_arg(node, 1, 7.0)  # its node still names the exec's node
        exe.launch(stream)
        stream.synchronize()
        del exe
        assert graph() is None, "the graph outlived its last exec and reference"
        assert node.graph is None
        with pytest.raises(pcg.ClosedError, match="was collected"):
            node.dependencies
        del node  # (a node object keeps its own arguments)
        assert kept() is None, "the buffer its node pointed at outlived the graph"
    finally:
        gc.enable()
