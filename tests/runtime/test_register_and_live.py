"""Registration and liveness defined once (CPU, either route: the suite runs as built and
with PYCUDAGRAPH_NO_NATIVE=1). ``NodeTable.register`` is ``fast.register_node`` (the C
``record`` that the compiled kernel-node add records with, or its Python twin), and
``Node.live`` / ``Node.check_live`` judge by ``fast.node_live`` (the C ``node_live`` the
compiled argument updates use, or its twin)."""

import pytest

import pycudagraph as pcg
from pycudagraph import _lifetime
from pycudagraph._cuda import fast
from pycudagraph.errors import ClosedError
from pycudagraph.nodes import base as node_base
from pycudagraph.nodes import table as node_table

from tests.support.fakes import fake_graph, fake_node

COMPILED = fast.native_status().startswith("compiled")


def test_the_route_hands_out_one_implementation_of_each():
    from pycudagraph._cuda import hot_base
    if COMPILED:
        assert fast.register_node is fast._native.register_node
        assert fast.node_live is fast._native.node_live
    else:
        assert fast.register_node is hot_base.register_node
        assert fast.node_live is hot_base.node_live


def test_table_register_is_register_node(monkeypatch):
    seen = []

    def spy(table, node, *keep):
        seen.append((table, node, keep))
        return fast.register_node(table, node, *keep)
    monkeypatch.setattr(node_table, "_register_node", spy)
    g = fake_graph()
    marker = object()
    node = g.table.register(pcg.EmptyNode(g.table, 0x7A00), marker)
    assert seen == [(g.table, node, (marker,))]
    assert g.table.nodes[0x7A00] is node and g.table.kept(node) == (marker,)


def test_register_records_replaces_and_returns_the_node():
    g = fake_graph()
    node = fake_node(g)
    assert g.table.nodes[int(node)] is node and g.table.ledger.held[id(node)] == (node,)
    assert g.table.built(node) and g.table.kept(node) == ()
    a, b = object(), object()
    assert g.table.register(node, a, b) is node
    assert g.table.ledger.held[id(node)] == (node, a, b)
    assert g.table.register(node) is node  # replaced again: only the node itself
    assert g.table.ledger.held[id(node)] == (node,)


def test_register_on_a_shared_ledger_copies_it_first():
    g = fake_graph()
    first = fake_node(g)
    shared = g.table.ledger.share()
    before = dict(shared)
    second = fake_node(g)
    assert shared == before  # what an exec took is unchanged
    assert g.table.ledger.held is not shared and not g.table.ledger.shared
    assert set(g.table.ledger.held) == {id(first), id(second)}


def test_a_replaced_entry_lets_waiting_frees_retry(monkeypatch):
    calls = []
    monkeypatch.setattr(_lifetime, "_pending_frees", [object()])
    monkeypatch.setattr(_lifetime, "retry_frees", lambda: calls.append(1))
    g = fake_graph()
    node = fake_node(g)
    assert calls == []  # a new entry replaces nothing
    g.table.register(node, object())
    assert calls == [1]


def test_register_refuses_what_is_not_a_node_table():
    g = fake_graph()
    node = pcg.EmptyNode(g.table, 0x7B00)
    with pytest.raises((TypeError, AttributeError)):
        fast.register_node(object(), node)
    assert 0x7B00 not in g.table.nodes


def test_live_and_check_live_judge_by_node_live(monkeypatch):
    g = fake_graph()
    node = fake_node(g)
    assert node.live and fast.node_live(node)
    node.check_live()
    asked = []
    monkeypatch.setattr(node_base, "_node_live", lambda n: asked.append(n) or False)
    assert not node.live
    node.check_live()  # not removed, graph valid: the diagnosis finds nothing to refuse
    assert asked == [node, node]


def test_removed_and_destroyed_nodes_are_not_live():
    g = fake_graph()
    removed, other = fake_node(g), fake_node(g)
    removed.mark_removed()
    assert not removed.live and not fast.node_live(removed)
    with pytest.raises(ClosedError, match="was removed from its graph"):
        removed.check_live()
    assert other.live
    g.table.dead = "was destroyed"
    assert not other.live and not fast.node_live(other)
    with pytest.raises(ClosedError, match="was destroyed"):
        other.check_live()
    g.table.dead = ""
    assert other.live


def test_node_live_is_false_for_what_is_not_a_node():
    assert not fast.node_live(object())
    assert not fast.node_live(None)
