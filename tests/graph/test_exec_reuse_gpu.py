"""GPU tests of exec reuse: a released exec and its graph are kept, and an instantiate of a
graph of the same topology updates that exec (``cuGraphExecUpdate``) instead of
instantiating: the results are the new graph's, per-node updates reach the right nodes, a
refused update falls back to an instantiate, and graphs with memory nodes or a disabled
node are never reused. Kernels compiled with NVRTC.
"""

import gc

import numpy as np
import pytest

import pycudagraph as pcg
import pycudagraph.graph.exec_reuse as er

pytestmark = pytest.mark.gpu

N = 1000
SRC = r"""
extern "C" __global__ void axpb(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
extern "C" __global__ void add(float* y, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += v;
}
"""
BLOCKS = (N + 255) // 256


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SRC, name="exec_reuse_test.cu").compile()


@pytest.fixture
def reuse():
    """Reuse on with the default bounds and nothing kept from other tests; the same after."""
    was = pcg.exec_reuse(True)
    er.clear()
    yield er
    er.clear()
    pcg.exec_reuse(was)


def apis(t) -> list:
    return [r.api for r in t.records]


def two_step(mod, x, y, a, b, v):
    """y = a * x + b, then y += v: a graph of two kernel nodes, one edge."""
    g = pcg.Graph()
    n1 = g.add_kernel(mod["axpb"], BLOCKS, 256, (y, x, a, b, N))
    n2 = g.add_kernel(mod["add"], BLOCKS, 256, (y, v, N), deps=[n1])
    return g, n1, n2


def vec(seed):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def run(exe, stream):
    exe.launch(stream)
    stream.synchronize()


def test_a_reused_exec_runs_the_new_graph_and_its_per_node_updates(mod, reuse, stream):
    x1, y1 = pcg.DeviceBuffer.from_array(vec(1)), pcg.DeviceBuffer(4 * N)
    g1, _, _ = two_step(mod, x1, y1, 2.0, 1.0, 0.5)
    exe1 = g1.instantiate()
    run(exe1, stream)
    np.testing.assert_allclose(y1.to_numpy(np.float32), 2.0 * vec(1) + 1.5, rtol=1e-6, atol=1e-6)
    h1 = int(exe1.handle)
    exe1.close()
    g1.close()
    assert er.stats()["ready"] == 1
    x1.free()  # what the parked exec's nodes pointed at is gone: the update rewrites it
    y1.free()

    x2, y2 = pcg.DeviceBuffer.from_array(vec(2)), pcg.DeviceBuffer(4 * N)
    g2, n1, n2 = two_step(mod, x2, y2, 3.0, -1.0, 2.0)
    with pcg.trace() as t:
        exe2 = g2.instantiate()
    assert "cuGraphExecUpdate" in apis(t) and "cuGraphInstantiateWithFlags" not in apis(t)
    assert int(exe2.handle) == h1 and exe2.graph is g2 and er.stats()["ready"] == 0
    run(exe2, stream)
    np.testing.assert_allclose(y2.to_numpy(np.float32), 3.0 * vec(2) + 1.0, rtol=1e-6, atol=1e-6)

    exe2.set_arg(n1, "a", 5.0)  # addressed through the node of the graph h1 came from
    exe2.set_params(n2, args={"v": 10.0})
    run(exe2, stream)
    np.testing.assert_allclose(y2.to_numpy(np.float32), 5.0 * vec(2) + 9.0, rtol=1e-6, atol=1e-6)
    y3 = pcg.DeviceBuffer(4 * N)
    exe2.set_params(n1, args={"y": y3})
    exe2.set_params(n2, args={"y": y3})
    y2.zero()
    run(exe2, stream)
    np.testing.assert_allclose(y3.to_numpy(np.float32), 5.0 * vec(2) + 9.0, rtol=1e-6, atol=1e-6)
    assert not y2.to_numpy(np.float32).any()
    exe2.set_enabled(n2, False)
    run(exe2, stream)
    np.testing.assert_allclose(y3.to_numpy(np.float32), 5.0 * vec(2) - 1.0, rtol=1e-6, atol=1e-6)
    assert not exe2.is_enabled(n2)
    exe2.close()  # a node disabled: destroyed, not kept
    assert er.stats() == {"ready": 0, "waiting": 0, "nodes": 0}


