"""Graph.describe / print(graph), IDs and exec flags on the CPU: graphs of fake nodes,
driver calls replaced by recorders, the version gates' messages. On the GPU (marker
``gpu``): a captured graph described, IDs on this driver, flags read back."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.graph import introspect
from pycudagraph._cuda import versions
from tests.support.fakes import fake_graph, fake_node, fake_read_node
from tests.support.captured_graph import N, buf_of, captured_graph
from tests.support.captured_graph import mod  # noqa: F401 - a fixture


def _ok(*values):
    return (rt.cudaError_t.cudaSuccess, *values)


def test_topological_order_keeps_creation_order_among_ready_nodes():
    a, b, c, d, e = "abcde"
    order = introspect.topological_order([a, b, c, d, e], [(c, a), (a, d), (b, d), (e, c)])
    assert order == [b, e, c, a, d]
    assert introspect.topological_order([a, b], []) == [a, b]


@pytest.fixture
def listing(monkeypatch, cpu_device):
    g = fake_graph()
    k1 = fake_read_node(g, pcg.CapturedKernelNode)
    k2 = fake_read_node(g, pcg.CapturedKernelNode)
    e = fake_node(g, pcg.EmptyNode)
    monkeypatch.setattr(pcg.Graph, "nodes", property(lambda self: [k2, e, k1]))
    monkeypatch.setattr(pcg.Graph, "edges", property(lambda self: [(k1, k2), (k2, e)]))

    def params(self):
        p = dr.CUDA_KERNEL_NODE_PARAMS()
        p.func = dr.CUfunction(0xF00 + (self._h & 0xFFF))
        p.gridDimX, p.gridDimY, p.gridDimZ = (120, 1, 1) if self is k1 else (4, 2, 1)
        p.blockDimX, p.blockDimY, p.blockDimZ = 128, 1, 1
        p.sharedMemBytes = 0 if self is k1 else 1024
        return p
    monkeypatch.setattr(pcg.KernelNode, "driver_params", params)
    names = {k1._h: "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", k2._h: "gemm"}
    monkeypatch.setattr(pcg.CapturedKernelNode, "mangled_name", property(lambda self: names[self._h]))
    return g, k1, k2, e


def test_describe_lists_nodes_in_topological_order(listing, monkeypatch):
    g, k1, k2, e = listing

    def no_ids(name, version):
        raise pcg.NotSupportedError(name, "13.1", "a CUDA 12.8 driver")
    monkeypatch.setattr(versions, "gated", no_ids)
    text = g.describe()
    assert str(g) == text
    lines = text.splitlines()
    assert lines[0] == f"Graph 0x{g.table.h:x}: 3 nodes, 2 edges"
    assert re.match(rf"  \[0\] kernel +id=- +node=0x{k1._h:x}  at::native::vectorized_elementwise_kernel"
                    rf"<<<\(120,1,1\), \(128,1,1\), 0>>> func=0x{0xF00 + (k1._h & 0xFFF):x}  deps: -$", lines[1]), lines[1]
    assert re.match(rf"  \[1\] kernel +id=- +node=0x{k2._h:x}  gemm<<<\(4,2,1\), \(128,1,1\), 1024>>> "
                    r"func=0x[0-9a-f]+  deps: 0$", lines[2]), lines[2]
    assert re.match(rf"  \[2\] empty +id=- +node=0x{e._h:x}  empty  deps: 1$", lines[3]), lines[3]


def test_describe_shows_local_ids_where_the_driver_has_them(listing, monkeypatch):
    g, k1, k2, e = listing
    ids = {k1._h: 7, k2._h: 8, e._h: 9}
    seen = []

    def gated(name, version):
        seen.append((name, version))

        def fn(handle):
            return _ok(ids[int(handle)])
        fn.__name__ = name
        return fn
    monkeypatch.setattr(versions, "gated", gated)
    lines = g.describe().splitlines()
    assert [re.search(r"id=(\d+)", line)[1] for line in lines[1:]] == ["7", "8", "9"]
    assert set(seen) == {("cudaGraphNodeGetLocalId", 13010)}
    assert (k1.local_id, e.local_id) == (7, 9)


def _recorder(monkeypatch, name, value):
    seen = []

    def fn(handle):
        seen.append(int(handle))
        return _ok(value)
    fn.__name__ = name
    monkeypatch.setattr(rt, name, fn, raising=False)
    monkeypatch.setattr(versions, "driver_version", lambda: 13010)
    return seen


def test_ids_make_their_calls(monkeypatch, cpu_device):
    g = fake_graph()
    n = fake_node(g)
    exe = pcg.GraphExec.wrap(0x6300_0000, graph=g)
    assert _recorder(monkeypatch, "cudaGraphGetId", 3) is not None and g.id == 3
    seen = _recorder(monkeypatch, "cudaGraphExecGetId", 4)
    assert exe.id == 4 and seen == [0x6300_0000]
    seen = _recorder(monkeypatch, "cudaGraphNodeGetToolsId", 1 << 40)
    assert n.tools_id == 1 << 40 and seen == [n._h]
    _recorder(monkeypatch, "cudaGraphNodeGetContainingGraph", rt.cudaGraph_t(g.table.h))
    assert n.containing_graph is g
    _recorder(monkeypatch, "cudaGraphNodeGetContainingGraph", rt.cudaGraph_t(g.table.h + 1))
    with pytest.raises(pcg.ClosedError, match="is held by graph"):
        n.containing_graph


def test_ids_need_cuda_13_1_bindings(monkeypatch, cpu_device):
    g = fake_graph()
    monkeypatch.delattr(rt, "cudaGraphGetId", raising=False)
    with pytest.raises(pcg.NotSupportedError,
                       match=r"cudaGraphGetId needs CUDA 13\.1 \(cuda-bindings >= 13\.1\) or newer; "
                             r"this system has cuda-bindings .* without cudaGraphGetId"):
        g.id


def test_ids_need_a_cuda_13_1_driver(monkeypatch, cpu_device):
    n = fake_node(fake_graph())
    _recorder(monkeypatch, "cudaGraphNodeGetLocalId", 1)
    monkeypatch.setattr(versions, "driver_version", lambda: 13000)
    with pytest.raises(pcg.NotSupportedError,
                       match=r"cudaGraphNodeGetLocalId needs CUDA 13\.1 or newer; this system has "
                             r"a CUDA 13\.0 driver"):
        n.local_id


def test_exec_flags_name_the_instantiate_keywords(monkeypatch, cpu_device):
    F = rt.cudaGraphInstantiateFlags
    bits = int(F.cudaGraphInstantiateFlagAutoFreeOnLaunch) | int(F.cudaGraphInstantiateFlagUseNodePriority)
    seen = _recorder(monkeypatch, "cudaGraphExecGetFlags", bits)
    exe = pcg.GraphExec.wrap(0x6400_0000)
    assert exe.flags == {"auto_free_on_launch": True, "device_launch": False,
                         "use_node_priority": True}
    assert seen == [0x6400_0000]


# On the GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_describe_lists_a_captured_graph(mod, stream):
    x, y, y2 = buf_of(np.ones(N)), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = captured_graph(mod, stream, x, y, y2)
    lines = str(g).splitlines()
    assert lines[0].endswith("2 nodes, 1 edges")
    assert "[0] kernel" in lines[1] and "scale2<<<(16,1,1), (256,1,1), 0>>>" in lines[1]
    assert lines[1].endswith("deps: -")
    assert "[1] kernel" in lines[2] and "copy_struct<<<" in lines[2]
    assert lines[2].endswith("deps: 0")
    assert "func=0x" in lines[1] and "func=0x0 " not in lines[1]


@pytest.mark.gpu
def test_ids_on_this_driver(stream):
    from pycudagraph._cuda import versions
    g = pcg.Graph()
    a = g.add_empty()
    b = g.add_empty(deps=[a])
    if versions.driver_version() < 13010 or not hasattr(versions.rt, "cudaGraphGetId"):
        with pytest.raises(pcg.NotSupportedError, match="13.1"):
            g.id
        with pytest.raises(pcg.NotSupportedError, match="13.1"):
            a.local_id
        assert "id=-" in g.describe()
        return
    assert isinstance(g.id, int) and a.local_id != b.local_id
    assert a.tools_id != b.tools_id
    assert a.containing_graph is g
    exe = g.instantiate()
    assert isinstance(exe.id, int)
    assert f"id={a.local_id}" in g.describe()


@pytest.mark.gpu
def test_exec_flags_read_back():
    g = pcg.Graph()
    g.add_empty()
    assert g.instantiate().flags == {"auto_free_on_launch": False, "device_launch": False,
                                     "use_node_priority": False}
    exe = g.instantiate(auto_free_on_launch=True, use_node_priority=True)
    flags = exe.flags
    assert flags["auto_free_on_launch"] and not flags["device_launch"]
    # what CUDA reports, decoded bit by bit (the CUDA 13.0 driver seen on an H100 does not
    # report UseNodePriority back, though instantiation accepted it)
    bits = int(pcg._cuda.call(pcg._cuda.rt.cudaGraphExecGetFlags, exe.handle))
    prio = int(pcg._cuda.rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagUseNodePriority)
    assert flags["use_node_priority"] == bool(bits & prio)
