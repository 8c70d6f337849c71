"""The compiled hot path on a GPU: results, errors, trace and threads, with it on or off.

The whole GPU suite is run once more with ``PYCUDAGRAPH_NO_NATIVE=1`` (the ctypes path);
these tests name which path they expect only where it matters.
"""

import threading

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph._cuda import fast

pytestmark = pytest.mark.gpu

N = 256


def values(buf, n=N):
    return buf.to_numpy(np.float32)[:n]


def test_the_compiled_path_runs_unless_disabled(helpers, stream, monkeypatch):
    """After one checked call in this thread, the compiled route makes the launches: the
    ctypes route's function is not called (it is, once, with PYCUDAGRAPH_NO_NATIVE=1)."""
    dev = pcg.DeviceBuffer(4 * N)
    fill = helpers["fill"]
    fill.launch(1, N, (dev, 1.0, N), stream=stream)
    stream.synchronize()
    made, real = [], fast._f.launch_kernel
    monkeypatch.setattr(fast._f, "launch_kernel", lambda *a: made.append(a) or real(*a))
    fill.launch(1, N, (dev, 3.0, N), stream=stream)
    stream.synchronize()
    assert (values(dev) == 3.0).all()
    compiled = fast.native_status().startswith("compiled")
    assert len(made) == (0 if compiled else 1), fast.native_status()


def test_eager_launch_build_set_arg_and_launch_give_numpy_results(helpers, stream):
    x = pcg.DeviceBuffer.from_array(np.arange(N, dtype=np.float32))
    y = pcg.DeviceBuffer(4 * N)
    helpers["fill"].launch(1, N, (y, 1.0, N), stream=stream)      # eager
    g = pcg.Graph()
    a = g.add_kernel(helpers["axpy"], 1, N, (y, x, 2.0, N))          # y += 2 x
    b = g.add_kernel(helpers["scale"], (1, 1, 1), (N,), [y, 0.5, N], deps=(a,))  # y *= 0.5
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    expect = (1.0 + 2.0 * np.arange(N, dtype=np.float32)) * 0.5
    np.testing.assert_allclose(values(y), expect)
    exe.set_arg(b, 1, 2.0)           # a float: the compiled one-argument update
    exe.set_arg(a, "a", np.float32(1.0))  # by name: resolved in Python, then compiled
    exe.launch(stream)
    stream.synchronize()
    expect = (expect + np.arange(N, dtype=np.float32)) * 2.0
    np.testing.assert_allclose(values(y), expect)
    assert b.params.args == {"y": y.ptr, "a": 0.5, "n": N}  # the graph's node is unchanged


def test_set_arg_pointer_swap_retires_the_old_buffer(helpers, stream):
    one, two = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    node = g.add_kernel(helpers["fill"], 1, N, (one, 4.0, N))
    exe = g.instantiate()
    exe.set_arg(node, 0, two)
    exe.launch(stream)
    exe.set_arg(node, 0, one)        # `two` may still be read by the queued launch
    assert any(r is two or (isinstance(r, tuple) and two in r) for r in exe._ledger.retired)
    exe.launch(stream)
    exe.synchronize()
    assert (values(one) == 4.0).all() and (values(two) == 4.0).all()


def test_errors_are_as_clear_as_the_python_path(helpers, stream):
    fill = helpers["fill"]
    dev = pcg.DeviceBuffer(4 * N)
    with pytest.raises(pcg.ArgumentError, match=r"parameter 2 'n' \(int\) cannot take 1.5"):
        fill.launch(1, N, (dev, 1.0, 1.5), stream=stream)
    with pytest.raises(pcg.ArgumentError, match="takes 3 arguments, 2 given"):
        fill.launch(1, N, (dev, 1.0), stream=stream)
    g = pcg.Graph()
    with pytest.raises(pcg.ArgumentError, match=r"parameter 1 'v' \(float\)"):
        g.add_kernel(fill, 1, N, (dev, "x", N))
    node = g.add_kernel(fill, 1, N, (dev, 1.0, N))
    other = pcg.Graph()
    with pytest.raises(ValueError, match="belongs to another graph"):
        other.add_kernel(fill, 1, N, (dev, 1.0, N), deps=(node,))
    exe = g.instantiate()
    with pytest.raises(pcg.ArgumentError, match="index 3 is out of range"):
        exe.set_arg(node, 3, 1.0)
    # Too many threads per block: the compiled launch is refused by the driver and hands
    # it to the checked path, whose launch-config check (validate) names the limit.
    with pytest.raises(pcg.ArgumentError, match="4096 threads per block"):
        fill.launch(1, 4096, (dev, 1.0, N), stream=stream)
    exe.launch(stream)
    stream.synchronize()
    assert (values(dev) == 1.0).all()


