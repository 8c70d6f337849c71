"""GPU tests for graphs: every node type, big and forked graphs, updates, capture, lifetime."""

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
    exe2.launch(stream)
    with pytest.raises(pcg.HostCallbackError, match="inside the host node") as info:
        exe2.synchronize()
    assert isinstance(info.value.__cause__, ValueError)
    exe2.launch(stream)
    with pytest.raises(pcg.HostCallbackError):
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


def test_thousand_node_chain(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    dev.zero()
    g = pcg.Graph()
    prev = ()
    for _ in range(1000):
        prev = (g.add_kernel(helpers["add_one"], 1, 1, (dev, 1), deps=prev),)
    assert len(g) == 1000 and len(g.edges) == 999
    exe = g.instantiate(upload_stream=stream)
    exe.launch(stream)
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 2000.0


def test_fork_join_sees_predecessors(helpers, stream):
    n = N
    a, b, c = (pcg.DeviceBuffer(4 * n) for _ in range(3))
    g = pcg.Graph()
    fa = g.add_kernel(helpers["fill"], 4, 256, (a, 2.0, n))
    fb = g.add_kernel(helpers["fill"], 4, 256, (b, 3.0, n))
    fc = g.add_kernel(helpers["fill"], 4, 256, (c, 10.0, n))
    # c = 2*a + c, then c = 3*b + c: joins both branches
    j1 = g.add_kernel(helpers["axpy"], 4, 256, (c, a, 2.0, n), deps=[fa, fc])
    g.add_kernel(helpers["axpy"], 4, 256, (c, b, 3.0, n), deps=[j1, fb])
    assert len(g.root_nodes) == 3
    g.instantiate().launch(stream)
    stream.synchronize()
    assert (c.to_numpy(np.float32) == 10 + 4 + 9).all()


def test_set_arg_changes_next_launch_without_recapture(helpers, stream):
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    node = g.add_kernel(helpers["fill"], 4, 256, (dev, 1.0, N))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 1.0
    with pcg.trace() as t:
        exe.set_arg(node, "v", 5.0)
    assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 5.0).all()
    other = pcg.DeviceBuffer(4 * N)
    exe.set_params(node, args={0: other, "v": 7.0}, grid=8)
    exe.launch(stream)
    stream.synchronize()
    assert (other.to_numpy(np.float32) == 7.0).all()
    assert node.params.args["v"] == 1.0  # the graph node is unchanged
    with pytest.raises(pcg.ArgumentError, match="'v'"):
        exe.set_arg(node, "v", "x")
    exe.launch(stream)
    stream.synchronize()
    assert (other.to_numpy(np.float32) == 7.0).all()  # a failed set left the slot intact


def test_exec_set_params_memcpy_memset_host_child_event(helpers, stream):
    src1, src2 = pcg.DeviceBuffer.from_array(arr(1)), pcg.DeviceBuffer.from_array(arr(2))
    dst = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    cp = g.add_memcpy(dst, src1)
    ms = g.add_memset(dst, 0, 4, element_size=4, deps=[cp])
    seen = []
    h = g.add_host(seen.append, args=("a",), deps=[ms])
    child = pcg.Graph()
    child.add_kernel(helpers["add_one"], 1, 1, (dst, 1))
    ch = g.add_child_graph(child, deps=[h])
    ev1, ev2 = pcg.Event(), pcg.Event()
    er = g.add_event_record(ev1, deps=[ch])
    exe = g.instantiate()
    exe.set_params(cp, src=src2)
    exe.set_params(ms, value=2.0)
    exe.set_params(h, fn=seen.append, args=("b",))
    child2 = pcg.Graph()
    child2.add_kernel(helpers["add_one"], 1, 1, (dst.ptr + 4 * 8, 1))
    exe.set_params(ch, graph=child2)
    exe.set_params(er, event=ev2)
    exe.launch(stream)
    exe.synchronize()
    out = dst.to_numpy(np.float32)
    expect = arr(2)
    expect[:4] = 2.0
    expect[8] += 1
    np.testing.assert_array_equal(out, expect)
    assert seen == ["b"] and ev2.query()


def test_enable_disable(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    dev.zero()
    g = pcg.Graph()
    k = g.add_kernel(helpers["add_one"], 1, 1, (dev, 1))
    exe = g.instantiate()
    exe.set_enabled(k, False)
    assert not exe.is_enabled(k)
    exe.launch(stream)
    exe.set_enabled(k, True)
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 1.0


def build_chain(helpers, dev, values):
    g = pcg.Graph()
    prev = ()
    for v in values:
        prev = (g.add_kernel(helpers["axpy"], 4, 256, (dev, dev, v, N), deps=prev),)
    return g


def test_whole_graph_update(helpers, stream):
    dev = pcg.DeviceBuffer.from_array(np.ones(N, np.float32))
    g1 = build_chain(helpers, dev, [1.0, 1.0])  # x *= 2 twice
    exe = g1.instantiate()
    g2 = build_chain(helpers, dev, [2.0, 2.0])  # x *= 3 twice
    exe.update(g2)
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 9.0).all()
    node_new = g2.nodes[0]
    exe.set_arg(node_new, "a", 0.0)  # nodes of the update's graph are accepted
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 27.0).all()

    g3 = build_chain(helpers, dev, [1.0, 1.0, 1.0])
    with pytest.raises(pcg.GraphExecUpdateError, match="topology changed") as info:
        exe.update(g3)
    assert "topology" in info.value.reason
    g4 = pcg.Graph()
    a = g4.add_kernel(helpers["axpy"], 4, 256, (dev, dev, 1.0, N))
    g4.add_memset(dev, 0, N, element_size=4, deps=[a])
    with pytest.raises(pcg.GraphExecUpdateError, match="node type changed; node: memset") as info:
        exe.update(g4)
    assert info.value.node.type == "memset"
    g5 = pcg.Graph()  # a different kernel in the same place is an allowed change
    a = g5.add_kernel(helpers["axpy"], 4, 256, (dev, dev, 1.0, N))
    g5.add_kernel(helpers["fill"], 4, 256, (dev, 1.0, N), deps=[a])
    exe.update(g5)
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 1.0).all()


def test_clone_find_and_dot(helpers, tmp_path):
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    a = g.add_kernel(helpers["fill"], (4, 1), (256, 1), (dev, 1.0, N))
    b = g.add_memset(dev, 0, 4, deps=[a])
    c = g.clone()
    ca = c.find(a)
    assert ca != a and ca.type == "kernel" and ca.kernel_name == "fill"
    assert c.find(b).dependencies == [ca]
    dot = g.to_dot()
    assert "kernel fill" in dot and "grid=4 block=256" in dot and "n0 -> n1" in dot
    path = tmp_path / "cuda.dot"
    g.debug_dot_print(path, verbose=True)
    assert "digraph" in path.read_text()
    exe = c.instantiate()
    exe.set_arg(ca, "v", 4.0)
    s = pcg.Stream()
    exe.launch(s)
    s.synchronize()
    assert dev.to_numpy(np.float32)[10] == 4.0


def test_remove_dependency_and_node(helpers):
    g = pcg.Graph()
    a = g.add_empty()
    b = g.add_empty()
    g.add_dependency(a, b)
    assert g.edges == [(a, b)]
    g.remove_dependency(a, b)
    assert g.edges == []
    g.remove_node(b)
    assert g.nodes == [a]


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
    assert "2.0f" in text and "test_gpu_graph.py" in text
    assert "cuGraphLaunch(exec0" in text


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
