"""GPU tests: closed, destroyed, freed and removed objects raise ClosedError before any raw call.

Each case asserts the exception type, a ``match=`` on what happened, that the trace saw no
raw call made with the dead handle, and that a small graph still launches correctly.
"""

import numpy as np
import pytest

import pycudagraph as pcg
from tests.support.lifetime_util import small_graph_works

pytestmark = pytest.mark.gpu

N = 256


def _no_call(fn, match, *calls):
    """``fn()`` raises ClosedError matching ``match`` and makes none of ``calls``."""
    with pcg.trace() as t:
        with pytest.raises(pcg.ClosedError, match=match):
            fn()
    made = {r.api for r in t.records}
    assert not made & set(calls), made


def test_closed_stream(helpers):
    s = pcg.Stream()
    g = pcg.Graph()
    buf = pcg.DeviceBuffer(4 * N)
    g.add_kernel(helpers["fill"], 1, 256, (buf, 1.0, N))
    exe = g.instantiate()
    s.close()
    s.close()  # idempotent
    assert s.closed and "closed" in repr(s)
    _no_call(lambda: exe.launch(s), r"Stream 0x[0-9a-f]+ was closed", "cuGraphLaunch")
    _no_call(lambda: helpers["fill"].launch(1, 256, (buf, 1.0, N), stream=s),
             r"Stream 0x[0-9a-f]+ was closed", "cuLaunchKernel")
    _no_call(s.synchronize, "was closed", "cudaStreamSynchronize")
    _no_call(s.query, "was closed", "cudaStreamQuery")
    _no_call(lambda: s.ptr, "was closed")
    _no_call(lambda: pcg.capture(s).__enter__(), "was closed", "cudaStreamBeginCapture")
    _no_call(lambda: buf.copy_from(np.zeros(N, np.float32), stream=s), "was closed",
             "cudaMemcpyAsync")
    _no_call(lambda: exe.upload(s), "was closed", "cudaGraphUpload")
    _no_call(lambda: pcg.Event().record(s), "Stream .* was closed", "cudaEventRecord")
    assert s == s and hash(s) == hash(s)
    small_graph_works(helpers)


def test_closed_event(helpers):
    ev = pcg.Event()
    ev.close()
    ev.close()
    _no_call(lambda: ev.record(pcg.Stream()), r"Event 0x[0-9a-f]+ was closed", "cudaEventRecord")
    _no_call(ev.synchronize, "Event .* was closed", "cudaEventSynchronize")
    _no_call(ev.query, "was closed", "cudaEventQuery")
    _no_call(lambda: pcg.Event().elapsed_ms(ev), "Event .* was closed", "cudaEventElapsedTime")
    g = pcg.Graph()
    _no_call(lambda: g.add_event_record(ev), "Event .* was closed", "cudaGraphAddEventRecordNode")
    _no_call(lambda: g.add_event_wait(ev), "Event .* was closed", "cudaGraphAddEventWaitNode")
    _no_call(lambda: pcg.Stream().wait(ev), "Event .* was closed", "cudaStreamWaitEvent")
    small_graph_works(helpers)


def test_closed_exec(helpers):
    s = pcg.Stream()
    buf = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (buf, 1.0, N))
    m = g.add_memset(buf, 0, 4 * N, deps=[k])
    exe = g.instantiate()
    exe.set_arg(k, 1, 2.0)  # an exec-owned pack exists before the close
    exe.close()
    exe.close()
    assert "closed" in repr(exe)
    msg = r"GraphExec 0x[0-9a-f]+ was closed"
    _no_call(lambda: exe.launch(s), msg, "cuGraphLaunch")
    _no_call(lambda: exe.set_arg(k, 1, 3.0), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_params(k, grid=2), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_params(m, value=1), msg, "cudaGraphExecMemsetNodeSetParams")
    _no_call(lambda: exe.upload(s), msg, "cudaGraphUpload")
    _no_call(lambda: exe.update(g), msg, "cuGraphExecUpdate")
    _no_call(lambda: exe.set_enabled(k, False), msg, "cudaGraphNodeSetEnabled")
    _no_call(lambda: exe.is_enabled(k), msg, "cudaGraphNodeGetEnabled")
    _no_call(lambda: exe.handle, msg)
    exe.synchronize()  # nothing to wait for: allowed
    assert g.instantiate() is not None  # the graph is untouched
    small_graph_works(helpers)


