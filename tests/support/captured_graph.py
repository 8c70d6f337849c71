"""Two small kernels and a graph captured from them, for the GPU tests of captured graphs
(rebind, captured kernel-node arguments, describe, capture control, edge ports).

``scale2(x, y, a, n)`` writes ``y = a * x``; ``copy_struct(Ptrs{x, y, n})`` writes
``y = x + 1`` through pointers inside a struct argument.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import pycudagraph as pcg

N = 1 << 12
SRC = r"""
struct Ptrs { const float* x; float* y; int n; };
extern "C" __global__ void scale2(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
extern "C" __global__ void copy_struct(Ptrs p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.y[i] = p.x[i] + 1.0f;
}
"""


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SRC, name="captured_graph.cu").compile()


def buf_of(values):
    return pcg.DeviceBuffer.from_array(np.asarray(values, np.float32))


def read_back(buf, n=N):
    out = np.empty(n, np.float32)
    buf.copy_to(out)
    return out


def captured_graph(mod, stream, x, y, y2):
    """A captured graph: scale2(x -> y, 2.0) then copy_struct({x, y2, N})."""
    blob = struct.pack("<QQi4x", x.ptr, y2.ptr, N)
    with pcg.capture(stream) as cap:
        mod["scale2"].launch(N // 256, 256, (x, y, 2.0, N), stream=stream)
        mod["copy_struct"].launch(N // 256, 256, (blob,), stream=stream)
    return cap.graph
