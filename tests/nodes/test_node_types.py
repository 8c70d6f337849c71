"""Every node type on the GPU: kernel, memcpy, memset (1D, 2D), host, child graph, empty,
event record and wait, graph memory alloc and free; auto-free-on-launch."""

import gc

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1024


def arr(seed=0, n=N):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)

def test_kernel_memcpy_memset_nodes(helpers, stream):
    x = arr(1)
    host_in = pcg.PinnedBuffer(4 * N)
    host_in.array(np.float32)[:] = x
    host_out = np.zeros(N, np.float32)
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    h2d = g.add_memcpy(dev, host_in)
    k = g.add_kernel(helpers["scale"], 4, 256, (dev, 2.0, N), deps=[h2d])
    ms = g.add_memset(dev, 0, 16, element_size=4, deps=[k])  # zero the first 16 floats
    d2h = g.add_memcpy(host_out, dev, deps=[ms])
    assert [n.type for n in g.nodes] == ["memcpy", "kernel", "memset", "memcpy"]
    assert g.root_nodes == [h2d] and set(g.edges) == {(h2d, k), (k, ms), (ms, d2h)}
    assert k.dependencies == [h2d] and k.dependents == [ms]
    assert h2d.params.kind == "host->device" and d2h.params.kind == "device->host"
    assert k.params.args == {"y": dev.ptr, "a": 2.0, "n": N} and k.kernel_name == "scale"
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    expect = 2 * x
    expect[:16] = 0
    np.testing.assert_array_equal(host_out, expect)


def test_memset_2d_and_float_value(stream):
    rows, cols, pitch = 4, 8, 64
    dev = pcg.DeviceBuffer(rows * pitch)
    dev.zero()
    g = pcg.Graph()
    g.add_memset(dev, 1.5, cols, element_size=4, height=rows, pitch=pitch)
    g.instantiate().launch(stream)
    stream.synchronize()
    out = dev.to_numpy(np.float32).reshape(rows, pitch // 4)
    assert (out[:, :cols] == 1.5).all() and (out[:, cols:] == 0).all()
    with pytest.raises(ValueError, match="element_size must be 1, 2 or 4"):
        g.add_memset(dev, 0, 4, element_size=3)
    with pytest.raises(ValueError, match="does not fit"):
        g.add_memset(dev, 0, 1000, element_size=4)


def test_host_node_runs_and_errors_are_raised(stream):
    seen = []
    g = pcg.Graph()
    g.add_host(seen.append, args=(42,))
    exe = g.instantiate()
    exe.launch(stream)
    exe.synchronize()
    assert seen == [42]

    def boom():
        raise ValueError("inside the host node")

    g2 = pcg.Graph()
    g2.add_host(boom)
    exe2 = g2.instantiate()
    with pytest.raises(pcg.HostCallbackError, match="inside the host node") as info:
        exe2.launch(stream)  # at the launch if the host node already ran (an idle GPU
        exe2.synchronize()   # runs it at once), else at the synchronize
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(pcg.HostCallbackError):  # at the launch if the host node already ran,
        exe2.launch(stream)                    # else at the next synchronize
        stream.synchronize()
    exe.launch(stream)  # an unrelated exec is not blamed
    exe.synchronize()


def test_child_graph_empty_and_events(helpers, stream):
    dev = pcg.DeviceBuffer(4 * N)
    dev.zero()
    child = pcg.Graph()
    a = child.add_kernel(helpers["add_one"], 4, 256, (dev, N))
    child.add_kernel(helpers["add_one"], 4, 256, (dev, N), deps=[a])
    g = pcg.Graph()
    c1 = g.add_child_graph(child)
    e = g.add_empty(deps=[c1])
    ev = pcg.Event()
    rec = g.add_event_record(ev, deps=[e])
    g.add_child_graph(child, deps=[rec])
    assert [n.type for n in g.nodes][:3] == ["child_graph", "empty", "event_record"]
    assert len(c1.child.nodes) == 2
    del child
    gc.collect()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert ev.query()
    assert (dev.to_numpy(np.float32) == 4).all()


def test_event_wait_node(helpers):
    s1, s2 = pcg.Stream(), pcg.Stream()
    dev = pcg.DeviceBuffer(4)
    dev.zero()
    ev = pcg.Event(timing=False)
    helpers["spin"].launch(1, 1, (20_000_000,), stream=s1)
    helpers["fill"].launch(1, 1, (dev, 5.0, 1), stream=s1)
    ev.record(s1)
    g = pcg.Graph()
    w = g.add_event_wait(ev)
    g.add_kernel(helpers["add_one"], 1, 1, (dev, 1), deps=[w])
    g.instantiate().launch(s2)
    s2.synchronize()
    assert dev.to_numpy(np.float32)[0] == 6.0


def test_mem_alloc_and_free_nodes(helpers, stream):
    out = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    alloc = g.add_mem_alloc(4 * N)
    assert alloc.nbytes == 4 * N and alloc.ptr
    fill = g.add_kernel(helpers["fill"], 4, 256, (alloc.ptr, 3.0, N), deps=[alloc])
    cp = g.add_memcpy(out, alloc.ptr, nbytes=4 * N, deps=[fill])
    free = g.add_mem_free(alloc, deps=[cp])
    assert free.type == "mem_free" and free.params["ptr"] == alloc.ptr
    exe = g.instantiate()
    for _ in range(3):
        exe.launch(stream)
    stream.synchronize()
    assert (out.to_numpy(np.float32) == 3.0).all()


def test_auto_free_on_launch_relaunches_a_graph_that_keeps_its_allocation(helpers, stream):
    """cudaGraphInstantiateFlagAutoFreeOnLaunch: an allocation the graph never frees is
    freed before each relaunch, so the exec can be launched again and again."""
    n = 256
    out = pcg.DeviceBuffer(4 * n)
    g = pcg.Graph()
    alloc = g.add_mem_alloc(4 * n)
    fill = g.add_kernel(helpers["fill"], 1, n, (alloc.ptr, 7.0, n), deps=[alloc])
    g.add_memcpy(out, alloc.ptr, nbytes=4 * n, deps=[fill])
    exe = g.instantiate(auto_free_on_launch=True)
    for _ in range(3):
        exe.launch(stream)
    stream.synchronize()
    assert (out.to_numpy(np.float32) == 7.0).all()
    # the last launch's allocation is still live: free it outside the graph
    pcg._cuda.call(pcg._cuda.rt.cudaFreeAsync, alloc.ptr, stream.handle)
    stream.synchronize()
