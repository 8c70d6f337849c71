"""Graph structure on the GPU: a thousand-node chain, fork and join, clone + find and DOT,
removing edges and nodes."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1024


def test_thousand_node_chain(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    dev.zero()
    g = pcg.Graph()
    prev = ()
    for _ in range(1000):
        prev = (g.add_kernel(helpers["add_one"], 1, 1, (dev, 1), deps=prev),)
    assert len(g) == 1000 and len(g.edges) == 999
    exe = g.instantiate(upload_stream=stream)
    exe.launch(stream)
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 2000.0


def test_fork_join_sees_predecessors(helpers, stream):
    n = N
    a, b, c = (pcg.DeviceBuffer(4 * n) for _ in range(3))
    g = pcg.Graph()
    fa = g.add_kernel(helpers["fill"], 4, 256, (a, 2.0, n))
    fb = g.add_kernel(helpers["fill"], 4, 256, (b, 3.0, n))
    fc = g.add_kernel(helpers["fill"], 4, 256, (c, 10.0, n))
    # c = 2*a + c, then c = 3*b + c: joins both branches
    j1 = g.add_kernel(helpers["axpy"], 4, 256, (c, a, 2.0, n), deps=[fa, fc])
    g.add_kernel(helpers["axpy"], 4, 256, (c, b, 3.0, n), deps=[j1, fb])
    assert len(g.root_nodes) == 3
    g.instantiate().launch(stream)
    stream.synchronize()
    assert (c.to_numpy(np.float32) == 10 + 4 + 9).all()


def test_clone_find_and_dot(helpers, tmp_path):
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    a = g.add_kernel(helpers["fill"], (4, 1), (256, 1), (dev, 1.0, N))
    b = g.add_memset(dev, 0, 4, deps=[a])
    c = g.clone()
    ca = c.find(a)
    assert ca != a and ca.type == "kernel" and ca.kernel_name == "fill"
    assert c.find(b).dependencies == [ca]
    dot = g.to_dot()
    assert "kernel fill" in dot and "grid=4 block=256" in dot and "n0 -> n1" in dot
    path = tmp_path / "cuda.dot"
    g.debug_dot_print(path, verbose=True)
    assert "digraph" in path.read_text()
    exe = c.instantiate()
    exe.set_arg(ca, "v", 4.0)
    s = pcg.Stream()
    exe.launch(s)
    s.synchronize()
    assert dev.to_numpy(np.float32)[10] == 4.0


def test_remove_dependency_and_node(helpers):
    g = pcg.Graph()
    a = g.add_empty()
    b = g.add_empty()
    g.add_dependency(a, b)
    assert g.edges == [(a, b)]
    g.remove_dependency(a, b)
    assert g.edges == []
    g.remove_node(b)
    assert g.nodes == [a]
