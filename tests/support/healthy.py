"""After a refused misuse: a small graph still builds, launches and computes the right thing."""

from __future__ import annotations

import numpy as np

import pycudagraph as pcg

N = 256


def assert_small_graph_works(helpers) -> None:
    """fill(y, 2) -> scale(y, 3) -> add_one(y) must give 7 everywhere, through a graph."""
    buf = pcg.DeviceBuffer(N * 4)
    g = pcg.Graph()
    a = g.add_kernel(helpers["fill"], 1, 128, (buf, 2.0, N))
    b = g.add_kernel(helpers["scale"], 1, 128, (buf, 3.0, N), deps=[a])
    g.add_kernel(helpers["add_one"], 1, 128, (buf, N), deps=[b])
    s = pcg.Stream()
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    out = buf.to_numpy(np.float32)
    assert np.all(out == 7.0), out[:8]
