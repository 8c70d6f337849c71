"""Generic node parameters on the CPU: Graph.add_node, Node.set_node_params,
GraphExec.set_node_params and Node.node_params call cudaGraphAddNode & co. with the
right arguments (13.x and 12.x forms), check their arguments first, keep what they are
given, and are gated on the CUDA version. On the GPU (marker ``gpu``): a memset node added,
changed in the exec and in the graph, and read back."""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import versions
from tests.support.fakes import fake_graph, fake_node
from tests.support.captured_graph import N

_OK = rt.cudaError_t.cudaSuccess
NEW = 0x4500_0000


def _params():
    p = rt.cudaGraphNodeParams()
    p.type = rt.cudaGraphNodeType.cudaGraphNodeTypeEmpty
    return p


@pytest.fixture
def cuda(monkeypatch, cpu_device):
    seen = []
    monkeypatch.setattr(versions, "driver_version", lambda: 13000)

    def add(*args):
        seen.append(("add",) + args)
        return _OK, rt.cudaGraphNode_t(NEW)
    add.__name__ = "cudaGraphAddNode"

    def add_v2(*args):
        seen.append(("add_v2",) + args)
        return _OK, rt.cudaGraphNode_t(NEW)
    add_v2.__name__ = "cudaGraphAddNode_v2"

    def get_type(node):
        return _OK, rt.cudaGraphNodeType.cudaGraphNodeTypeEmpty
    get_type.__name__ = "cudaGraphNodeGetType"

    def rec(name):
        def fn(*args):
            seen.append((name,) + args)
            return (_OK,)
        fn.__name__ = name
        return fn
    monkeypatch.setattr(rt, "cudaGraphAddNode", add)
    monkeypatch.setattr(rt, "cudaGraphAddNode_v2", add_v2, raising=False)
    monkeypatch.setattr(rt, "cudaGraphNodeGetType", get_type)
    monkeypatch.setattr(rt, "cudaGraphNodeSetParams", rec("cudaGraphNodeSetParams"))
    monkeypatch.setattr(rt, "cudaGraphExecNodeSetParams", rec("cudaGraphExecNodeSetParams"))
    return seen


class Keep:
    pass


def test_add_node_13x(cuda, monkeypatch):
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 13)
    g = fake_graph()
    a, b = fake_node(g), fake_node(g)
    p, k = _params(), Keep()
    node = g.add_node(p, deps=[a, b], keep=[k])
    assert isinstance(node, pcg.EmptyNode) and node._h == NEW
    _, graph, deps, data, n, params = cuda[-1]
    assert (int(graph), [int(d) for d in deps], data, n, params) == (g.table.h, [a._h, b._h], None, 2, p)
    assert any(x is k for x in g.table.kept(node)) and any(x is p for x in g.table.kept(node))
    g.add_node(_params(), deps=[a, b], port="programmatic")
    data = cuda[-1][3]
    assert len(data) == 2 and all(int(d.type) == 1 for d in data)


def test_add_node_12x_uses_v2_for_ports(cuda, monkeypatch):
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 12)
    g = fake_graph()
    a = fake_node(g)
    g.add_node(_params(), deps=[a])
    assert cuda[-1][0] == "add" and len(cuda[-1]) == 5  # (graph, deps, n, params)
    g.add_node(_params(), deps=[a], port="programmatic")
    assert cuda[-1][0] == "add_v2" and len(cuda[-1][3]) == 1


def test_arguments_are_checked_before_any_call(cuda):
    g = fake_graph()
    other = fake_node(fake_graph())
    with pytest.raises(pcg.ArgumentError, match="params must be a cuda.bindings.runtime.cudaGraphNodeParams"):
        g.add_node(object())
    with pytest.raises(pcg.ArgumentError):
        g.add_node(_params(), deps=[other])  # a node of another graph
    with pytest.raises(ValueError, match="port must be one of"):
        g.add_node(_params(), port="sideways")
    n = fake_node(g)
    with pytest.raises(pcg.ArgumentError, match="params must be"):
        n.set_node_params({"type": 5})
    assert cuda == []


def test_set_node_params_in_graph_and_exec(cuda):
    g = fake_graph()
    n = fake_node(g)
    p, k = _params(), Keep()
    n.set_node_params(p, keep=[k])
    assert cuda[-1][0] == "cudaGraphNodeSetParams" and int(cuda[-1][1]) == n._h and cuda[-1][2] is p
    assert any(x is k for x in g.table.kept(n))
    exe = pcg.GraphExec.wrap(0x4600_0000, graph=g)
    exe.set_node_params(n, p, keep=[k])
    name, e, node, params = cuda[-1]
    assert (name, int(e), int(node), params) == ("cudaGraphExecNodeSetParams", 0x4600_0000, n._h, p)
    with pytest.raises(pcg.PyCudaGraphError, match="not a node of the graph"):
        exe.set_node_params(fake_node(fake_graph()), p)


def test_generic_calls_need_cuda_12_2(cuda, monkeypatch):
    monkeypatch.setattr(versions, "driver_version", lambda: 12010)
    g = fake_graph()
    with pytest.raises(pcg.NotSupportedError, match=r"cudaGraphAddNode needs CUDA 12\.2"):
        g.add_node(_params())
    with pytest.raises(pcg.NotSupportedError, match=r"cudaGraphNodeSetParams needs CUDA 12\.2"):
        fake_node(g).set_node_params(_params())
    assert cuda == []


def test_node_params_needs_cuda_13_2(cpu_device, monkeypatch):
    monkeypatch.setattr(versions, "driver_version", lambda: 13000)
    with pytest.raises(pcg.NotSupportedError, match=r"13\.2"):
        fake_node(fake_graph()).node_params


# On the GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_generic_memset_node_added_and_changed(stream):
    rt = pytest.importorskip("cuda.bindings.runtime")
    buf = pcg.DeviceBuffer(4 * N)

    def memset(value):
        p = rt.cudaGraphNodeParams()
        p.type = rt.cudaGraphNodeType.cudaGraphNodeTypeMemset
        p.memset.dst = buf.ptr
        p.memset.value = value
        p.memset.elementSize = 4
        p.memset.width = N
        p.memset.height = 1
        p.memset.pitch = 0
        return p
    g = pcg.Graph()
    node = g.add_node(memset(7), keep=[buf])
    assert node.type == "memset"
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    out = np.empty(N, np.uint32)
    buf.copy_to(out)
    assert (out == 7).all()
    exe.set_node_params(node, memset(9))
    exe.launch(stream)
    stream.synchronize()
    buf.copy_to(out)
    assert (out == 9).all()
    node.set_node_params(memset(11))
    g.instantiate().launch(stream)
    stream.synchronize()
    buf.copy_to(out)
    assert (out == 11).all()
    from pycudagraph._cuda import versions
    if versions.driver_version() >= 13020:
        assert int(node.node_params.memset.value) == 11
    else:
        with pytest.raises(pcg.NotSupportedError):
            node.node_params
