"""Property tests (hypothesis, GPU): random DAGs against a host model.

Random DAGs built with ``add_kernel`` / ``add_empty`` (deps at creation) and
``add_dependency`` (edges added later) are checked for nodes, edges, root nodes,
dependencies and dependents; then clone + find, per-node ``set_arg`` and whole-graph
``update`` are checked by what the kernels write.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def dags(draw, max_nodes=10):
    n = draw(st.integers(1, max_nodes))
    kinds = draw(st.lists(st.sampled_from(["kernel", "empty"]), min_size=n, max_size=n))
    edges = set()
    for j in range(1, n):
        for i in draw(st.lists(st.integers(0, j - 1), max_size=3, unique=True)):
            edges.add((i, j))
    late = {e for e in edges if draw(st.booleans())}  # added with add_dependency afterwards
    values = draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
    return n, kinds, edges, late, values


def build(helpers, dag, buf, values=None):
    n, kinds, edges, late, vals = dag
    vals = values if values is not None else vals
    g = pcg.Graph()
    nodes = []
    for j in range(n):
        deps = [nodes[i] for i, jj in sorted(edges) if jj == j and (i, jj) not in late]
        if kinds[j] == "kernel":
            nodes.append(g.add_kernel(helpers["fill"], 1, 32, (buf.ptr + 4 * j, float(vals[j]), 1),
                                      deps=deps))
        else:
            nodes.append(g.add_empty(deps=deps))
    for i, j in sorted(late):
        g.add_dependency(nodes[i], nodes[j])
    return g, nodes


def expected(dag, values):
    n, kinds, *_ = dag
    return np.array([values[j] if kinds[j] == "kernel" else -1 for j in range(n)], np.float32)


def run(exe, buf, n):
    buf.copy_from(np.full(n, -1, np.float32))
    s = pcg.Stream()
    exe.launch(s)
    s.synchronize()
    return buf.to_numpy(np.float32)[:n]


@SETTINGS
@given(dags())
def test_structure_matches_model(helpers, dag):
    n, kinds, edges, late, values = dag
    buf = pcg.DeviceBuffer(4 * n)
    g, nodes = build(helpers, dag, buf)
    idx = {node: i for i, node in enumerate(nodes)}
    assert set(g.nodes) == set(nodes) and len(g) == n
    assert {(idx[a], idx[b]) for a, b in g.edges} == edges
    assert {idx[x] for x in g.root_nodes} == {j for j in range(n) if all(e[1] != j for e in edges)}
    for j, node in enumerate(nodes):
        assert {idx[d] for d in node.dependencies} == {i for i, jj in edges if jj == j}
        assert {idx[d] for d in node.dependents} == {jj for i, jj in edges if i == j}
        assert node.type == kinds[j]
    # every edge that would close a cycle or repeat is refused, and the graph is unchanged
    for i, j in sorted(edges):
        with pytest.raises(pcg.ArgumentError, match="cycle"):
            g.add_dependency(nodes[j], nodes[i])
        with pytest.raises(pcg.ArgumentError, match="duplicate"):
            g.add_dependency(nodes[i], nodes[j])
    assert {(idx[a], idx[b]) for a, b in g.edges} == edges
    assert np.array_equal(run(g.instantiate(), buf, n), expected(dag, values))


@SETTINGS
@given(dags())
def test_clone_and_find(helpers, dag):
    n, kinds, edges, late, values = dag
    buf = pcg.DeviceBuffer(4 * n)
    g, nodes = build(helpers, dag, buf)
    clone = g.clone()
    found = [clone.find(x) for x in nodes]
    idx = {node: i for i, node in enumerate(found)}
    assert len(set(found)) == n and set(clone.nodes) == set(found)
    assert {(idx[a], idx[b]) for a, b in clone.edges} == edges
    for x, y in zip(nodes, found):
        assert y.type == x.type and y.graph is clone
    assert np.array_equal(run(clone.instantiate(), buf, n), expected(dag, values))


@SETTINGS
@given(dags(), st.data())
def test_set_arg_and_update(helpers, dag, data):
    n, kinds, edges, late, values = dag
    buf = pcg.DeviceBuffer(4 * n)
    g, nodes = build(helpers, dag, buf)
    exe = g.instantiate()
    model = list(values)
    for j in data.draw(st.lists(st.integers(0, n - 1), max_size=6)):
        if kinds[j] != "kernel":
            with pytest.raises(pcg.ArgumentError, match="KernelNode"):
                exe.set_arg(nodes[j], 1, 0.0)
            continue
        v = data.draw(st.integers(-1000, 1000))
        exe.set_arg(nodes[j], "v" if v % 2 else 1, float(v))
        model[j] = v
    assert np.array_equal(run(exe, buf, n), expected(dag, model))
    new_values = data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
    g2, nodes2 = build(helpers, dag, buf, new_values)
    exe.update(g2)
    assert np.array_equal(run(exe, buf, n), expected(dag, new_values))
    kern = [j for j in range(n) if kinds[j] == "kernel"]
    if kern:  # after update the new graph's nodes address the exec's
        exe.set_arg(nodes2[kern[0]], 1, 4321.0)
        new_values[kern[0]] = 4321
        assert np.array_equal(run(exe, buf, n), expected(dag, new_values))
