"""``pcg.diff(old, new)`` on fake graphs (CPU): pairing in creation order, the topology
(node count, types, edges, bodies), kernel arguments by name and by index (bytes), copy /
memset / host fields, conditional bodies, child graphs, and the readable text."""

from types import SimpleNamespace

import pytest

import pycudagraph as pcg
from pycudagraph.inspect.diff import Change, GraphDiff
from pycudagraph.inspect.node_views import KernelView
from pycudagraph.nodes.captured_args import CapturedArgs
from tests.support.fakes import (fake_edges, fake_graph, fake_if_node, fake_kernel, fake_node,
                                 fake_read_node, node_order)

SIG = "int a, int b"


@pytest.fixture
def kern(cpu_device):
    return fake_kernel(SIG)


def knode(graph, kernel, args=(1, 2), grid=1, block=32):
    pack = kernel.pack(args, grid, block)
    return graph.table.register(pcg.KernelNode(graph.table, int(pack.address) ^ id(graph), pack), pack)


def two(monkeypatch, kern, args_old, args_new, **dims):
    g1, g2 = fake_graph(), fake_graph()
    old = [knode(g1, kern, a) for a in args_old]
    new = [knode(g2, kern, a, **dims) for a in args_new]
    node_order(monkeypatch, g1, g2)
    fake_edges(monkeypatch, *zip(old, old[1:]), *zip(new, new[1:]))
    return g1, g2, old, new


def test_one_argument_by_name(monkeypatch, kern):
    g1, g2, old, new = two(monkeypatch, kern, [(1, 2), (3, 4)], [(1, 2), (3, 5)])
    d = pcg.diff(g1, g2)
    assert isinstance(d, GraphDiff) and d.same_topology and d
    assert len(d.changes) == 1
    c = d.changes[0]
    assert isinstance(c, Change)
    assert (c.node, c.new_node, c.field, c.old, c.new, c.key) == (old[1], new[1], "arg 'b'", 4, 5,
                                                                   ("args", "b"))
    assert c.settable and c.where == "node 1"
    assert d.changed_nodes == [old[1]]
    text = str(d)
    assert "same topology (2 nodes)" in text and "node 1 (kernel k): arg 'b': 4 -> 5" in text


def test_nothing_differs(monkeypatch, kern):
    g1, g2, _, _ = two(monkeypatch, kern, [(1, 2)], [(1, 2)])
    d = pcg.diff(g1, g2)
    assert d.same_topology and not d.changes and not d and len(d) == 0


def test_dimensions(monkeypatch, kern):
    g1, g2, _, _ = two(monkeypatch, kern, [(1, 2)], [(1, 2)], grid=4, block=64)
    d = pcg.diff(g1, g2)
    assert [(c.field, c.old, c.new) for c in d.changes] == [("grid", (1, 1, 1), (4, 1, 1)),
                                                           ("block", (32, 1, 1), (64, 1, 1))]