def test_closed_graph_and_its_nodes(helpers):
    buf = pcg.DeviceBuffer(4 * N)
    other = pcg.Graph()
    other.add_empty()
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (buf, 1.0, N))
    m = g.add_memset(buf, 0, 4 * N, deps=[k])
    g.close()
    g.close()
    assert "closed" in repr(g)
    msg = r"Graph 0x[0-9a-f]+ was closed"
    _no_call(lambda: g.add_kernel(helpers["fill"], 1, 1, (buf, 1.0, 1)), msg, "cuGraphAddKernelNode")
    _no_call(lambda: g.add_kernel(helpers["fill"], 1, 1, (buf, 1.0, 1), deps=[k]), "Graph",
             "cuGraphAddKernelNode")
    _no_call(lambda: g.add_empty(), msg, "cudaGraphAddEmptyNode")
    _no_call(lambda: g.add_memset(buf, 0, 4), msg, "cudaGraphAddMemsetNode")
    _no_call(lambda: g.add_host(print), msg, "cudaGraphAddHostNode")
    _no_call(lambda: g.instantiate(), msg, "cudaGraphInstantiateWithParams")
    _no_call(lambda: g.nodes, msg, "cudaGraphGetNodes")
    _no_call(lambda: g.edges, msg, "cudaGraphGetEdges")
    _no_call(lambda: len(g), msg, "cudaGraphGetNodes")
    _no_call(lambda: g.clone(), msg, "cudaGraphClone")
    _no_call(lambda: g.add_dependency(k, m), msg, "cudaGraphAddDependencies")
    _no_call(lambda: g.remove_node(m), msg, "cudaGraphDestroyNode")
    _no_call(lambda: g.handle, msg)
    _no_call(lambda: g.to_dot(), msg, "cudaGraphGetNodes")
    _no_call(lambda: other.add_child_graph(g), msg, "cudaGraphAddChildGraphNode")
    _no_call(lambda: pcg.capture(pcg.Stream(), graph=g).__enter__(), msg,
             "cudaStreamBeginCaptureToGraph")
    # its nodes were destroyed with it
    node_msg = r"belongs to Graph 0x[0-9a-f]+, which was closed"
    _no_call(lambda: m.dependencies, node_msg, "cudaGraphNodeGetDependencies")
    _no_call(lambda: m.params, node_msg, "cudaGraphMemsetNodeGetParams")
    _no_call(lambda: k.set_params(grid=2), node_msg, "cuGraphKernelNodeSetParams")
    _no_call(lambda: m.set_params(value=3), node_msg, "cudaGraphMemsetNodeSetParams")
    _no_call(lambda: other.add_empty(deps=[m]), "belongs to Graph|another graph",
             "cudaGraphAddEmptyNode")
    assert "removed" in repr(m)  # repr never raises
    small_graph_works(helpers)


def test_graph_closed_while_exec_lives_then_exec_closed(helpers):
    s = pcg.Stream()
    buf = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (buf, 1.0, N))
    m = g.add_memset(buf, 0, 4, deps=[k])
    exe = g.instantiate()
    g.close()
    with pytest.raises(pcg.ClosedError, match="Graph .* was closed"):
        g.add_empty()
    exe.set_params(m, value=0)  # the exec's per-node updates still work
    exe.set_arg(k, 1, 4.0)
    exe.launch(s)
    s.synchronize()
    assert (buf.to_numpy(np.float32)[1:] == 4.0).all()
    assert m.params.count == 4  # the raw graph is kept while the exec lives
    exe.close()  # the last exec: the closed graph is destroyed now
    with pytest.raises(pcg.ClosedError, match="belongs to Graph .* which was closed"):
        m.params
    small_graph_works(helpers)


