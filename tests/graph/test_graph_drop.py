"""A graph pycudagraph owns goes the moment its last reference does, with what its nodes
kept alive: no reference cycle waits for the collector (CPU: a fake raw graph whose
``cudaGraphDestroy`` is recorded, never made)."""

import gc
import weakref

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from tests.support.fakes import fake_graph, fake_kernel_node

pytestmark = pytest.mark.usefixtures("cpu_device")
_raw = iter(range(0x6100_0000, 0x6200_0000, 0x100))


class Kept:  # what a node points at (a buffer, a tensor)
    pass


@pytest.fixture
def destroyed(monkeypatch):
    """The raw graphs ``cudaGraphDestroy`` was called on; the collector off meanwhile."""
    calls = []
    monkeypatch.setattr(rt, "cudaGraphDestroy", lambda raw: calls.append(int(raw)) or (0,))
    gc.collect()
    gc.disable()
    yield calls
    gc.enable()


def owned_graph():
    """A Graph that owns its (fake) raw graph, as ``pcg.Graph()`` and captures make them."""
    return pcg.Graph._wrap(rt.cudaGraph_t(next(_raw)), owned=True)


def test_a_dropped_graph_goes_with_what_its_nodes_kept(destroyed):
    g = owned_graph()
    h = int(g)
    node = fake_kernel_node(g)
    obj = Kept()
    g.table.ledger.hold(id(node), node, obj)  # as an add keeps an argument
    kept, gone = weakref.ref(obj), weakref.ref(g)
    del obj
    assert kept() is not None  # the graph keeps it
    del g
    assert gone() is None, "the dropped graph waits for the collector"
    assert destroyed == [h]
    assert kept() is None, "what the graph's node kept outlived the graph"
    assert node.graph is None
    with pytest.raises(pcg.ClosedError, match="was collected"):
        node.check_live()


def test_closing_says_closed_not_collected(destroyed):
    g = owned_graph()
    node = fake_kernel_node(g)
    g.close()
    assert len(destroyed) == 1
    with pytest.raises(pcg.ClosedError, match="was closed"):
        node.check_live()
    del g
    assert len(destroyed) == 1  # once


def test_a_graph_that_owns_nothing_stays_while_its_nodes_do(destroyed):
    g = fake_graph()  # a wrapper of a graph made elsewhere (an inner or adopted graph)
    h = int(g)
    node = fake_kernel_node(g)
    gone = weakref.ref(g)
    del g
    assert gone() is not None and node.graph is gone()
    node.check_live()
    assert h not in destroyed  # not its to destroy


def test_an_inner_graph_wrapper_goes_once_its_graph_is_gone(destroyed):
    g = fake_graph()  # a wrapper of a graph it does not own (a body, a child graph)
    fake_kernel_node(g)
    g.table.kill("belongs to a node of Graph 0x1, which was collected")  # as its parent goes
    gone = weakref.ref(g)
    del g
    assert gone() is None, "a wrapper whose graph is gone waits for the collector"
