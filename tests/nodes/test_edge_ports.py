"""Node.dependency_ports / dependent_ports on the CPU: the 13.x calls and the 12.x _v2
forms are made through the _cuda.versions shim (recorded in place of cuda.bindings). On the
GPU (marker ``gpu``): the ports read back from a real graph."""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import versions
from pycudagraph.nodes.edges import edge_data
from tests.support.fakes import fake_graph, fake_node
from tests.support.captured_graph import N, buf_of
from tests.support.captured_graph import mod  # noqa: F401 - a fixture

_OK = rt.cudaError_t.cudaSuccess


@pytest.mark.parametrize("major,suffix", [(13, ""), (12, "_v2")])
def test_ports_through_the_shim(monkeypatch, cpu_device, major, suffix):
    g = fake_graph()
    a, b, c = fake_node(g), fake_node(g), fake_node(g)
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", major)
    monkeypatch.setattr(versions, "require", lambda feature, v: None)
    prog = edge_data("programmatic")[0]
    seen = []

    def make(name, nodes, data):
        def fn(node, count):
            seen.append((name, int(node), count))
            if count == 0:
                return _OK, [], [], len(nodes)
            return _OK, [x.handle for x in nodes], data, len(nodes)
        fn.__name__ = name
        monkeypatch.setattr(rt, name, fn, raising=False)
    make("cudaGraphNodeGetDependencies" + suffix, [a, b], [rt.cudaGraphEdgeData(), prog])
    make("cudaGraphNodeGetDependentNodes" + suffix, [a], [prog])
    assert c.dependency_ports == {a: "default", b: "programmatic"}
    assert c.dependent_ports == {a: "programmatic"}
    assert [s[0] for s in seen] == ["cudaGraphNodeGetDependencies" + suffix] * 2 + [
        "cudaGraphNodeGetDependentNodes" + suffix] * 2
    assert seen[0][1:] == (c._h, 0) and seen[1][1:] == (c._h, 2)


def test_12x_without_v2_says_what_is_missing(monkeypatch, cpu_device):
    import pycudagraph as pcg
    n = fake_node(fake_graph())
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 12)
    monkeypatch.delattr(rt, "cudaGraphNodeGetDependencies_v2", raising=False)
    with pytest.raises(pcg.NotSupportedError, match="without cudaGraphNodeGetDependencies_v2"):
        n.dependency_ports


@pytest.mark.parametrize("major,suffix", [(13, ""), (12, "_v2")])
def test_plain_topology_queries_use_the_lossless_form(monkeypatch, cpu_device, major, suffix):
    """12.x's plain cudaGraphGetEdges / cudaGraphNodeGetDependencies fail with
    cudaErrorLossyQuery on a graph with a programmatic edge (seen on the GPU with
    cuda-bindings 12.9): graph.edges and node.dependencies ask the _v2 forms there."""
    g = fake_graph()
    a, b = fake_node(g), fake_node(g)
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", major)
    seen = []

    def lossy(*args):
        return rt.cudaError_t.cudaErrorLossyQuery, None, None, 0
    for name in ("cudaGraphGetEdges", "cudaGraphNodeGetDependencies"):
        monkeypatch.setattr(rt, name, lossy)
        monkeypatch.setattr(rt, name + "_v2", lossy, raising=False)

    def edges(graph, count):
        seen.append("cudaGraphGetEdges" + suffix)
        if count == 0:
            return _OK, [], [], [], 1
        return _OK, [a.handle], [b.handle], [rt.cudaGraphEdgeData()], 1
    edges.__name__ = "cudaGraphGetEdges" + suffix
    monkeypatch.setattr(rt, edges.__name__, edges, raising=False)

    def deps(node, count):
        seen.append("cudaGraphNodeGetDependencies" + suffix)
        return _OK, [a.handle] if count else [], [rt.cudaGraphEdgeData()], 1
    deps.__name__ = "cudaGraphNodeGetDependencies" + suffix
    monkeypatch.setattr(rt, deps.__name__, deps, raising=False)
    assert versions.graph_get_edges(g.handle) == ([a.handle], [b.handle])
    assert versions.node_dependencies(b.handle) == [a.handle]
    assert set(seen) == {"cudaGraphGetEdges" + suffix, "cudaGraphNodeGetDependencies" + suffix}


@pytest.mark.parametrize("major", [13, 12])
def test_copy_attributes_order(monkeypatch, cpu_device, major):
    """13.x: cudaGraphKernelNodeCopyAttributes(dst, src). 12.x: the driver's
    cuGraphKernelNodeCopyAttributes(dst, src), since the 12.9 runtime binding copied nothing
    when called (src, dst) on the GPU."""
    from cuda.bindings import driver as dr
    g = fake_graph()
    dst, src = fake_node(g), fake_node(g)
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", major)
    seen = []

    def record(name):
        def fn(x, y):
            seen.append((name, int(x), int(y)))
            return (_OK if name.startswith("cuda") else dr.CUresult.CUDA_SUCCESS,)
        fn.__name__ = name
        return fn
    monkeypatch.setattr(rt, "cudaGraphKernelNodeCopyAttributes",
                        record("cudaGraphKernelNodeCopyAttributes"))
    monkeypatch.setattr(dr, "cuGraphKernelNodeCopyAttributes",
                        record("cuGraphKernelNodeCopyAttributes"))
    versions.kernel_node_copy_attributes(dst.handle, src.handle)
    name = "cudaGraphKernelNodeCopyAttributes" if major == 13 else "cuGraphKernelNodeCopyAttributes"
    assert seen == [(name, dst._h, src._h)]


@pytest.mark.parametrize("major", [13, 12])
def test_node_type_falls_back_to_the_driver_on_12x(monkeypatch, cpu_device, major):
    """12.x's runtime fails with cudaErrorUnknown on a conditional node under a 13.x driver:
    the driver's cuGraphNodeGetType answers there; on 13.x the error stands."""
    import pycudagraph as pcg
    from cuda.bindings import driver as dr
    n = fake_node(fake_graph())
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", major)

    def rt_type(node):
        return rt.cudaError_t.cudaErrorUnknown, None
    rt_type.__name__ = "cudaGraphNodeGetType"

    def dr_type(node):
        return dr.CUresult.CUDA_SUCCESS, dr.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    dr_type.__name__ = "cuGraphNodeGetType"
    monkeypatch.setattr(rt, "cudaGraphNodeGetType", rt_type)
    monkeypatch.setattr(dr, "cuGraphNodeGetType", dr_type)
    if major == 13:
        with pytest.raises(pcg.CudaError, match="cudaErrorUnknown"):
            versions.node_type(n.handle)
    else:
        assert versions.node_type(n.handle) == int(rt.cudaGraphNodeType.cudaGraphNodeTypeConditional)


# On the GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_dependency_ports_read_back(mod):
    x, y = buf_of(np.ones(N)), pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    a = g.add_kernel(mod["scale2"], N // 256, 256, (x, y, 2.0, N))
    b = g.add_kernel(mod["scale2"], N // 256, 256, (x, y, 3.0, N))
    c = g.add_empty(deps=[a])
    g.add_dependency(a, b, port="programmatic")
    assert b.dependency_ports == {a: "programmatic"}
    assert a.dependent_ports == {b: "programmatic", c: "default"}
