"""Bucketed graphs on the GPU: pad to the smallest bucket that fits, replay, slice, and fall
back to eager runs above the largest bucket."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu


def test_bucketed_graphs_pad_replay_slice_fallback(helpers):
    class Step:
        def __init__(self, size):
            self.size = size
            self.buf = pcg.DeviceBuffer(4 * size)
            self.host = np.zeros(size, np.float32)

        def load(self, x):
            padded = np.zeros(self.size, np.float32)
            padded[: len(x)] = x
            self.buf.copy_from(padded)

        def run(self, stream):
            helpers["scale"].launch(max(1, self.size // 256), 256, (self.buf, 2.0, self.size), stream=stream)

        def read(self, n):
            return self.buf.to_numpy(np.float32)[:n]

    pool = pcg.BucketedGraphs([64, 16, 32], Step)
    assert pool.buckets == [16, 32, 64] and pool.bucket_for(17) == 32 and pool.bucket_for(65) is None
    for n in (5, 16, 20, 9, 100):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(pool(n, x), 2 * x)
    s = pool.stats
    assert (s.hits, s.misses, s.captures, s.fallbacks) == (2, 2, 2, 1)
    assert s.per_bucket == {16: 3, 32: 1}
