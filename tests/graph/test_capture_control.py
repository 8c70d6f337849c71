"""Capture control on the CPU: capture_info, update_capture_dependencies, capture_mode and
recapture make their raw calls with the right arguments on cuda-bindings 13.x and (shims
forced to 12.x) 12.x; arguments are checked before any call; the recapture gate. On the
GPU (marker ``gpu``): a node added by hand to a live capture, capture_mode, recapture."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import versions
from tests.support.fakes import fake_graph, fake_node
from tests.support.captured_graph import N, buf_of, read_back
from tests.support.captured_graph import mod  # noqa: F401 - a fixture

_OK = rt.cudaError_t.cudaSuccess
_ACTIVE = rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusActive
S = 0x4400_0000


@pytest.fixture
def graph_and_nodes(cpu_device):
    g = fake_graph()
    return g, fake_node(g), fake_node(g)


def test_capture_info_13x(monkeypatch, graph_and_nodes):
    g, a, b = graph_and_nodes
    from pycudagraph.nodes.edges import edge_data
    monkeypatch.setattr(versions, "require", lambda feature, v: None)
    data = [rt.cudaGraphEdgeData(), edge_data("programmatic")[0]]
    seen = []

    def info(stream):
        seen.append(int(stream))
        return _OK, _ACTIVE, 17, rt.cudaGraph_t(g.table.h), [a.handle, b.handle], data, 2
    info.__name__ = "cudaStreamGetCaptureInfo"
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 13)
    monkeypatch.setattr(rt, "cudaStreamGetCaptureInfo", info)
    got = pcg.capture_info(S, graph=g)
    assert seen == [S]
    assert (got.status, got.id, got.graph) == ("active", 17, g)
    assert got.dependencies == [a, b] and got.ports == ["default", "programmatic"]


def test_capture_info_12x_uses_v3_for_edge_data(monkeypatch, graph_and_nodes):
    g, a, b = graph_and_nodes
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 12)

    def v3(stream):
        return _OK, _ACTIVE, 5, rt.cudaGraph_t(g.table.h), [a.handle], [rt.cudaGraphEdgeData()], 1
    v3.__name__ = "cudaStreamGetCaptureInfo_v3"
    monkeypatch.setattr(rt, "cudaStreamGetCaptureInfo_v3", v3, raising=False)
    got = pcg.capture_info(S, graph=g)
    assert got.dependencies == [a] and got.ports == ["default"]
    monkeypatch.delattr(rt, "cudaStreamGetCaptureInfo_v3")

    def plain(stream):
        return _OK, _ACTIVE, 5, rt.cudaGraph_t(g.table.h), [a.handle, b.handle], 2
    plain.__name__ = "cudaStreamGetCaptureInfo"
    monkeypatch.setattr(rt, "cudaStreamGetCaptureInfo", plain)
    got = pcg.capture_info(S, graph=g)
    assert got.dependencies == [a, b] and got.ports is None


def test_capture_info_when_not_capturing(monkeypatch, cpu_device):
    def info(stream):
        return _OK, rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusNone, 0, None, [], [], 0
    info.__name__ = "cudaStreamGetCaptureInfo"
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 13)
    monkeypatch.setattr(rt, "cudaStreamGetCaptureInfo", info)
    got = pcg.capture_info(S)
    assert (got.status, got.id, got.graph, got.dependencies) == ("none", 0, None, [])


def _update_recorder(monkeypatch, name):
    seen = []

    def fn(*args):
        seen.append(args)
        return (_OK,)
    fn.__name__ = name
    monkeypatch.setattr(rt, name, fn, raising=False)
    return seen


def test_update_capture_dependencies_13x(monkeypatch, graph_and_nodes):
    g, a, b = graph_and_nodes
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 13)
    monkeypatch.setattr(versions, "require", lambda feature, v: None)
    seen = _update_recorder(monkeypatch, "cudaStreamUpdateCaptureDependencies")
    pcg.update_capture_dependencies(S, [a, b], mode="set")
    stream, deps, data, n, flags = seen[-1]
    assert (stream, [int(d) for d in deps], data, n, flags) == (S, [a._h, b._h], None, 2, 1)
    pcg.update_capture_dependencies(S, a, ports=["programmatic"])
    stream, deps, data, n, flags = seen[-1]
    assert (n, flags) == (1, 0) and int(data[0].type) == int(
        rt.cudaGraphDependencyType.cudaGraphDependencyTypeProgrammatic)


def test_update_capture_dependencies_12x(monkeypatch, graph_and_nodes):
    g, a, b = graph_and_nodes
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 12)
    monkeypatch.setattr(versions, "require", lambda feature, v: None)
    plain = _update_recorder(monkeypatch, "cudaStreamUpdateCaptureDependencies")
    v2 = _update_recorder(monkeypatch, "cudaStreamUpdateCaptureDependencies_v2")
    pcg.update_capture_dependencies(S, [a])
    assert len(plain[-1]) == 4 and plain[-1][2:] == (1, 0)
    pcg.update_capture_dependencies(S, [a, b], ports=["default", "programmatic"])
    assert len(v2[-1]) == 5 and v2[-1][3:] == (2, 0)


@pytest.mark.parametrize("kwargs,text", [
    (dict(nodes=[1]), "expected Nodes, got int"),
    (dict(mode="replace"), r"mode must be one of \['add', 'set'\]"),
    (dict(ports=["default"]), "1 ports for 2 nodes"),
    (dict(ports=["sideways", "default"]), "port must be one of"),
])
def test_update_capture_dependencies_checks_first(monkeypatch, graph_and_nodes, kwargs, text):
    g, a, b = graph_and_nodes
    seen = _update_recorder(monkeypatch, "cudaStreamUpdateCaptureDependencies")
    args = dict(nodes=[a, b]) | kwargs
    with pytest.raises((pcg.ArgumentError, ValueError), match=text):
        pcg.update_capture_dependencies(S, **args)
    assert seen == []


def test_capture_mode_exchanges_and_restores(monkeypatch, cpu_device):
    M = rt.cudaStreamCaptureMode
    current = [M.cudaStreamCaptureModeGlobal]
    seen = []

    def exchange(mode):
        seen.append(int(mode))
        old, current[0] = current[0], mode
        return _OK, old
    exchange.__name__ = "cudaThreadExchangeStreamCaptureMode"
    monkeypatch.setattr(rt, "cudaThreadExchangeStreamCaptureMode", exchange)
    with pcg.capture_mode("relaxed") as cm:
        assert cm.previous == "global" and current[0] == M.cudaStreamCaptureModeRelaxed
        with pcg.capture_mode("thread_local") as inner:
            assert inner.previous == "relaxed"
        assert current[0] == M.cudaStreamCaptureModeRelaxed
    assert current[0] == M.cudaStreamCaptureModeGlobal
    assert seen == [int(M.cudaStreamCaptureModeRelaxed), int(M.cudaStreamCaptureModeThreadLocal),
                    int(M.cudaStreamCaptureModeRelaxed), int(M.cudaStreamCaptureModeGlobal)]
    with pytest.raises(pcg.ArgumentError, match="capture_mode must be one of"):
        pcg.capture_mode("loose")


def test_recapture_is_gated_on_cuda_13_3(monkeypatch, cpu_device):
    g = fake_graph()
    rc = pcg.recapture(S, g)
    monkeypatch.setattr(versions, "driver_version", lambda: 13000)
    with pytest.raises(pcg.NotSupportedError,
                       match=r"cudaStreamBeginRecaptureToGraph needs CUDA 13\.3"):
        rc._begin(rc.stream, 0)
    monkeypatch.delattr(rt, "cudaStreamBeginRecaptureToGraph", raising=False)
    with pytest.raises(pcg.NotSupportedError, match=r"without cudaStreamBeginRecaptureToGraph"):
        rc._begin(rc.stream, 0)
    with pytest.raises(pcg.ArgumentError, match="graph must be a pycudagraph.Graph"):
        pcg.recapture(S, 0x1000)


def test_recapture_calls_with_the_graph(monkeypatch, cpu_device):
    g = fake_graph()
    seen = []

    def begin(stream, mode, graph, cb):
        seen.append((int(stream), int(mode), int(graph), cb))
        return (_OK,)
    begin.__name__ = "cudaStreamBeginRecaptureToGraph"
    monkeypatch.setattr(rt, "cudaStreamBeginRecaptureToGraph", begin, raising=False)
    monkeypatch.setattr(versions, "driver_version", lambda: 13030)
    rc = pcg.recapture(S, g, mode="relaxed")
    rc._begin(rc.stream, rt.cudaStreamCaptureMode.cudaStreamCaptureModeRelaxed)
    assert seen == [(S, int(rt.cudaStreamCaptureMode.cudaStreamCaptureModeRelaxed), g.table.h, None)]


def test_capture_info_edge_data_outlives_the_drivers_array(monkeypatch, graph_and_nodes):
    """cudaStreamGetCaptureInfo's edge data is a view of a driver array valid until the next
    call on the stream: the shim copies it out at once."""
    g, a, b = graph_and_nodes
    from pycudagraph.nodes.edges import edge_data
    monkeypatch.setattr(versions, "require", lambda feature, v: None)
    data = [edge_data("programmatic")[0]]

    def info(stream):
        return _OK, _ACTIVE, 3, rt.cudaGraph_t(g.table.h), [a.handle], data, 1
    info.__name__ = "cudaStreamGetCaptureInfo"
    monkeypatch.setattr(versions, "BINDINGS_MAJOR", 13)
    monkeypatch.setattr(rt, "cudaStreamGetCaptureInfo", info)
    got = versions.stream_capture_info(S)
    data[0].from_port, data[0].type = 0, 0  # the driver reuses its array
    assert got[4][0] is not data[0]
    from pycudagraph.nodes.edges import port_name
    assert port_name(got[4][0]) == "programmatic"


# On the GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_capture_then_patch_one_node_by_hand(mod, stream):
    """capture_info during a capture, a kernel node added by hand to the capture's graph,
    joined into the capture with update_dependencies('set'); the rest is captured after."""
    xs = np.arange(N, dtype=np.float32)
    x, y, y2 = buf_of(xs), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    blob = struct.pack("<QQi4x", y.ptr, y2.ptr, N)
    assert pcg.capture_info(stream).status == "none"
    with pcg.capture(stream) as cap:
        mod["scale2"].launch(N // 256, 256, (x, y, 2.0, N), stream=stream)
        info = cap.info
        assert info.status == "active" and info.id > 0 and len(info.dependencies) == 1
        assert pcg.capture_info(stream).id == info.id
        hand = info.graph.add_kernel(mod["scale2"], N // 256, 256, (y, y, 3.0, N),
                                     deps=info.dependencies)
        cap.update_dependencies([hand], mode="set")
        assert cap.info.dependencies == [hand]
        mod["copy_struct"].launch(N // 256, 256, (blob,), stream=stream)  # y2 = y + 1
    g = cap.graph
    assert g is info.graph and len(g) == 3
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y2), 6 * xs + 1)
    exe.set_arg(hand, "a", 4.0)  # the hand-made node keeps its signature
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y2), 8 * xs + 1)


@pytest.mark.gpu
def test_capture_mode_context_manager(stream):
    with pcg.capture_mode("relaxed") as cm:
        assert cm.previous == "global"
        with pcg.capture_mode("thread_local") as inner:
            assert inner.previous == "relaxed"
    with pcg.capture_mode("global") as again:
        assert again.previous == "global"


@pytest.mark.gpu
def test_recapture_into_the_same_graph_or_a_clear_error(mod, stream):
    from pycudagraph._cuda import versions
    xs = np.arange(N, dtype=np.float32)
    x, y = buf_of(xs), pcg.DeviceBuffer(4 * N)
    with pcg.capture(stream) as cap:
        mod["scale2"].launch(N // 256, 256, (x, y, 2.0, N), stream=stream)
    g = cap.graph
    if versions.driver_version() < 13030 or not hasattr(versions.rt, "cudaStreamBeginRecaptureToGraph"):
        with pytest.raises(pcg.NotSupportedError, match="13.3"):
            with pcg.recapture(stream, g):
                pass
        return
    with pcg.recapture(stream, g) as rc:
        mod["scale2"].launch(N // 256, 256, (x, y, 5.0, N), stream=stream)
    assert rc.graph is g and len(g) == 1
    g.instantiate().launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y), 5 * xs)
