"""Two GPUs in one process: objects on each device, one graph spanning both, mixing errors.

Skipped with a one-sentence reason on machines with fewer than 2 GPUs.
"""

import sys

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph import _cuda
from pycudagraph._cuda import rt
from pycudagraph._cuda.context import seen

devmod = sys.modules["pycudagraph.runtime.device"]
COUNT = pcg.device_count()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(COUNT < 2, reason=f"needs 2 GPUs; this machine has {COUNT}.")]

SOURCE = r"""
extern "C" __global__ void affine(float* y, const float* x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + b;
}
extern "C" __global__ void add(float* z, const float* p, const float* q, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        z[i] = p[i] + q[i];
}
"""
N = 1 << 16


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SOURCE, name="two_gpus.cu").compile()


def _on(dev, host):
    with pcg.device(dev):
        return pcg.DeviceBuffer.from_array(host)


def _rand(seed):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def test_each_device_describes_itself_and_objects_remember_it():
    d0, d1 = pcg.Device(0), pcg.Device(1)
    assert d0 != d1 and d1.ordinal == 1 and d1.name and d1.arch.startswith("sm_")
    with pcg.device(1) as d:
        assert d == d1 == pcg.Device.current()
        s, ev, buf = pcg.Stream(), pcg.Event(), pcg.DeviceBuffer(64)
        with pcg.device(0):
            assert pcg.Device.current() == d0
            s0 = pcg.Stream()
        assert pcg.Device.current() == d1
    assert (s.device, ev.device, buf.device, s0.device) == (d1, d1, d1, d0)
    assert seen.multi and devmod.devices_seen() >= {0, 1}
    raw = None
    with pcg.device(1):
        raw = _cuda.call(rt.cudaStreamCreateWithFlags, rt.cudaStreamNonBlocking)
    try:
        assert pcg.Stream.wrap(int(raw)).device == d1  # cuStreamGetDevice
    finally:
        _cuda.call(rt.cudaStreamDestroy, raw)


def test_one_kernel_runs_on_both_devices(mod):
    k = mod["affine"]
    x0, x1 = _rand(1), _rand(2)
    with pcg.device(0):
        s0, y0 = pcg.Stream(), pcg.DeviceBuffer(4 * N)
    with pcg.device(1):
        s1, y1 = pcg.Stream(), pcg.DeviceBuffer(4 * N)
    b0, b1 = _on(0, x0), _on(1, x1)
    # No device block around the launches: each picks its stream's device.
    with pcg.device(0):
        k.launch(64, 256, (y0, b0, 2.0, 1.0, N), stream=s0)
        k.launch(64, 256, (y1, b1, 3.0, -1.0, N), stream=s1)
        assert _cuda.call(rt.cudaGetDevice) == 0  # the launch on device 1 switched back
    s0.synchronize()
    s1.synchronize()
    np.testing.assert_allclose(y0.to_numpy(), 2 * x0 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y1.to_numpy(), 3 * x1 - 1, rtol=1e-6, atol=1e-6)
    f0, f1 = k.function(0), k.function(1)
    assert f0 and f1 and f0 != f1


def test_mixing_devices_raises_before_the_raw_call(mod, monkeypatch):
    monkeypatch.setattr(devmod, "_peers", set())  # as if peer access was never enabled
    k = mod["affine"]
    with pcg.device(0):
        s0, y0, ev0 = pcg.Stream(), pcg.DeviceBuffer(4 * N), pcg.Event()
    x1 = _on(1, _rand(3))
    with pytest.raises(pcg.DeviceMismatchError, match=r"runs on device 0 but argument 1 'x'.* "
                                                      r"memory of device 1"):
        k.launch(64, 256, (y0, x1, 1.0, 0.0, N), stream=s0)
    with pcg.device(1):
        s1 = pcg.Stream()
    with pytest.raises(pcg.DeviceMismatchError, match="the event belongs to device 0 but the "
                                                      "stream to device 1"):
        ev0.record(s1)
    g = pcg.Graph()
    with pcg.device(0), pytest.raises(pcg.DeviceMismatchError, match="graph node"):
        g.add_kernel(k, 64, 256, (y0, x1, 1.0, 0.0, N))
    s1.wait(ev0.record(s0))  # waiting on another device's event is allowed
    s1.synchronize()


def test_peer_access_lets_a_kernel_read_the_other_device(mod):
    d0, d1 = pcg.Device(0), pcg.Device(1)
    if not d0.can_access_peer(d1):
        pytest.skip("cudaDeviceCanAccessPeer(0, 1) is 0 on this machine.")
    d0.enable_peer_access(d1)
    d0.enable_peer_access(d1)  # again: not an error
    assert d0.peer_access_enabled(d1) and (0, 1) in devmod.peer_pairs()
    x1 = _rand(4)
    src = _on(1, x1)
    with pcg.device(0):
        s0, y0 = pcg.Stream(), pcg.DeviceBuffer(4 * N)
    mod["affine"].launch(64, 256, (y0, src, -1.0, 0.5, N), stream=s0)
    s0.synchronize()
    np.testing.assert_allclose(y0.to_numpy(), 0.5 - x1, rtol=1e-6, atol=1e-6)


