"""CPU tests: ``ChildGraphNode.child`` is one wrapper per node, and what nodes added to it
keep alive is kept by the parent graph (and so by its execs). Fake graphs: no raw call
reaches CUDA."""

import gc
import weakref

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
import pycudagraph.nodes.structure as structure
from pycudagraph._lifetime import _refers_to, holders_of
from tests.support.fakes import _ids, fake_graph, fake_node


class Kept:
    """Something a node of the child graph points at."""


@pytest.fixture
def child_node(monkeypatch):
    g = fake_graph()
    node = fake_node(g, pcg.ChildGraphNode)
    raw = rt.cudaGraph_t(next(_ids))
    asked = []

    def call(fn, *args):
        assert fn is rt.cudaGraphChildGraphNodeGetGraph
        asked.append(args)
        return raw
    monkeypatch.setattr(structure, "call", call)
    return g, node, asked


def test_child_is_one_wrapper_per_node(child_node):
    g, node, asked = child_node
    child = node.child
    assert node.child is child and node.params["graph"] is child and len(asked) == 1
    assert child.table.owner is node


def test_what_the_child_keeps_is_kept_by_the_parent(child_node):
    g, node, _ = child_node
    kept = Kept()
    probe = weakref.ref(kept)
    node.child.table.ledger.hold(next(_ids), kept)  # what a node added to the child keeps
    del kept
    gc.collect()
    assert probe() is not None  # no longer only the wrapper's: the node keeps the wrapper
    assert _refers_to(g.keepalive(), probe())  # the parent's keepalive (an exec's snapshot)
    assert holders_of(probe())


def test_a_clones_copy_gets_its_own_child(child_node):
    g, node, asked = child_node
    child = node.child
    copy = pcg.ChildGraphNode(fake_graph().table, next(_ids))
    copy._child = child  # what Graph.clone's slot copy leaves
    assert copy.child is not child and copy.child.table.owner is copy
