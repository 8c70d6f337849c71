"""CPU test: the facets of the node families other than kernels (fields, sites with their
side and extent, exec_fields, subgraphs and their names), and the features that read only
them: tree paths over the one walk, the exec's site writer of a copy, a conditional whose
bodies cannot be read. Each node's GetParams answer is a stand-in; no raw call reaches CUDA."""

import pytest

import pycudagraph as pcg
from pycudagraph._cuda import versions
from pycudagraph.inspect import tree
from pycudagraph.inspect.dot import graph_to_dot
from pycudagraph.nodes.facets import Site
from pycudagraph.nodes.memory_nodes import MemcpyParams, MemsetParams
from tests.support.fakes import (fake_edges, fake_exec, fake_graph, fake_if_node, fake_node,
                                 fake_read_node, node_order)


@pytest.fixture
def params(monkeypatch):
    """``{handle: params}`` answered by the copy and memset nodes' GetParams."""
    table = {}
    for cls in (pcg.MemcpyNode, pcg.MemsetNode):
        monkeypatch.setattr(cls, "params", property(lambda self: table[int(self)]))
    return table


def test_a_copy_says_its_sides_from_its_direction(params):
    g = fake_graph()
    up, flat3d = fake_node(g, pcg.MemcpyNode), fake_node(g, pcg.MemcpyNode)
    params[int(up)] = MemcpyParams(0x7F00_1000, 0x6000, 256, "host->device")
    params[int(flat3d)] = MemcpyParams(0x7F00_2000, 0x7F00_3000, 64, "default", 4, 2)
    assert up.fields() == {"dst": 0x7F00_1000, "src": 0x6000, "nbytes": 256,
                           "kind": "host->device", "height": 1, "depth": 1}
    assert up.sites() == [Site("src", 0, 0x6000, 256, side="host"),
                          Site("dst", 0, 0x7F00_1000, 256, side="device")]
    assert [s.side for s in flat3d.sites()] == ["any", "any"]
    assert flat3d.sites()[0].size_hint == 64 * 4 * 2
    assert up.exec_fields == {"dst", "src", "nbytes"} and flat3d.exec_fields == frozenset()
    assert up.work() == ("memcpy", 256)


def test_a_memset_site_spans_its_rows(params):
    g = fake_graph()
    m = fake_node(g, pcg.MemsetNode)
    params[int(m)] = MemsetParams(0x7F00_4000, 7, 4, 16, 3, 128)
    (s,) = m.sites()
    assert (s.place, s.address, s.size_hint) == ("dst", 0x7F00_4000, 2 * 128 + 64)
    assert "pitch" in m.exec_fields and m.fields()["value"] == 7
    with pytest.raises(pcg.ArgumentError, match="no site"):
        m.write_site(None, Site("src", 0, 1), 0x10)


def test_a_copy_site_is_written_through_the_exec_call(params, monkeypatch):
    g = fake_graph()
    c = fake_node(g, pcg.MemcpyNode)
    params[int(c)] = MemcpyParams(0x7F00_1000, 0x7F00_2000, 64, "device->device")
    node_order(monkeypatch, g)
    seen = []
    monkeypatch.setattr(pcg.MemcpyNode, "exec_set", lambda self, rec, **kw: seen.append(kw))
    exe = fake_exec(g)
    rec = exe.exec_node(c)
    site = c.sites()[1]
    c.write_site(rec, site, 0x7F00_9000)
    assert seen == [{"dst": 0x7F00_9000}]


def test_host_and_event_nodes_are_settable_only_with_python_objects():
    g = fake_graph()
    built = g.table.register(pcg.HostNode(g.table, 0x71, None))
    built._call = type("Call", (), {"fn": print, "args": (1,), "name": "print"})()
    assert built.exec_fields == {"fn", "args"} and built.fields() == {"fn": print, "args": (1,)}
    assert built.exec_operands({"args": (2,)}) == {"fn": print, "args": (2,)}
    with pytest.raises(pcg.ArgumentError, match="dict of field name"):
        built.exec_operands(["args"])
    raw = pcg.EventRecordNode(g.table, 0x72)
    assert raw.exec_fields == frozenset()


def test_tree_paths_and_names_come_from_the_walk(monkeypatch):
    g = fake_graph()
    a = fake_node(g)
    cond = fake_if_node(g)
    inner = fake_node(cond.body)
    child = fake_node(g, pcg.ChildGraphNode)
    kid = fake_graph()
    deep = fake_node(kid)
    kid.table.owner = child
    monkeypatch.setattr(pcg.ChildGraphNode, "child", property(lambda self: kid))
    node_order(monkeypatch, g, cond.body, kid)
    places = tree.walk(g)
    assert [(p.node, p.path, p.depth, p.parent, p.body) for p in places] == [
        (a, "0", 0, None, None), (cond, "1", 0, None, None), (inner, "1/then/0", 1, cond, "then"),
        (child, "2", 0, None, None), (deep, "2/child/0", 1, child, "child")]
    assert tree.inside_conditionals(places) == {inner}
    assert cond.shape() == "if (1 bodies)" and child.subgraph_names() == ["child"]
    fake_edges(monkeypatch)
    monkeypatch.setattr(versions, "graph_get_edges", lambda raw: ([], []))
    firsts = {cond.body.table.h: [inner], kid.table.h: [deep]}
    monkeypatch.setattr(versions, "graph_root_nodes",
                        lambda raw: [n.handle for n in firsts[int(raw)]])
    dot = graph_to_dot(g)
    assert 'subgraph "cluster_n1b0_"' in dot and 'subgraph "cluster_n2b0_"' in dot
    assert "n1 -> n1b0_0 [style=dashed" in dot and "n2 -> n2b0_0 [style=dashed" in dot


def test_unreadable_bodies_are_said_by_sites(monkeypatch):
    g = fake_graph()
    node = fake_read_node(g, pcg.ConditionalNode)

    def refuse(self):
        raise pcg.NotSupportedError("bodies", "13.2", "a CUDA 12.8 driver")
    monkeypatch.setattr(pcg.ConditionalNode, "bodies", property(refuse))
    with pytest.raises(pcg.NotSupportedError):
        node.subgraphs()
    with pytest.raises(pcg.PyCudaGraphError, match="cannot be read"):
        node.sites()
    assert node.shape() == "conditional (bodies unknown)" and node.repeats_bodies
    node_order(monkeypatch, g)
    assert [n for n, _, _ in g.table.walk()] == [node]  # yielded, not descended into
