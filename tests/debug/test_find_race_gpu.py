"""``pcg.find_race`` on the GPU: a graph of NVRTC kernels in which a slow producer (it spins
about 25 ms, then writes a buffer) feeds a consumer (it copies that buffer, scaled). With
the edge producer -> consumer the search reports none, ten times over; with the edge
removed the two run side by side, the consumer reads the buffer before it is written, and
the search names the pair and the address. Either way the memory the graph touches is
written back as it was."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

SRC = r"""
extern "C" __global__ void add_one(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1.0f;
}
extern "C" __global__ void slow_write(float* buf, float v, int n, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = v;
}
extern "C" __global__ void copy_scaled(float* dst, const float* src, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = a * src[i];
}
"""

N = 256
CYCLES = 50_000_000  # about 25 ms at 2 GHz


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SRC, name="find_race_test.cu").compile()


def build(mod):
    """Ten filler nodes in a chain, then producer -> consumer -> a last add, and four
    independent nodes after; every buffer set to a known value."""
    x, buf, out, *zs = (pcg.DeviceBuffer(4 * N) for _ in range(7))
    x.copy_from(np.arange(N, dtype=np.float32))
    buf.zero()
    out.copy_from(np.full(N, 7.0, np.float32))
    for z in zs:
        z.zero()
    g = pcg.Graph()
    prev = None
    for _ in range(10):
        prev = g.add_kernel(mod["add_one"], 1, N, (x, N), deps=[prev] if prev else [])
    producer = g.add_kernel(mod["slow_write"], 1, N, (buf, 5.0, N, CYCLES))
    consumer = g.add_kernel(mod["copy_scaled"], 1, N, (out, buf, 2.0, N), deps=[producer])
    g.add_kernel(mod["add_one"], 1, N, (out, N), deps=[consumer])
    for z in zs:  # independent nodes, each on its own buffer
        g.add_kernel(mod["add_one"], 1, N, (z, N))
    return g, producer, consumer, (x, buf, out, *zs)


def contents(bufs):
    return [b.to_numpy(np.float32).copy() for b in bufs]


def test_find_race_reports_none_on_a_correct_graph_ten_times(mod):
    g, _, _, bufs = build(mod)
    before = contents(bufs)
    for i in range(10):
        r = pcg.find_race(g if i % 2 else g.instantiate())
        assert r.ok and r.node is None and not r.pairs, str(r)
        assert len(r.trials) == 1 and r.trials[0].outcome == "same", r.trials
    print(r)
    for a, b in zip(before, contents(bufs)):
        np.testing.assert_array_equal(a, b)


def test_find_race_names_the_producer_and_consumer_of_a_removed_edge(mod):
    g, producer, consumer, bufs = build(mod)
    g.remove_dependency(producer, consumer)
    before = contents(bufs)
    r = pcg.find_race(g, progress=print)
    print(r)
    assert not r.ok and r.node is consumer, str(r)
    assert [(p.producer, p.consumer) for p in r.pairs] == [(producer, consumer)], str(r)
    buf = bufs[1]
    assert buf.ptr <= r.pairs[0].address < buf.ptr + buf.nbytes, (hex(r.pairs[0].address), buf)
    assert r.index == 11, r.index  # after the ten fillers and the producer
    assert r.differing >= 1
    text = str(r)
    assert "slow_write" in text and "copy_scaled" in text and "add_dependency" in text, text
    for a, b in zip(before, contents(bufs)):  # the search wrote the memory back
        np.testing.assert_array_equal(a, b)
    # the mended graph: none again
    g.add_dependency(producer, consumer)
    assert pcg.find_race(g).ok