def test_collected_execs_and_graphs_are_reused(mod, reuse, stream):
    x, y = pcg.DeviceBuffer.from_array(vec(3)), pcg.DeviceBuffer(4 * N)
    g = two_step(mod, x, y, 1.0, 0.0, 1.0)[0]  # no node object kept: the graph can go
    exe = g.instantiate()
    run(exe, stream)
    del exe
    assert er.stats()["waiting"] == 1  # its graph is still in use
    del g
    gc.collect()  # a graph and its node table refer to each other
    assert er.stats()["ready"] == 1
    y.zero()
    g2, _, _ = two_step(mod, x, y, -1.0, 0.0, 4.0)
    with pcg.trace() as t:
        exe2 = g2.instantiate()
    assert "cuGraphExecUpdate" in apis(t) and "cuGraphInstantiateWithFlags" not in apis(t)
    run(exe2, stream)
    np.testing.assert_allclose(y.to_numpy(np.float32), 4.0 - vec(3), rtol=1e-6, atol=1e-6)


def three(mod, y0, y1, rewired: bool):
    """Three kernel nodes, one edge: 0 -> 1 (2 alone), or 1 -> 2 (0 alone) rewired."""
    g = pcg.Graph()
    fill, bump = (y0, y0, 0.0, 1.0, N), (y0, y0, 1.0, 1.0, N)
    if not rewired:  # y0 = 1 then y0 += 1; y1 = 5
        a = g.add_kernel(mod["axpb"], BLOCKS, 256, fill)
        g.add_kernel(mod["axpb"], BLOCKS, 256, bump, deps=[a])
        g.add_kernel(mod["axpb"], BLOCKS, 256, (y1, y1, 0.0, 5.0, N))
    else:  # y0 = 1; y1 = 5 then y1 += 1
        g.add_kernel(mod["axpb"], BLOCKS, 256, fill)
        b = g.add_kernel(mod["axpb"], BLOCKS, 256, (y1, y1, 0.0, 5.0, N))
        g.add_kernel(mod["axpb"], BLOCKS, 256, (y1, y1, 1.0, 1.0, N), deps=[b])
    return g


def test_a_refused_update_falls_back_to_an_instantiate(mod, reuse, stream):
    y0, y1 = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = three(mod, y0, y1, rewired=False)
    exe = g.instantiate()
    run(exe, stream)
    assert (y0.to_numpy(np.float32) == 2.0).all() and (y1.to_numpy(np.float32) == 5.0).all()
    exe.close()
    g.close()
    assert er.stats()["ready"] == 1
    g2 = three(mod, y0, y1, rewired=True)  # same kinds and counts: the driver refuses
    with pcg.trace() as t:
        exe2 = g2.instantiate()
    names = apis(t)
    assert names.index("cuGraphExecUpdate") < names.index("cuGraphInstantiateWithFlags")
    assert er.stats()["ready"] == 0  # the refused exec was destroyed
    run(exe2, stream)
    assert (y0.to_numpy(np.float32) == 1.0).all() and (y1.to_numpy(np.float32) == 6.0).all()


def test_another_node_kind_is_not_tried(mod, reuse, stream):
    x, y = pcg.DeviceBuffer.from_array(vec(4)), pcg.DeviceBuffer(4 * N)
    g, _, _ = two_step(mod, x, y, 1.0, 0.0, 1.0)
    g.instantiate().close()
    g.close()
    assert er.stats()["ready"] == 1
    g2 = pcg.Graph()
    m = g2.add_memset(y, 0, N, 4)
    g2.add_kernel(mod["add"], BLOCKS, 256, (y, 3.0, N), deps=[m])
    with pcg.trace() as t:
        exe = g2.instantiate()
    assert "cuGraphExecUpdate" not in apis(t) and "cuGraphInstantiateWithFlags" in apis(t)
    assert er.stats()["ready"] == 1  # the kept exec waits for a graph of its own topology
    run(exe, stream)
    assert (y.to_numpy(np.float32) == 3.0).all()


