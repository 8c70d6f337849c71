"""GPU tests: free() of a buffer a live graph or exec still uses is deferred, never fatal.

The buffer object refuses every new use at once; the ``cudaFree`` waits until the last
graph or exec that points at it lets go. The context stays healthy throughout.
"""

import gc

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph import _lifetime
from pycudagraph._cuda import rt
from tests.support.lifetime_util import small_graph_works

pytestmark = pytest.mark.gpu

N = 256


def _allocated(addr: int) -> bool:
    """Whether ``addr`` is still memory CUDA knows (``cudaPointerGetAttributes``)."""
    err, attrs = rt.cudaPointerGetAttributes(addr)
    rt.cudaGetLastError()
    return not err and int(attrs.type) != int(rt.cudaMemoryType.cudaMemoryTypeUnregistered)


def _graph(helpers, a, out, value=5.0):
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (a, value, N))
    c = g.add_kernel(helpers["copy"], 1, 256, (out, a, N), deps=[k])
    return g, k, c


def test_free_of_unused_buffer_is_immediate(helpers):
    buf = pcg.DeviceBuffer(4 * N)
    addr = buf.ptr
    assert _allocated(addr)
    buf.free()
    assert not _allocated(addr)
    assert buf not in _lifetime.deferred_frees()
    assert "deferred" not in repr(buf)


def test_free_while_exec_uses_it_is_deferred(helpers):
    s = pcg.Stream()
    a, out = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    addr = a.ptr
    g, _, _ = _graph(helpers, a, out)
    exe = g.instantiate()
    a.free()
    assert _allocated(addr)  # deferred: the exec still launches on it
    assert a in _lifetime.deferred_frees()
    assert "cudaFree deferred: used by" in repr(a) and "GraphExec" in repr(a)
    with pytest.raises(pcg.ClosedError, match="was freed"):
        a.to_numpy()
    exe.launch(s)
    s.synchronize()
    assert (out.to_numpy(np.float32) == 5.0).all()  # no illegal address, right result
    g.close()
    assert _allocated(addr)  # the exec still holds it
    exe.close()
    assert not _allocated(addr)
    assert a not in _lifetime.deferred_frees()
    small_graph_works(helpers)


def test_free_of_set_arg_value_waits_for_synchronize(helpers):
    s = pcg.Stream()
    a0, a, b, out = (pcg.DeviceBuffer(4 * N) for _ in range(4))
    g, k, c = _graph(helpers, a0, out)
    exe = g.instantiate()
    exe.set_arg(k, 0, a)  # a is held by the exec alone (its own argument pack)
    exe.set_arg(c, 1, a)
    addr = a.ptr
    a.free()
    assert _allocated(addr)
    exe.launch(s)
    exe.set_arg(k, 0, b)  # replaced: a queued launch may still read a
    exe.set_arg(c, 1, b)
    assert _allocated(addr)
    exe.synchronize()  # now nothing can read it
    assert not _allocated(addr)
    exe.launch(s)
    s.synchronize()
    assert (out.to_numpy(np.float32) == 5.0).all()
    small_graph_works(helpers)


def test_free_waits_for_node_removal(helpers):
    a = pcg.DeviceBuffer(4 * N)
    addr = a.ptr
    g = pcg.Graph()
    m = g.add_memset(a, 0, 4 * N)
    g.add_empty()
    a.free()
    assert _allocated(addr)
    g.remove_node(m)
    assert not _allocated(addr)
    small_graph_works(helpers)


def test_free_waits_for_exec_and_graph_collection(helpers):
    s = pcg.Stream()
    a, out = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    addr = a.ptr
    g, k, c = _graph(helpers, a, out, 7.0)
    exe = g.instantiate()
    exe.launch(s)
    a.free()
    assert _allocated(addr)
    del g, k, c, exe
    gc.collect()
    assert not _allocated(addr)
    s.synchronize()
    assert (out.to_numpy(np.float32) == 7.0).all()
    small_graph_works(helpers)


def test_event_close_waits_for_its_graphs(helpers):
    s = pcg.Stream()
    ev = pcg.Event(timing=False)
    g = pcg.Graph()
    g.add_event_record(ev)
    exe = g.instantiate()
    ev.close()
    with pytest.raises(pcg.ClosedError, match="Event .* was closed"):
        ev.query()
    assert ev._fin.alive  # cudaEventDestroy deferred
    exe.launch(s)
    s.synchronize()
    exe.close()
    g.close()
    assert not ev._fin.alive
    small_graph_works(helpers)


def test_pinned_free_waits_for_numpy_views(helpers):
    pin = pcg.PinnedBuffer(4 * N)
    view = pin.array(np.float32)
    view[:] = 2.0
    pin.free()
    assert pin._fin.alive and "numpy view" in repr(pin)
    assert (view == 2.0).all()  # still valid memory
    del view
    gc.collect()
    assert not pin._fin.alive
    small_graph_works(helpers)


def test_pinned_free_waits_for_memcpy_node(helpers):
    s = pcg.Stream()
    pin = pcg.PinnedBuffer(4 * N)
    pin.array(np.float32)[:] = 6.0
    gc.collect()
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    g.add_memcpy(dev, pin)
    exe = g.instantiate()
    pin.free()
    assert pin._fin.alive
    exe.launch(s)
    s.synchronize()
    assert (dev.to_numpy(np.float32) == 6.0).all()
    exe.close()
    g.close()
    assert not pin._fin.alive
    small_graph_works(helpers)


def test_captured_launches_keep_their_buffers(helpers):
    s = pcg.Stream()
    a, out, tmp = (pcg.DeviceBuffer(4 * N) for _ in range(3))
    addr = a.ptr
    helpers["fill"].launch(1, 256, (tmp, 0.0, N), stream=s)  # kernels loaded before capture
    helpers["copy"].launch(1, 256, (a, tmp, N), stream=s)
    s.synchronize()
    with pcg.capture(s) as cap:
        helpers["fill"].launch(1, 256, (tmp, 4.0, N), stream=s)
        helpers["copy"].launch(1, 256, (a, tmp, N), stream=s)
        helpers["copy"].launch(1, 256, (out, a, N), stream=s)
    exe = cap.graph.instantiate()
    del tmp  # only the captured graph points at it now
    gc.collect()
    a.free()
    assert _allocated(addr)  # deferred: the captured graph and its exec use it
    assert "Graph" in repr(a)
    exe.launch(s)
    s.synchronize()
    assert (out.to_numpy(np.float32) == 4.0).all()
    exe.close()
    cap.graph.close()
    assert not _allocated(addr)
    small_graph_works(helpers)