def test_removed_node(helpers):
    s = pcg.Stream()
    buf, out = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    a = g.add_kernel(helpers["fill"], 1, 256, (buf, 2.0, N))
    b = g.add_kernel(helpers["copy"], 1, 256, (out, buf, N), deps=[a])
    e = g.add_empty(deps=[a])
    exe = g.instantiate()
    exe.set_arg(b, 2, N)  # b's exec pack exists before the removal
    g.remove_node(b)
    g.remove_node(e)
    msg = r"KernelNode 0x[0-9a-f]+ was removed from its graph"
    _no_call(lambda: b.dependencies, msg, "cudaGraphNodeGetDependencies")
    _no_call(lambda: b.set_params(grid=2), msg, "cuGraphKernelNodeSetParams")
    _no_call(lambda: g.add_kernel(helpers["fill"], 1, 1, (buf, 1.0, 1), deps=[b]), msg,
             "cuGraphAddKernelNode")
    _no_call(lambda: g.add_kernel(helpers["fill"], 1, 1, (buf, 1.0, 1), deps=[a, b]), msg,
             "cuGraphAddKernelNode")
    _no_call(lambda: g.add_empty(deps=[e]), r"EmptyNode .* was removed", "cudaGraphAddEmptyNode")
    _no_call(lambda: g.remove_node(b), msg, "cudaGraphDestroyNode")
    _no_call(lambda: g.add_dependency(a, b), msg, "cudaGraphAddDependencies")
    _no_call(lambda: exe.set_arg(b, 2, N), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_params(b, grid=1), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_enabled(b, False), msg, "cudaGraphNodeSetEnabled")
    assert "removed" in repr(b)
    assert b not in g.nodes and e not in g.nodes and a in g.nodes
    exe.launch(s)  # the exec keeps running its copy
    s.synchronize()
    assert (out.to_numpy(np.float32) == 2.0).all()
    small_graph_works(helpers)


def test_child_graph_of_removed_or_closed_node(helpers):
    inner = pcg.Graph()
    inner.add_empty()
    g = pcg.Graph()
    c = g.add_child_graph(inner)
    child = c.child
    assert len(child.nodes) == 1
    g.remove_node(c)
    with pytest.raises(pcg.ClosedError, match="ChildGraphNode .* was removed from its graph"):
        child.nodes
    g2 = pcg.Graph()
    child2 = g2.add_child_graph(inner).child
    g2.close()
    with pytest.raises(pcg.ClosedError, match="which was closed"):
        child2.add_empty()
    small_graph_works(helpers)


def _freed_buffer_diagnosis(exe, k, s, good, got, made) -> str:
    """What a failed launch check says: how the exec was made, whether its node is enabled,
    and what a second launch writes after the node's parameters are set again."""
    from pycudagraph.graph import exec_reuse
    enabled = exe.is_enabled(k)
    good.zero()
    exe.launch(s)
    s.synchronize()
    again = good.to_numpy(np.float32)[:4]
    exe.set_params(k, args=(good, 1.0, N))
    exe.launch(s)
    s.synchronize()
    after_set = good.to_numpy(np.float32)[:4]
    return (f"{got[:4]} after the launch; the exec 0x{int(exe.handle):x} was made by "
            f"{[r.api for r in made.records]}; node enabled in it: {enabled}; relaunched: "
            f"{again}; after set_params: {after_set}; reuse: {exec_reuse.stats()}")


