"""Kernel limits (CPU): cached per CUfunction, for the device that function belongs to, and
forgotten with the kernel (a later module may be given the same CUfunction address)."""

import gc

from fakes import H100, fake_kernel

from pycudagraph import validate


def test_limits_are_the_functions_device(monkeypatch):
    k = fake_kernel()
    del validate.KERNEL_LIMITS[k._func_int]
    k._func_dev = 1  # the kernel's function on device 1, while device 0 is current
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
    func = k._func_int
    assert func in validate.KERNEL_LIMITS
    del k
    gc.collect()
    assert func not in validate.KERNEL_LIMITS  # a new kernel at this address loads its own
