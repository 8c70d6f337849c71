"""Kernel limits (CPU): cached per CUfunction, for the device that function belongs to, and
forgotten with the kernel (a later module may be given the same CUfunction address)."""

import gc

import pytest

from tests.support.fakes import H100, fake_kernel

from pycudagraph.compile import limits as validate


def test_limits_are_the_functions_device(monkeypatch):
    k = fake_kernel()
    del validate.KERNEL_LIMITS[k.last_function[0]]
    k._func = (k.last_function[0], 1)  # the kernel's function on device 1, while device 0 is current
    other = dict(H100, threads=512)
    monkeypatch.setitem(validate.DEVICE_LIMITS, 0, validate.DeviceLimits(0, **H100))
    monkeypatch.setitem(validate.DEVICE_LIMITS, 1, validate.DeviceLimits(1, **other))
    monkeypatch.setattr(validate, "ensure_device", lambda: 0)
    values = {validate._F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
              validate._F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: 49152,
              validate._F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: 0}
    monkeypatch.setattr(validate, "call", lambda fn, attr, f: values[attr])
    lim = validate.kernel_limits(k)
    assert lim.device.device == 1 and lim.threads == 512
    assert not k._fits(1, 1024, 0)


def test_limits_are_forgotten_with_the_kernel():
    k = fake_kernel()
    func = k.last_function[0]
    assert func in validate.KERNEL_LIMITS
    del k
    gc.collect()
    assert func not in validate.KERNEL_LIMITS  # a new kernel at this address loads its own


def test_device_check_leaves_iterable_args_to_the_packing(monkeypatch):
    """With several devices the arguments are checked for their devices before packing;
    a generator of arguments is read once, by both."""
    import pycudagraph as pcg
    from tests.support.fakes import fake_buffer
    from pycudagraph._cuda import context as cdev
    k = fake_kernel()
    monkeypatch.setattr(cdev.seen, "multi", True)
    monkeypatch.setattr(cdev.thread_state, "device", 0, raising=False)
    buf = fake_buffer(64)
    buf._dev = 0
    pack = k.pack(a for a in (buf, 1.0, 4))
    assert pack.refs == [buf, 1.0, 4]
    buf._dev = 1
    with pytest.raises(pcg.DeviceMismatchError, match="argument 0 'y'"):
        k.pack(a for a in (buf, 1.0, 4))