def test_graphs_with_memory_nodes_are_not_reused(mod, reuse, stream):
    out = pcg.DeviceBuffer(4 * N)

    def build(v):
        g = pcg.Graph()
        alloc = g.add_mem_alloc(4 * N)
        z = g.add_memset(alloc.ptr, 0, N, 4, deps=[alloc])
        k = g.add_kernel(mod["add"], BLOCKS, 256, (alloc.ptr, v, N), deps=[z])
        c = g.add_memcpy(out, alloc.ptr, 4 * N, deps=[k])
        g.add_mem_free(alloc, deps=[c])
        return g

    g = build(1.0)
    exe = g.instantiate()
    run(exe, stream)
    exe.close()
    g.close()
    assert er.stats() == {"ready": 0, "waiting": 0, "nodes": 0}
    with pcg.trace() as t:
        exe2 = build(7.0).instantiate()
    assert "cuGraphExecUpdate" not in apis(t) and "cuGraphInstantiateWithFlags" in apis(t)
    run(exe2, stream)
    assert (out.to_numpy(np.float32) == 7.0).all()


def test_reuse_off_instantiates(mod, reuse, stream):
    x, y = pcg.DeviceBuffer.from_array(vec(5)), pcg.DeviceBuffer(4 * N)
    g, _, _ = two_step(mod, x, y, 1.0, 0.0, 1.0)
    g.instantiate().close()
    g.close()
    assert er.stats()["ready"] == 1
    assert pcg.exec_reuse(False) is True and er.stats()["ready"] == 0
    g2, _, _ = two_step(mod, x, y, 2.0, 0.0, 0.0)
    with pcg.trace() as t:
        exe = g2.instantiate()
    assert "cuGraphExecUpdate" not in apis(t)
    run(exe, stream)
    np.testing.assert_allclose(y.to_numpy(np.float32), 2.0 * vec(5), rtol=1e-6, atol=1e-6)


def test_a_large_chain_is_reused_with_the_right_arguments(mod, reuse, stream):
    """200 chained nodes: each adds its own value; the reused exec adds the new graph's."""
    y = pcg.DeviceBuffer(4 * N)

    def chain(scale):
        g, prev, nodes = pcg.Graph(), None, []
        for i in range(200):
            prev = g.add_kernel(mod["add"], BLOCKS, 256, (y, scale * (i % 7), N),
                                deps=[prev] if prev is not None else [])
            nodes.append(prev)
        return g, nodes

    g1, _ = chain(1.0)
    g1.instantiate().close()
    g1.close()
    g2, nodes = chain(2.0)
    exe = g2.instantiate()
    assert er.stats()["ready"] == 0  # the kept exec was taken
    y.zero()
    run(exe, stream)
    total = 2.0 * sum(i % 7 for i in range(200))
    assert (y.to_numpy(np.float32) == total).all()
    exe.set_arg(nodes[100], "v", 1000.0)  # node 100 added 2 * (100 % 7) = 4
    y.zero()
    run(exe, stream)
    assert (y.to_numpy(np.float32) == total - 4.0 + 1000.0).all()


def test_a_reused_exec_updated_again_takes_both_graphs_nodes(mod, reuse, stream):
    x, y = pcg.DeviceBuffer.from_array(vec(6)), pcg.DeviceBuffer(4 * N)
    g1 = two_step(mod, x, y, 1.0, 0.0, 0.0)[0]
    g1.instantiate().close()
    g1.close()
    g2, a2, _ = two_step(mod, x, y, 2.0, 0.0, 0.0)
    exe = g2.instantiate()
    assert er.stats()["ready"] == 0  # reused
    g3, a3, b3 = two_step(mod, x, y, 3.0, 1.0, 1.0)
    exe.update(g3)
    run(exe, stream)
    np.testing.assert_allclose(y.to_numpy(np.float32), 3.0 * vec(6) + 2.0, rtol=1e-6, atol=1e-6)
    exe.set_arg(a2, "a", 4.0)  # the exec's own graph's node, as after any update
    exe.set_arg(b3, "v", 5.0)  # and the update graph's
    run(exe, stream)
    np.testing.assert_allclose(y.to_numpy(np.float32), 4.0 * vec(6) + 6.0, rtol=1e-6, atol=1e-6)
    assert exe.exec_node(a2) is exe.exec_node(a3)