def test_trace_sees_every_hot_call(helpers, stream):
    dev = pcg.DeviceBuffer(4 * N)
    fill = helpers["fill"]
    fill.launch(1, N, (dev, 1.0, N), stream=stream)  # this thread is ready
    with pcg.trace() as t:
        fill.launch(1, N, (dev, 2.0, N), stream=stream)
        g = pcg.Graph()
        node = g.add_kernel(fill, 1, N, (dev, 3.0, N))
        exe = g.instantiate()
        exe.set_arg(node, 1, 5.0)
        exe.launch(stream)
    apis = [r.api for r in t.records]
    for api in ("cuLaunchKernel", "cuGraphAddKernelNode", "cuGraphExecKernelNodeSetParams",
                "cuGraphLaunch"):
        assert api in apis, apis
    stream.synchronize()
    assert (values(dev) == 5.0).all()


def test_hot_calls_from_a_new_thread(helpers):
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    node = g.add_kernel(helpers["fill"], 1, N, (dev, 6.0, N))
    exe = g.instantiate()
    errors = []

    def work():
        try:
            s = pcg.Stream()
            helpers["fill"].launch(1, N, (dev, 1.0, N), stream=s)
            exe.set_arg(node, 1, 7.0)
            exe.launch(s)
            s.synchronize()
        except Exception as exc:  # reported below
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors
    assert (values(dev) == 7.0).all()


def test_capture_of_compiled_launches(helpers, stream):
    dev = pcg.DeviceBuffer(4 * N)
    add_one = helpers["add_one"]
    helpers["fill"].launch(1, N, (dev, 0.0, N), stream=stream)
    with pcg.capture(stream) as cap:
        for _ in range(10):
            add_one.launch(1, N, (dev, N), stream=stream)
    exe = cap.graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert (values(dev) == 10.0).all()


def test_every_argument_at_once_and_kernels_of_30_arguments(helpers, stream):
    """``exe.set_params(node, args=...)`` (every argument, packed by the compiled route) and a
    kernel of 30 mixed arguments (benchmarks/argsets.py) launched, built and updated: each
    gives NumPy's result; a freed buffer is refused and changes nothing."""
    from benchmarks import argsets
    x = pcg.DeviceBuffer.from_array(np.arange(N, dtype=np.float32))
    y, y2 = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    a = g.add_kernel(helpers["fill"], 1, N, (y, 1.0, N))
    b = g.add_kernel(helpers["axpy"], 1, N, (y, x, 2.0, N), deps=(a,))  # y = 1 + 2 x
    exe = g.instantiate()
    exe.set_params(a, args=(y2, 3.0, N))        # every argument: another buffer, value
    exe.set_params(b, args=[y2, x, 0.5, N])      # a list as well
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(values(y2), 3.0 + 0.5 * np.arange(N, dtype=np.float32))
    gone = pcg.DeviceBuffer(4 * N)
    gone.free()
    with pytest.raises(pcg.ClosedError, match="was freed"):
        exe.set_params(b, args=(gone, x, 1.0, N))
    exe.launch(stream)  # the exec still has y2 and 0.5
    stream.synchronize()
    np.testing.assert_allclose(values(y2), 3.0 + 0.5 * np.arange(N, dtype=np.float32))

    k30 = helpers[argsets.name(30)]
    bufs = [pcg.DeviceBuffer(64) for _ in range(4)]
    args = argsets.values(30, bufs)
    k30.launch(1, 1, args, stream)
    g30 = pcg.Graph()
    node = g30.add_kernel(k30, 1, 1, args)
    exe30 = g30.instantiate()
    exe30.set_params(node, args=argsets.values(30, bufs, 2.0))
    exe30.set_arg(node, argsets.UPDATE_INDEX, 5.0)
    exe30.launch(stream)
    stream.synchronize()
    assert exe30.exec_node(node).args.values()[argsets.UPDATE_INDEX] == 5.0
