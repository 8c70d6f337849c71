"""Devices on one GPU or none: Device, device(), device_count, and the mixing checks.

The mixing checks must raise before any raw call; on the CPU machine they are exercised
with stand-in objects whose handles are never reached, on a GPU with real objects whose
remembered device is changed (so a check that failed to fire would make a harmless
call, and the test would fail, not crash).
"""

import sys

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph import _cuda
from pycudagraph._cuda import rt
from pycudagraph._cuda.context import seen, thread_state

devmod = sys.modules["pycudagraph.runtime.device"]  # pcg.device is the context manager
HAVE_GPU = _cuda.cuda_available()

AXPY = r"""
extern "C" __global__ void axpy(float* y, const float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.fixture(scope="module")
def axpy():
    arch = None if HAVE_GPU else "sm_90"
    return pcg.Program(AXPY, name="axpy.cu").compile(arch=arch)["axpy"]


@pytest.fixture
def two_devices(monkeypatch):
    """Pretend a second device has been used: the mixing checks are armed, no peer access."""
    monkeypatch.setattr(seen, "multi", True)
    monkeypatch.setattr(devmod, "_peers", set())


def _buffer(dev: int):
    """A DeviceBuffer remembered as living on ``dev`` (real memory on a GPU)."""
    if HAVE_GPU:
        buf = pcg.DeviceBuffer(16)
    else:
        buf = pcg.DeviceBuffer.__new__(pcg.DeviceBuffer)
        buf.ptr, buf.nbytes, buf._fin, buf._addr = 0, 16, None, 0
    buf._dev = dev
    return buf


def _stream(dev: int):
    if HAVE_GPU:
        s = pcg.Stream()
    else:
        s = pcg.Stream.__new__(pcg.Stream)
        s._init(0xDEAD0, None, None)
    s._dev = dev
    return s


def _event(dev: int):
    if HAVE_GPU:
        ev = pcg.Event(timing=False)
    else:
        ev = pcg.Event.__new__(pcg.Event)
        ev._raw, ev._h, ev._addr, ev._fin, ev.timing = rt.cudaEvent_t(0), 0, 0, None, False
    ev._dev = dev
    return ev


# Counting and naming devices (CPU and GPU) ---------------------------------------

def test_device_count_never_raises():
    n = pcg.device_count()
    assert type(n) is int
    assert n >= 1 if HAVE_GPU else n == 0


@pytest.mark.parametrize("bad", [-1, 10**6])
def test_device_ordinal_out_of_range(bad):
    with pytest.raises(ValueError, match=rf"there is no CUDA device {bad}: this process sees"):
        pcg.Device(bad)
    with pytest.raises(ValueError, match=rf"there is no CUDA device {bad}"):
        pcg.device(bad)


@pytest.mark.parametrize("bad", ["0", 1.5, True, None])
def test_device_ordinal_type(bad):
    with pytest.raises(TypeError, match="a device is a pycudagraph.Device or an int ordinal"):
        pcg.Device(bad)


def test_mismatch_error_is_a_value_error():
    assert issubclass(pcg.DeviceMismatchError, ValueError)
    assert issubclass(pcg.DeviceMismatchError, pcg.PyCudaGraphError)


def test_check_access_names_both_devices_and_the_fix(monkeypatch):
    monkeypatch.setattr(devmod, "_peers", set())
    with pytest.raises(pcg.DeviceMismatchError) as info:
        devmod.check_access("k() (launch)", 0, 1, "argument 2 'y'")
    text = str(info.value)
    assert "runs on device 0 but argument 2 'y' is memory of device 1" in text
    assert "pcg.Device(0).enable_peer_access(1)" in text
    devmod.check_access("k() (launch)", 1, 1, "argument 2 'y'")  # same device: fine
    monkeypatch.setattr(devmod, "_peers", {(0, 1)})
    devmod.check_access("k() (launch)", 0, 1, "argument 2 'y'")  # peer access: fine
    with pytest.raises(pcg.DeviceMismatchError):
        devmod.check_access("k() (launch)", 1, 0, "argument 2 'y'")  # one-way only


# Mixing checks fire before the raw call (CPU stand-ins or real objects) --------------

def test_event_record_on_a_stream_of_another_device(two_devices):
    ev, s = _event(0), _stream(1)
    with pcg.trace() as t:
        with pytest.raises(pcg.DeviceMismatchError,
                           match=r"Event.record: the event belongs to device 0 but the stream "
                                 r"to device 1.*with pcg.device\(1\)"):
            ev.record(s)
    assert not any("cudaEventRecord" in c for c in t.calls)


def test_event_elapsed_across_devices(two_devices):
    with pytest.raises(pcg.DeviceMismatchError, match="the start event belongs to device 0 "
                                                      "but the end event to device 1"):
        _event(0).elapsed_ms(_event(1))


def test_kernel_launch_with_a_buffer_of_another_device(two_devices, axpy):
    y, x, s = _buffer(1), _buffer(0), _stream(0)
    with pcg.trace() as t:
        with pytest.raises(pcg.DeviceMismatchError,
                           match=r"axpy\(\) \(launch\) runs on device 0 but argument 0 'y' "
                                 r"\(a DeviceBuffer\) is memory of device 1"):
            axpy.launch(1, 4, (y, x, 1.0, 4), stream=s)
    assert not any("cuLaunchKernel" in c for c in t.calls)


def test_kernel_node_with_a_buffer_of_another_device(two_devices, axpy, monkeypatch):
    if not HAVE_GPU:
        monkeypatch.setattr(thread_state, "device", 0)
    here = thread_state.device if HAVE_GPU else 0
    y, x = _buffer(here), _buffer(here + 1)
    with pytest.raises(pcg.DeviceMismatchError,
                       match=rf"axpy\(\) \(graph node\) runs on device {here} but argument 1 'x'"):
        axpy.pack((y, x, 1.0, 4), 1, 4)
    if HAVE_GPU:
        g = pcg.Graph()
        with pytest.raises(pcg.DeviceMismatchError, match="argument 1 'x'"):
            g.add_kernel(axpy, 1, 4, (y, x, 1.0, 4))
        assert g.nodes == [] or len(g.nodes) == 0


# One real GPU ----------------------------------------------------------------------

@pytest.mark.gpu
def test_device_zero_describes_itself():
    d = pcg.Device(0)
    assert d.handle == d.ordinal == int(d) == 0
    assert isinstance(d.name, str) and d.name and "\0" not in d.name
    major, minor = d.compute_capability
    assert d.arch == f"sm_{major}{minor}" == pcg.compile.program.device_arch(0)
    assert d.total_memory > 1 << 30
    assert d == pcg.Device(0) and hash(d) == hash(pcg.Device(0)) and d != 0
    assert d.can_access_peer(0)
    d.enable_peer_access(0)  # the same device: nothing to do
    d.synchronize()


@pytest.mark.gpu
def test_device_block_restores_the_current_device():
    before = _cuda.call(rt.cudaGetDevice)
    with pcg.device(0) as d:
        assert d == pcg.Device.current() == pcg.Device(0)
        with pcg.device(pcg.Device(0)):
            assert _cuda.call(rt.cudaGetDevice) == 0
        assert _cuda.call(rt.cudaGetDevice) == 0
    assert _cuda.call(rt.cudaGetDevice) == before


@pytest.mark.gpu
def test_objects_remember_their_device(axpy):
    with pcg.device(0):
        s, ev, buf = pcg.Stream(), pcg.Event(), pcg.DeviceBuffer(64)
    assert s.device == ev.device == buf.device == pcg.Device(0)
    assert pcg.Stream.wrap(0).device == pcg.Device.current()  # the legacy stream follows
    raw = _cuda.call(rt.cudaStreamCreateWithFlags, rt.cudaStreamNonBlocking)
    try:
        assert pcg.Stream.wrap(int(raw)).device == pcg.Device(0)  # asked of the driver
    finally:
        _cuda.call(rt.cudaStreamDestroy, raw)
    assert axpy.device == pcg.Device(0)
    assert axpy.function(0) == axpy.function(pcg.Device(0)) == axpy.function() != 0


@pytest.mark.gpu
def test_one_device_leaves_the_checks_off(axpy):
    s = pcg.Stream()
    y = pcg.DeviceBuffer.from_array(np.ones(4, np.float32))
    x = pcg.DeviceBuffer.from_array(np.arange(4, dtype=np.float32))
    axpy.launch(1, 4, (y, x, 2.0, 4), stream=s)
    s.synchronize()
    assert y.to_numpy().tolist() == [1.0, 3.0, 5.0, 7.0]
    if pcg.device_count() == 1:
        assert devmod.devices_seen() == {0} and not seen.multi