def test_one_graph_spans_two_devices(mod):
    """Kernel nodes on each device, peer copies both ways, edges across devices."""
    affine, add = mod["affine"], mod["add"]
    for a, b in ((0, 1), (1, 0)):
        if pcg.Device(a).can_access_peer(b):
            pcg.Device(a).enable_peer_access(b)
    x0, x1 = _rand(5), _rand(6)
    bufs = {}
    for d, x in ((0, x0), (1, x1)):
        with pcg.device(d):
            bufs[d] = dict(x=pcg.DeviceBuffer.from_array(x), y=pcg.DeviceBuffer(4 * N),
                           t=pcg.DeviceBuffer(4 * N), z=pcg.DeviceBuffer(4 * N))
    b0, b1 = bufs[0], bufs[1]
    g = pcg.Graph()
    with pcg.device(0):
        y0 = g.add_kernel(affine, 64, 256, (b0["y"], b0["x"], 2.0, 1.0, N))
    with pcg.device(1):
        y1 = g.add_kernel(affine, 64, 256, (b1["y"], b1["x"], 3.0, -1.0, N))
    to1 = g.add_memcpy(b1["t"], b0["y"], 4 * N, deps=(y0,))
    to0 = g.add_memcpy(b0["t"], b1["y"], 4 * N, deps=(y1,))
    with pcg.device(0):
        z0 = g.add_kernel(add, 64, 256, (b0["z"], b0["y"], b0["t"], N), deps=(y0, to0))
    with pcg.device(1):
        z1 = g.add_kernel(add, 64, 256, (b1["z"], b1["y"], b1["t"], N), deps=(y1, to1))
    assert set(z0.dependencies) == {y0, to0} and set(z1.dependencies) == {y1, to1}
    exe = g.instantiate()
    want = (2 * x0.astype(np.float64) + 1) + (3 * x1.astype(np.float64) - 1)
    for launch_dev in (0, 1):  # the stream of either device may launch it
        for d in (0, 1):
            bufs[d]["z"].zero()
        with pcg.device(launch_dev):
            s = pcg.Stream()
        exe.launch(s)
        s.synchronize()
        for d in (0, 1):
            np.testing.assert_allclose(bufs[d]["z"].to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_capture_forks_across_devices_into_one_graph(mod):
    affine, add = mod["affine"], mod["add"]
    x0, x1 = _rand(7), _rand(8)
    with pcg.device(0):
        s0, a0, y0, ev0 = pcg.Stream(), pcg.DeviceBuffer.from_array(x0), pcg.DeviceBuffer(4 * N), pcg.Event(timing=False)
    with pcg.device(1):
        s1, a1, y1, ev1 = pcg.Stream(), pcg.DeviceBuffer.from_array(x1), pcg.DeviceBuffer(4 * N), pcg.Event(timing=False)
    def work():
        affine.launch(64, 256, (y0, a0, 2.0, 0.0, N), stream=s0)
        affine.launch(64, 256, (y1, a1, -1.0, 4.0, N), stream=s1)
        add.launch(64, 256, (y1, y1, a1, N), stream=s1)

    work()  # eagerly first: each device's function looked up outside the capture
    s1.synchronize()
    y0.zero()
    y1.zero()
    with pcg.capture(s0) as cap:
        ev0.record(s0)
        s1.wait(ev0)  # device 1's stream joins the capture
        work()
        ev1.record(s1)
        s0.wait(ev1)  # and joins back
    kernels = [n for n in cap.graph.nodes if n.type == pcg.NodeType.KERNEL]
    assert len(kernels) == 3
    exe = cap.graph.instantiate()
    exe.launch(s0)
    s0.synchronize()
    np.testing.assert_allclose(y0.to_numpy(), 2 * x0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y1.to_numpy(), 4 - x1 + x1, rtol=1e-6, atol=1e-5)


def test_buffer_of_device_1_synchronous_copies_and_free_from_device_0():
    host = _rand(9)
    with pcg.device(1):
        free_before = _cuda.call(rt.cudaMemGetInfo)[0]
        big = pcg.DeviceBuffer(256 << 20)
        assert _cuda.call(rt.cudaMemGetInfo)[0] < free_before - (200 << 20)
    with pcg.device(0):
        big.copy_from(np.full(1024, 3.0, np.float32))  # switches to device 1 for the call
        assert big.to_numpy()[:1024].tolist() == [3.0] * 1024
        big.zero()
        assert not big.to_numpy()[:1024].any()
        big.free()  # cudaFree from device 0 of device 1's memory
        assert _cuda.call(rt.cudaGetDevice) == 0
    with pcg.device(1):
        assert _cuda.call(rt.cudaMemGetInfo)[0] > free_before - (64 << 20)
    b = _on(1, host)
    assert np.array_equal(b.to_numpy(), host)