def test_graphs_with_a_memset_node_are_not_reused_and_keep_their_own_sizes(mod, reuse, stream):
    """A memset node's per-node update reads its other parameters from the graph the exec's
    node belongs to: never reused, so a released exec of another size cannot leak it."""
    y = pcg.DeviceBuffer(4 * N)

    def build(nbytes):
        g = pcg.Graph()
        k = g.add_kernel(mod["axpb"], BLOCKS, 256, (y, y, 0.0, 4.0, N))
        return g, g.add_memset(y, 0, nbytes, deps=[k])

    g1, _ = build(4 * N)
    g1.instantiate().close()
    g1.close()
    assert er.stats() == {"ready": 0, "waiting": 0, "nodes": 0}
    g2, m2 = build(4)
    with pcg.trace() as t:
        exe = g2.instantiate()
    assert "cuGraphExecUpdate" not in apis(t) and "cuGraphInstantiateWithFlags" in apis(t)
    exe.set_params(m2, value=0)  # 4 bytes, as g2 says
    run(exe, stream)
    out = y.to_numpy(np.float32)
    assert out[0] == 0.0 and (out[1:] == 4.0).all()


def test_a_reused_exec_of_a_graph_closed_before_its_per_node_updates(mod, reuse, stream):
    x, y = pcg.DeviceBuffer.from_array(vec(7)), pcg.DeviceBuffer(4 * N)
    g1 = two_step(mod, x, y, 1.0, 0.0, 0.0)[0]
    g1.instantiate().close()
    g1.close()
    g2, n1, n2 = two_step(mod, x, y, 2.0, 0.0, 1.0)
    exe = g2.instantiate()
    assert er.stats()["ready"] == 0  # reused
    g2.close()  # kept while the exec lives: its nodes still name the exec's
    exe.set_arg(n2, "v", 3.0)
    run(exe, stream)
    np.testing.assert_allclose(y.to_numpy(np.float32), 2.0 * vec(7) + 3.0, rtol=1e-6, atol=1e-6)
    exe.close()  # kept again; the closed graph is destroyed now
    assert er.stats()["ready"] == 1
    with pytest.raises(pcg.ClosedError, match="belongs to Graph .* which was closed"):
        n2.dependencies


def test_reads_made_while_parking_stay_out_of_a_trace(mod, reuse, stream):
    x, y = pcg.DeviceBuffer.from_array(vec(8)), pcg.DeviceBuffer(4 * N)
    g = two_step(mod, x, y, 1.0, 0.0, 0.0)[0]
    exe = g.instantiate()
    with pcg.trace() as t:
        exe.close()  # parked: node and edge counts, node handles, enabled flags read
        g.close()  # the origin taken: node handles read
    assert er.stats()["ready"] == 1 and apis(t) == []


def test_wrapping_a_reused_execs_handle_is_refused_with_the_reason(mod, reuse, stream):
    # its nodes are the first graph's: per-node calls through the second graph's nodes
    # would reach no node of the exec (cudaErrorInvalidValue)
    x, y = pcg.DeviceBuffer.from_array(vec(7)), pcg.DeviceBuffer(4 * N)
    g1, _, _ = two_step(mod, x, y, 2.0, 1.0, 0.5)
    g1.instantiate().close()
    g1.close()
    g2, n1, _ = two_step(mod, x, y, 3.0, 0.0, 0.0)
    exe = g2.instantiate()
    assert er.origin_of(int(exe.handle)) == int(g1)
    with pytest.raises(pcg.ArgumentError, match="made by exec reuse"):
        pcg.GraphExec.wrap(int(exe.handle), owner=exe, graph=g2)
    exe.set_arg(n1, "a", 4.0)  # the exec itself addresses them
    run(exe, stream)
    np.testing.assert_allclose(y.to_numpy(np.float32), 4.0 * vec(7), rtol=1e-6, atol=1e-6)
    h = int(exe.handle)
    exe.close()
    assert er.origin_of(h) == 0
