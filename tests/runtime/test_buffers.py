"""Device and pinned buffers on the GPU: an asynchronous round trip, and the errors of sizes
and double frees."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu


def test_pinned_buffer_and_async_copy(stream):
    pinned = pcg.PinnedBuffer(4096)
    view = pinned.array(np.float32)
    view[:] = np.arange(1024)
    dev = pcg.DeviceBuffer(4096)
    dev.copy_from(view, stream=stream)
    out = np.zeros(1024, np.float32)
    dev.copy_to(out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, np.arange(1024))


def test_device_buffer_errors():
    with pytest.raises(ValueError, match="positive size"):
        pcg.DeviceBuffer(0)
    b = pcg.DeviceBuffer(16)
    with pytest.raises(ValueError, match="32 bytes but the buffer only 16"):
        b.copy_from(np.zeros(8, np.float32))
    b.free()
    b.free()
