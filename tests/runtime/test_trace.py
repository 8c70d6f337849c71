"""Tracing on the GPU: every raw call of a build, instantiate and launch recorded as C, with
the Python line that made it."""

import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu


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
    assert "2.0f" in text and "test_trace.py" in text
    assert "cuGraphLaunch(exec0" in text
