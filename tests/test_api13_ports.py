"""Node.dependency_ports / dependent_ports on the CPU: the 13.x calls and the 12.x _v2
forms are made through the _cuda.versions shim (recorded in place of cuda.bindings)."""

from __future__ import annotations

import pytest
from cuda.bindings import runtime as rt

from pycudagraph._cuda import versions
from pycudagraph.edges import edge_data
from tests.fakes import fake_graph, fake_node

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
