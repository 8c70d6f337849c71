"""Misuse: edges and dependencies (self-edge, cycle, duplicate, missing, foreign, None).

CPU tests stand the driver's edge queries in with a host model (tests/support/fakes.py Edges);
GPU tests use real graphs and check a small graph still launches afterwards.
"""

import pytest

import pycudagraph as pcg

from tests.support.fakes import Edges, fake_graph, fake_node
from tests.support.healthy import assert_small_graph_works


@pytest.fixture
def chain(monkeypatch):
    """a -> b -> c in a fake graph, and a lone node d; the model answers edge queries."""
    g = fake_graph()
    a, b, c, d = (fake_node(g) for _ in range(4))
    edges = Edges().install(monkeypatch)
    edges.add(a, b)
    edges.add(b, c)
    return g, a, b, c, d


def test_self_edge(chain):
    g, a, *_ = chain
    with pytest.raises(pcg.ArgumentError, match="self-edge") as info:
        g.add_dependency(a, a)
    assert repr(a) in str(info.value)


def test_duplicate_edge(chain):
    g, a, b, *_ = chain
    with pytest.raises(pcg.ArgumentError, match="duplicate edge") as info:
        g.add_dependency(a, b)
    assert repr(a) in str(info.value) and repr(b) in str(info.value)


def test_two_cycle(chain):
    g, a, b, *_ = chain
    with pytest.raises(pcg.ArgumentError, match="cycle"):
        g.add_dependency(b, a)


def test_long_cycle_names_the_path(chain):
    g, a, b, c, _ = chain
    with pytest.raises(pcg.ArgumentError, match="cycle") as info:
        g.add_dependency(c, a)
    text = str(info.value)
    assert f"{a!r} -> {b!r} -> {c!r}" in text


def test_remove_missing_edge(chain):
    g, a, b, c, d = chain
    with pytest.raises(pcg.ArgumentError, match="no edge"):
        g.remove_dependency(a, c)  # a reaches c, but there is no direct edge
    with pytest.raises(pcg.ArgumentError, match="no edge"):
        g.remove_dependency(b, a)  # reversed
    with pytest.raises(pcg.ArgumentError, match="no edge"):
        g.remove_dependency(d, d)


@pytest.mark.parametrize("method", ["add_dependency", "remove_dependency"])
@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("bad", [None, 0, "node", 1.5, object()], ids=repr)
def test_not_a_node(chain, method, which, bad):
    g, a, b, *_ = chain
    args = (bad, b) if which == "a" else (a, bad)
    with pytest.raises(pcg.ArgumentError, match=f"{which} must be a graph node"):
        getattr(g, method)(*args)


@pytest.mark.parametrize("method", ["add_dependency", "remove_dependency"])
def test_node_of_another_graph(chain, method):
    g, a, *_ = chain
    other = fake_node(fake_graph())
    with pytest.raises(pcg.ArgumentError, match="belongs to another graph") as info:
        getattr(g, method)(a, other)
    assert repr(other) in str(info.value)


@pytest.mark.parametrize("deps, words", [
    ([None], r"deps\[0\] must be a graph node"),
    ("abc", r"deps\[0\] must be a graph node"),
    (5, "must be a node or a sequence"),
    ([1, 2], r"deps\[0\] must be a graph node"),
])
def test_bad_deps(chain, deps, words):
    g, *_ = chain
    for add in (g.add_empty, lambda deps: g.add_host(print, deps=deps),
                lambda deps: g.add_mem_alloc(64, deps=deps)):
        with pytest.raises(pcg.ArgumentError, match=words):
            add(deps=deps)


def test_duplicate_and_foreign_deps(chain):
    g, a, b, *_ = chain
    with pytest.raises(pcg.ArgumentError, match="twice"):
        g.add_empty(deps=[a, b, a])
    with pytest.raises(pcg.ArgumentError, match="another graph"):
        g.add_empty(deps=[a, fake_node(fake_graph())])


def test_remove_node_and_find_need_nodes(chain):
    g, a, *_ = chain
    with pytest.raises(pcg.ArgumentError, match="node must be a graph node"):
        g.remove_node(None)
    with pytest.raises(pcg.ArgumentError, match="another graph"):
        g.remove_node(fake_node(fake_graph()))
    with pytest.raises(pcg.ArgumentError, match="not a clone"):
        g.find(a)


# --- on the GPU -----------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_edge_misuse(helpers):
    g = pcg.Graph()
    a, b, c = g.add_empty(), g.add_empty(), g.add_empty()
    g.add_dependency(a, b)
    g.add_dependency(b, c)
    other = pcg.Graph()  # held: a node does not keep its graph alive
    cases = [
        (lambda: g.add_dependency(a, a), "self-edge"),
        (lambda: g.add_dependency(a, b), "duplicate edge"),
        (lambda: g.add_dependency(c, a), "cycle"),
        (lambda: g.add_dependency(b, a), "cycle"),
        (lambda: g.remove_dependency(a, c), "no edge"),
        (lambda: g.remove_dependency(c, b), "no edge"),
        (lambda: g.add_dependency(None, a), "a must be a graph node"),
        (lambda: g.add_dependency(a, other.add_empty()), "another graph"),
        (lambda: g.add_empty(deps=[a, a]), "twice"),
        (lambda: g.add_empty(deps=[None]), "must be a graph node"),
    ]
    for fn, words in cases:
        with pytest.raises(pcg.ArgumentError, match=words):
            fn()
    assert {(x._h, y._h) for x, y in g.edges} == {(a._h, b._h), (b._h, c._h)}
    g.remove_dependency(a, b)
    g.add_dependency(a, c)  # a -> c is fine: no cycle
    assert {(x._h, y._h) for x, y in g.edges} == {(b._h, c._h), (a._h, c._h)}
    g.instantiate().launch(pcg.Stream())
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_find_misuse(helpers):
    g = pcg.Graph()
    a = g.add_empty()
    clone = g.clone()
    assert clone.find(a) in clone.nodes
    with pytest.raises(pcg.ArgumentError, match="not a clone"):
        g.find(a)
    other = pcg.Graph()  # held: a node does not keep its graph alive
    with pytest.raises(pcg.ArgumentError, match="another graph"):
        clone.find(other.add_empty())
    with pytest.raises(pcg.ClosedError, match="was collected"):
        clone.find(pcg.Graph().add_empty())  # its graph went with the call
    with pytest.raises(pcg.ArgumentError, match="node must be a graph node"):
        clone.find(None)
    assert_small_graph_works(helpers)