def test_function_change_needs_update(monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    knode(g1, kern)
    knode(g2, fake_kernel(SIG))
    node_order(monkeypatch, g1, g2)
    fake_edges(monkeypatch)
    (c,) = pcg.diff(g1, g2).changes
    assert c.field == "function" and not c.settable


def test_topology_count_type_and_edges(monkeypatch, kern):
    g1, g2, g3 = fake_graph(), fake_graph(), fake_graph()
    a1, b1 = knode(g1, kern), knode(g1, kern)
    a2, b2, _ = knode(g2, kern), knode(g2, kern), knode(g2, kern)
    a3, e3 = knode(g3, kern), fake_node(g3)
    node_order(monkeypatch, g1, g2, g3)
    fake_edges(monkeypatch, (a1, b1), (b2, a2), (a3, e3))
    d = pcg.diff(g1, g2)
    assert not d.same_topology
    assert "graph: 2 nodes -> 3 nodes" in d.topology
    assert "edge node 0 -> node 1 removed" in d.topology
    assert "edge node 1 -> node 0 added" in d.topology
    d = pcg.diff(g1, g3)
    assert d.topology == ["node 1: kernel -> empty"]
    assert "topology differs" in str(d) and "node 1: kernel -> empty" in str(d)


def test_conditional_bodies_are_compared(monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    knode(g1, kern)
    knode(g2, kern)
    i1, i2 = fake_if_node(g1), fake_if_node(g2)
    inner1 = knode(i1.body, kern, (5, 6))
    inner2 = knode(i2.body, kern, (5, 7))
    node_order(monkeypatch, g1, g2, i1.body, i2.body)
    fake_edges(monkeypatch)
    d = pcg.diff(g1, g2)
    assert d.same_topology and d.nodes == 3
    (c,) = d.changes
    assert c.node is inner1 and c.new_node is inner2
    assert c.where == "node 0 in body 0 of node 1" and c.field == "arg 'b'"


def test_conditional_body_topology(monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    i1, i2 = fake_if_node(g1), fake_if_node(g2)
    knode(i1.body, kern)
    node_order(monkeypatch, g1, g2, i1.body, i2.body)
    fake_edges(monkeypatch)
    d = pcg.diff(g1, g2)
    assert d.topology == ["body in body 0 of node 0: 1 nodes -> 0 nodes"]


def fake_captured(monkeypatch, table: dict):
    """CapturedArgs.of(node) answers the (function, argument bytes) given for it."""
    def of(cls, node):
        func, raw = table[int(node)]
        p = SimpleNamespace(func=func, kern=0, gridDimX=1, gridDimY=1, gridDimZ=1, blockDimX=32,
                            blockDimY=1, blockDimZ=1, sharedMemBytes=0)
        return SimpleNamespace(params=p, info=[(0, len(b)) for b in raw],
                               get=lambda i, raw=raw: raw[i])
    monkeypatch.setattr(CapturedArgs, "of", classmethod(of))


def test_captured_arguments_by_index_as_bytes(monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    x = fake_read_node(g1, pcg.CapturedKernelNode)
    y = fake_read_node(g2, pcg.CapturedKernelNode)
    old_struct = (0x1000).to_bytes(8, "little") + (0x7F00_0000).to_bytes(8, "little")
    new_struct = (0x1000).to_bytes(8, "little") + (0x7F00_8000).to_bytes(8, "little")
    fake_captured(monkeypatch, {int(x): (9, [b"\1\0\0\0", old_struct]),
                                int(y): (9, [b"\1\0\0\0", new_struct])})
    monkeypatch.setattr(pcg.CapturedKernelNode, "kernel_name", property(lambda self: "gemm"))
    node_order(monkeypatch, g1, g2)
    fake_edges(monkeypatch)
    d = pcg.diff(g1, g2)
    (c,) = d.changes
    assert (c.field, c.key, c.old, c.new) == ("arg 1", ("args", 1), old_struct, new_struct)
    assert "arg 1: bytes 8..15: 0x7f000000 -> 0x7f008000" in str(d)


def test_built_against_captured_compares_bytes(monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    x = knode(g1, kern, (1, 2))
    y = fake_read_node(g2, pcg.CapturedKernelNode)
    fake_captured(monkeypatch, {int(y): (x.function, [(1).to_bytes(4, "little"),
                                                      (3).to_bytes(4, "little")])})
    node_order(monkeypatch, g1, g2)
    fake_edges(monkeypatch)
    (c,) = pcg.diff(g1, g2).changes
    assert (c.field, c.old, c.new) == ("arg 1", (2).to_bytes(4, "little"), (3).to_bytes(4, "little"))


def test_kernel_view_of_a_built_node(kern, cpu_device):
    g = fake_graph()
    v = KernelView.of_pack(kern.pack((7, 8), 2, 64))
    n = knode(g, kern, (7, 8), 2, 64)
    assert v.names == ("a", "b") and v.values == (7, 8) and v.grid == (2, 1, 1)
    assert v.raw == tuple(n.arguments) == ((7).to_bytes(4, "little"), (8).to_bytes(4, "little"))


def test_copy_memset_and_host_fields(monkeypatch, kern):
    from pycudagraph.nodes.memory_nodes import MemcpyParams, MemsetParams
    g1, g2 = fake_graph(), fake_graph()
    c1, c2 = fake_node(g1, pcg.MemcpyNode), fake_node(g2, pcg.MemcpyNode)
    m1, m2 = fake_node(g1, pcg.MemsetNode), fake_node(g2, pcg.MemsetNode)
    h1 = g1.table.register(pcg.HostNode(g1.table, 0x51))
    h2 = g2.table.register(pcg.HostNode(g2.table, 0x52))
    params = {int(c1): MemcpyParams(0x100, 0x200, 64, "device->device"),
              int(c2): MemcpyParams(0x100, 0x300, 64, "device->device"),
              int(m1): MemsetParams(0x400, 0, 4, 16, 1, 64),
              int(m2): MemsetParams(0x400, 7, 4, 16, 1, 64),
              int(h1): {"fn": print, "args": (1,)}, int(h2): {"fn": repr, "args": (1,)}}
    for cls in (pcg.MemcpyNode, pcg.MemsetNode, pcg.HostNode):
        monkeypatch.setattr(cls, "params", property(lambda self: params[int(self)]))
    node_order(monkeypatch, g1, g2)
    fake_edges(monkeypatch)
    d = pcg.diff(g1, g2)
    got = [(c.node, c.field, c.old, c.new, c.settable) for c in d.changes]
    assert got == [(c1, "src", 0x200, 0x300, True), (m1, "value", 0, 7, True),
                   (h1, "fn", print, repr, True)]


def test_child_graph_changes_are_one_change(monkeypatch, kern):
    g1, g2, k1, k2 = fake_graph(), fake_graph(), fake_graph(), fake_graph()
    n1 = fake_node(g1, pcg.ChildGraphNode)
    n2 = fake_node(g2, pcg.ChildGraphNode)
    knode(k1, kern, (1, 2))
    knode(k2, kern, (1, 3))
    children = {int(n1): k1, int(n2): k2}
    monkeypatch.setattr(pcg.ChildGraphNode, "child", property(lambda self: children[int(self)]))
    node_order(monkeypatch, g1, g2, k1, k2)
    fake_edges(monkeypatch)
    (c,) = pcg.diff(g1, g2).changes
    assert c.field == "graph" and c.settable and c.detail.changes[0].field == "arg 'b'"
    assert "child graph differs" in str(c)


def test_refuses_what_is_not_a_graph(kern):
    with pytest.raises(pcg.ArgumentError, match="diff: new must be a pycudagraph.Graph"):
        pcg.diff(fake_graph(), object())


def test_a_conditional_handle_argument_matches_its_pair(monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    setters = knode(g1, kern, (0x51, 1)), knode(g2, kern, (0x52, 1))
    i1, i2 = fake_if_node(g1), fake_if_node(g2)
    i1._handle, i2._handle = pcg.ConditionalHandle(g1, 0x51), pcg.ConditionalHandle(g2, 0x52)
    node_order(monkeypatch, g1, g2, i1.body, i2.body)
    fake_edges(monkeypatch, (setters[0], i1), (setters[1], i2))
    d = pcg.diff(g1, g2)
    assert d.same_topology and not d.changes, str(d)
