"""CPU tests of ``pcg.capture(..., collectives=)`` (no GPU): the launch order kept per
communicator (stand-in events and streams), the refusal naming both graphs, the
communicator keys of CuPy / nccl4py / raw handles, NCCL kernels found by name, the
conditional-body limit, and what the capture and the graph do with the argument."""

from __future__ import annotations

import types

import pytest

import pycudagraph as pcg
from pycudagraph.capture import collectives as co
from pycudagraph.graph.exec import GraphExec
from tests.support.fakes import fake_graph, fake_if_node, fake_kernel, fake_kernel_node, fake_node, node_order

pytestmark = pytest.mark.usefixtures("cpu_device")


class _Event:
    def __init__(self, name):
        self.name, self.finished = name, False


class _Order(co.LaunchOrder):
    """LaunchOrder whose CUDA calls are written down: waits, queries, records."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def wait(self, stream_h, event):
        self.calls.append(("wait", stream_h, event.name))

    def done(self, event):
        self.calls.append(("query", event.name))
        return event.finished

    def record(self, exe, stream, stream_h):
        event = _Event(f"{exe.name}@{stream_h:x}")
        self.calls.append(("record", stream_h, event.name))
        exe.events.append(event)
        return event


class _Exec:
    def __init__(self, name):
        self.name, self.events = name, []


def _launcher(order):
    def base(exe, stream):
        order.calls.append(("launch", exe.name, stream))
    return base


def _use(mode, *keys, label="g"):
    return co.CollectiveUse(mode, [(k, f"comm {k}") for k in keys], label=label)


def _launch(order, exe, use, stream_h):
    order.launch(exe, use, stream_h, stream_h, _launcher(order))


def test_serialize_waits_for_the_other_streams_last_launch_of_the_communicator():
    order, a, b = _Order(), _Exec("A"), _Exec("B")
    ua, ub = _use("serialize", 1, label="graph A"), _use("serialize", 1, label="graph B")
    _launch(order, a, ua, 0xA)
    _launch(order, b, ub, 0xB)  # another stream: waits for A's launch
    _launch(order, a, ua, 0xA)  # and A, again, for B's
    assert order.calls == [
        ("launch", "A", 0xA), ("record", 0xA, "A@a"),
        ("wait", 0xB, "A@a"), ("launch", "B", 0xB), ("record", 0xB, "B@b"),
        ("wait", 0xA, "B@b"), ("launch", "A", 0xA), ("record", 0xA, "A@a")]


def test_one_stream_or_one_exec_needs_no_wait():
    order, a, b = _Order(), _Exec("A"), _Exec("B")
    ua, ub = _use("serialize", 1), _use("serialize", 1)
    _launch(order, a, ua, 0xA)
    _launch(order, b, ub, 0xA)  # same stream: stream order
    _launch(order, b, ub, 0xC)  # same exec: CUDA orders launches of one exec
    assert [c for c in order.calls if c[0] == "wait"] == []


def test_graphs_of_other_communicators_do_not_wait_for_each_other():
    order, a, b, c = _Order(), _Exec("A"), _Exec("B"), _Exec("C")
    _launch(order, a, _use("serialize", 1), 0xA)
    _launch(order, b, _use("serialize", 2), 0xB)
    assert not any(call[0] == "wait" for call in order.calls)
    _launch(order, c, _use("serialize", 1, 2), 0xC)  # both: waits for both, once each
    assert [call for call in order.calls if call[0] == "wait"] == [("wait", 0xC, "A@a"),
                                                                   ("wait", 0xC, "B@b")]


def test_refuse_names_both_graphs_while_the_other_may_still_run():
    order, a, b = _Order(), _Exec("A"), _Exec("B")
    _launch(order, a, _use("refuse", 7, label="graph A (captured at x.py:1)"), 0xA)
    ub = _use("refuse", 7, label="graph B (captured at x.py:2)")
    with pytest.raises(co.CollectiveOrderError) as err:
        _launch(order, b, ub, 0xB)
    text = str(err.value)
    assert "graph B (captured at x.py:2)" in text and "graph A (captured at x.py:1)" in text
    assert "comm 7" in text and "stream 0xb" in text and "stream 0xa" in text
    assert err.value.graphs == ("graph B (captured at x.py:2)", "graph A (captured at x.py:1)")
    assert ("launch", "B", 0xB) not in order.calls  # nothing launched
    a.events[-1].finished = True  # A is done: B may go, without a wait
    _launch(order, b, ub, 0xB)
    assert order.calls[-2:] == [("launch", "B", 0xB), ("record", 0xB, "B@b")]
    assert not any(call[0] == "wait" for call in order.calls)


def test_a_capture_naming_no_communicator_shares_the_one_of_the_process():
    order, a, b = _Order(), _Exec("A"), _Exec("B")
    ua, ub = co.CollectiveUse("serialize", ()), co.CollectiveUse("serialize", ())
    assert ua.communicators == (co.ANY_COMMUNICATOR,)
    _launch(order, a, ua, 0xA)
    _launch(order, b, ub, 0xB)
    assert ("wait", 0xB, "A@a") in order.calls


def test_communicator_keys_of_each_binding():
    cupy_like = types.SimpleNamespace(comm=0x1234)  # CuPy's NcclCommunicator.comm
    nccl4py_like = types.SimpleNamespace(ptr=0x1234)  # nccl4py's Communicator.ptr

    class Handle:  # nccl4py's low-level Comm: int()
        def __int__(self):
            return 0x1234
    keys = {co.communicator_key(c)[0] for c in (cupy_like, nccl4py_like, Handle(), 0x1234)}
    assert keys == {("comm", 0x1234)}  # one communicator, however it is held
    group = object()  # e.g. a torch.distributed process group: the object itself
    assert co.communicator_key(group)[0] == ("object", id(group))
    for bad in (None, "comm", b"x", 1.5, True):
        with pytest.raises(pcg.ArgumentError, match="a communicator must be"):
            co.communicator_key(bad)


@pytest.mark.parametrize("name, nccl", [
    ("_Z24ncclDevKernel_Generic_4K24ncclDevKernelArgs4K", True),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", True),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", True),
    ("ncclSymkDevKernel_AllReduce_AGxLL_R_f32", True),
    ("axpy", False), ("_ZN2at6native6kernelIfEEvv", False), ("", False)])
def test_nccl_kernels_are_known_by_name(name, nccl):
    assert co.is_nccl_kernel(name) is nccl


def test_marking_a_graph_finds_its_nccl_kernels_and_names_it(monkeypatch):
    g = fake_graph()
    nccl = fake_kernel_node(g, fake_kernel("int a, int b", name="ncclDevKernel_AllReduce_Sum_f32"))
    fake_kernel_node(g)  # an ordinary kernel
    fake_node(g)
    node_order(monkeypatch, g)
    comm = types.SimpleNamespace(comm=0xABC)
    use = co.mark_collectives(g, "refuse", [comm, comm])
    assert co.collective_use(g) is use and g.exec_type is co.CollectiveGraphExec
    assert use.mode == "refuse" and use.communicators == (co.communicator_key(comm),)
    assert use.nccl_nodes == (nccl.describe(),)
    assert f"graph 0x{int(g):x} (captured at " in use.label and "test_collectives.py" in use.label
    other = fake_graph()
    assert other.exec_type is GraphExec and co.collective_use(other) is None
    with pytest.raises(pcg.ArgumentError, match="collectives must be one of"):
        co.mark_collectives(other, "sometimes")


def test_the_collective_exec_overrides_launch_in_python_only():
    assert issubclass(co.CollectiveGraphExec, GraphExec)
    assert isinstance(co.CollectiveGraphExec.__dict__["launch"], types.FunctionType)
    assert GraphExec.launch is not co.CollectiveGraphExec.launch  # every other exec: as it was
    assert pcg.Graph.exec_type is GraphExec


def test_capture_checks_collectives_before_any_cuda_call():
    with pytest.raises(pcg.ArgumentError, match=r"collectives must be one of \['refuse', 'serialize'\]"):
        pcg.capture(0x1234, collectives="always")
    cap = pcg.capture(0x1234)
    assert cap.collectives is None
    with pytest.raises(pcg.ArgumentError, match="cap.collective needs pcg.capture"):
        cap.collective(types.SimpleNamespace(comm=1))
    cap = pcg.capture(0x1234, collectives="serialize")
    with pytest.raises(pcg.ArgumentError, match="a communicator must be"):
        cap.collective("not a communicator")
    cap.collective(types.SimpleNamespace(comm=1), 0x55)
    assert len(cap._comms) == 2


def test_a_body_holding_a_node_cuda_refuses_there_is_refused_by_name(monkeypatch):
    g = fake_graph()
    cond = fake_if_node(g)
    body = cond.body
    fake_kernel_node(body)
    fake_node(body)
    node_order(monkeypatch, g, body)
    co.check_body(body, cond)  # kernel and empty nodes: allowed
    record = fake_node(body, pcg.EventRecordNode)
    monkeypatch.setattr(pcg.EventRecordNode, "describe",  # the real one asks the driver
                        lambda self: f"<EventRecordNode 0x{int(self):x}>")
    node_order(monkeypatch, g, body)
    with pytest.raises(pcg.CaptureError) as err:
        co.check_body(body, cond)
    text = str(err.value)
    assert repr(cond) in text and record.describe() in text
    assert "CUDA allows only kernel, empty, memset, memcpy, child-graph and conditional" in text
    assert "NCCL_GRAPH_MIXING_SUPPORT=0" in text
