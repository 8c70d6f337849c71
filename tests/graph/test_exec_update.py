"""GPU tests for updating an instantiated graph: set_arg, set_params on every node type, enable/disable, whole-graph update."""

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1024


def arr(seed=0, n=N):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)

def test_set_arg_changes_next_launch_without_recapture(helpers, stream):
    dev = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    node = g.add_kernel(helpers["fill"], 4, 256, (dev, 1.0, N))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 1.0
    with pcg.trace() as t:
        exe.set_arg(node, "v", 5.0)
    assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 5.0).all()
    other = pcg.DeviceBuffer(4 * N)
    exe.set_params(node, args={0: other, "v": 7.0}, grid=8)
    exe.launch(stream)
    stream.synchronize()
    assert (other.to_numpy(np.float32) == 7.0).all()
    assert node.params.args["v"] == 1.0  # the graph node is unchanged
    with pytest.raises(pcg.ArgumentError, match="'v'"):
        exe.set_arg(node, "v", "x")
    exe.launch(stream)
    stream.synchronize()
    assert (other.to_numpy(np.float32) == 7.0).all()  # a failed set left the slot intact


def test_exec_set_params_memcpy_memset_host_child_event(helpers, stream):
    src1, src2 = pcg.DeviceBuffer.from_array(arr(1)), pcg.DeviceBuffer.from_array(arr(2))
    dst = pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    cp = g.add_memcpy(dst, src1)
    ms = g.add_memset(dst, 0, 4, element_size=4, deps=[cp])
    seen = []
    h = g.add_host(seen.append, args=("a",), deps=[ms])
    child = pcg.Graph()
    child.add_kernel(helpers["add_one"], 1, 1, (dst, 1))
    ch = g.add_child_graph(child, deps=[h])
    ev1, ev2 = pcg.Event(), pcg.Event()
    er = g.add_event_record(ev1, deps=[ch])
    exe = g.instantiate()
    exe.set_params(cp, src=src2)
    exe.set_params(ms, value=2.0)
    exe.set_params(h, fn=seen.append, args=("b",))
    child2 = pcg.Graph()
    child2.add_kernel(helpers["add_one"], 1, 1, (dst.ptr + 4 * 8, 1))
    exe.set_params(ch, graph=child2)
    exe.set_params(er, event=ev2)
    exe.launch(stream)
    exe.synchronize()
    out = dst.to_numpy(np.float32)
    expect = arr(2)
    expect[:4] = 2.0
    expect[8] += 1
    np.testing.assert_array_equal(out, expect)
    assert seen == ["b"] and ev2.query()


def test_enable_disable(helpers, stream):
    dev = pcg.DeviceBuffer(4)
    dev.zero()
    g = pcg.Graph()
    k = g.add_kernel(helpers["add_one"], 1, 1, (dev, 1))
    exe = g.instantiate()
    exe.set_enabled(k, False)
    assert not exe.is_enabled(k)
    exe.launch(stream)
    exe.set_enabled(k, True)
    exe.launch(stream)
    stream.synchronize()
    assert dev.to_numpy(np.float32)[0] == 1.0


def build_chain(helpers, dev, values):
    g = pcg.Graph()
    prev = ()
    for v in values:
        prev = (g.add_kernel(helpers["axpy"], 4, 256, (dev, dev, v, N), deps=prev),)
    return g


def test_whole_graph_update(helpers, stream):
    dev = pcg.DeviceBuffer.from_array(np.ones(N, np.float32))
    g1 = build_chain(helpers, dev, [1.0, 1.0])  # x *= 2 twice
    exe = g1.instantiate()
    g2 = build_chain(helpers, dev, [2.0, 2.0])  # x *= 3 twice
    exe.update(g2)
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 9.0).all()
    node_new = g2.nodes[0]
    exe.set_arg(node_new, "a", 0.0)  # nodes of the update's graph are accepted
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 27.0).all()

    g3 = build_chain(helpers, dev, [1.0, 1.0, 1.0])
    with pytest.raises(pcg.GraphExecUpdateError, match="topology changed") as info:
        exe.update(g3)
    assert "topology" in info.value.reason
    g4 = pcg.Graph()
    a = g4.add_kernel(helpers["axpy"], 4, 256, (dev, dev, 1.0, N))
    g4.add_memset(dev, 0, N, element_size=4, deps=[a])
    with pytest.raises(pcg.GraphExecUpdateError, match="node type changed; node: memset") as info:
        exe.update(g4)
    assert info.value.node.type == "memset"
    g5 = pcg.Graph()  # a different kernel in the same place is an allowed change
    a = g5.add_kernel(helpers["axpy"], 4, 256, (dev, dev, 1.0, N))
    g5.add_kernel(helpers["fill"], 4, 256, (dev, 1.0, N), deps=[a])
    exe.update(g5)
    exe.launch(stream)
    stream.synchronize()
    assert (dev.to_numpy(np.float32) == 1.0).all()


def test_per_node_updates_after_a_whole_graph_update_start_from_the_new_graph(stream):
    """After exe.update(g2), a per-node update keeps the fields it is not given as g2 set
    them (its size, its count), not as the graph the exec was made from."""
    src1, src2 = pcg.DeviceBuffer.from_array(arr(1)), pcg.DeviceBuffer.from_array(arr(2))
    src3 = pcg.DeviceBuffer.from_array(arr(3))
    dst = pcg.DeviceBuffer.from_array(np.full(N, 7.0, np.float32))
    out = pcg.DeviceBuffer.from_array(np.full(N, 5.0, np.float32))
    g1, g2 = pcg.Graph(), pcg.Graph()
    m1 = g1.add_memset(dst, 0, N, element_size=4)
    c1 = g1.add_memcpy(out, src1, deps=[m1])
    m2 = g2.add_memset(dst, 0, N // 2, element_size=4)
    g2.add_memcpy(out, src2, 2 * N, deps=[m2])  # half the bytes
    exe = g1.instantiate()
    exe.update(g2)
    exe.set_params(m1, value=3.0)  # count stays g2's: N // 2
    exe.set_params(c1, src=src3)  # size stays g2's: 2 * N bytes
    exe.launch(stream)
    stream.synchronize()
    want = np.full(N, 7.0, np.float32)
    want[:N // 2] = 3.0
    np.testing.assert_array_equal(dst.to_numpy(np.float32), want)
    want = np.full(N, 5.0, np.float32)
    want[:N // 2] = arr(3)[:N // 2]
    np.testing.assert_array_equal(out.to_numpy(np.float32), want)