def test_freed_device_buffer(helpers):
    s = pcg.Stream()
    buf = pcg.DeviceBuffer(4 * N)
    good = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (good, 1.0, N))
    with pcg.trace() as made:  # instantiated, or a released exec updated (exec reuse)
        exe = g.instantiate()
    buf.free()
    buf.free()  # idempotent
    assert buf.ptr == 0 and "freed" in repr(buf)
    msg = r"DeviceBuffer 0x[0-9a-f]+ \(1024 bytes\) was freed"
    _no_call(lambda: helpers["fill"].launch(1, 256, (buf, 1.0, N), stream=s), msg, "cuLaunchKernel")
    _no_call(lambda: g.add_kernel(helpers["fill"], 1, 256, (buf, 1.0, N)), msg,
             "cuGraphAddKernelNode")
    _no_call(lambda: exe.set_arg(k, 0, buf), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_arg(k, "y", buf), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_params(k, args={0: buf}), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: exe.set_params(k, args=(buf, 1.0, N)), msg, "cuGraphExecKernelNodeSetParams")
    _no_call(lambda: k.set_params(args={0: buf}), msg, "cuGraphKernelNodeSetParams")
    _no_call(lambda: g.add_memcpy(buf, good), msg, "cudaGraphAddMemcpyNode1D")
    _no_call(lambda: g.add_memcpy(good, buf), msg, "cudaGraphAddMemcpyNode1D")
    _no_call(lambda: g.add_memset(buf, 0, 16), msg, "cudaGraphAddMemsetNode")
    _no_call(lambda: buf.copy_from(np.zeros(N, np.float32)), msg, "cudaMemcpy")
    _no_call(lambda: buf.to_numpy(), msg, "cudaMemcpy")
    _no_call(lambda: buf.zero(), msg, "cudaMemset")
    _no_call(lambda: pcg.device_pointer(buf), msg)
    _no_call(lambda: buf.__cuda_array_interface__, msg)
    _no_call(lambda: int(buf), msg)
    # the exec's slot was left intact by the refused set_arg
    exe.launch(s)
    s.synchronize()
    got = good.to_numpy(np.float32)
    assert (got == 1.0).all(), _freed_buffer_diagnosis(exe, k, s, good, got, made)
    small_graph_works(helpers)


def test_freed_pinned_buffer(helpers):
    pin = pcg.PinnedBuffer(4 * N)
    dev = pcg.DeviceBuffer(4 * N)
    pin.free()
    msg = r"PinnedBuffer 0x[0-9a-f]+ \(1024 bytes\) was freed"
    g = pcg.Graph()
    _no_call(lambda: g.add_memcpy(dev, pin), msg, "cudaGraphAddMemcpyNode1D")
    _no_call(lambda: g.add_memcpy(pin, dev), msg, "cudaGraphAddMemcpyNode1D")
    _no_call(lambda: pin.array(), msg)
    _no_call(lambda: pcg.host_pointer(pin), msg)
    small_graph_works(helpers)


def test_closed_error_is_value_error_and_pickles():
    import pickle
    err = pcg.ClosedError("Stream 0x10", "was closed")
    assert isinstance(err, ValueError) and isinstance(err, pcg.PyCudaGraphError)
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) == "Stream 0x10 was closed"


def test_stream_closed_after_a_launch(helpers):
    s = pcg.Stream()
    buf = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (buf, 1.0, N))
    exe = g.instantiate()
    helpers["spin"].launch(1, 1, (20_000_000,), stream=s)
    exe.launch(s)
    s.close()  # queued work still completes (CUDA's rule)
    for i in range(300):  # enough replacements to run the retire check on the last stream
        exe.set_arg(k, 0, pcg.DeviceBuffer(16) if i % 2 else buf)
    exe.synchronize()  # the last stream was closed: waits for the device instead
    assert (buf.to_numpy(np.float32) == 1.0).all()
    small_graph_works(helpers)


def test_update_source_graph_closed_before_pairing(helpers):
    s = pcg.Stream()
    a, b = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g1 = pcg.Graph()
    g1.add_kernel(helpers["fill"], 1, 256, (a, 1.0, N))
    exe = g1.instantiate()
    g2 = pcg.Graph()
    k2 = g2.add_kernel(helpers["fill"], 1, 256, (b, 2.0, N))
    exe.update(g2)
    g2.close()  # its raw graph is kept until the exec pairs its nodes
    with pytest.raises(pcg.ClosedError, match="Graph .* was closed"):
        exe.update(g2)
    exe.set_arg(k2, "v", 3.0)  # pairs the nodes now; g2 is destroyed afterwards
    assert g2.table.dead == "was closed"
    exe.launch(s)
    s.synchronize()
    assert (b.to_numpy(np.float32) == 3.0).all()
    small_graph_works(helpers)
