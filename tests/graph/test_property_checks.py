"""Property tests (hypothesis, CPU): dimension parsing and edge checks against host models."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pycudagraph as pcg
from pycudagraph.graph import topology as topology_mod
from pycudagraph.compile.args import dims3

from tests.support.fakes import Edges, fake_graph, fake_node

U32 = 2**32
good_int = st.integers(1, U32 - 1)
any_int = st.integers(-(2**40), 2**40)
not_int = st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.none(),
                    st.binary(max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.one_of(any_int, st.lists(any_int, min_size=0, max_size=4).map(tuple),
                 st.lists(st.one_of(any_int, not_int), min_size=1, max_size=3).map(tuple), not_int))
def test_dim3_matches_model(value):
    if isinstance(value, int) and not isinstance(value, bool):
        items = (value,)
    elif isinstance(value, tuple):
        items = value
    else:
        items = None
    ok = (items is not None and 1 <= len(items) <= 3
          and all(type(v) is int for v in items) and all(0 < v < U32 for v in items))
    if ok:
        assert dims3(value, "grid") == items + (1,) * (3 - len(items))
        assert dims3(tuple(np.int64(v) for v in items), "grid") == items + (1,) * (3 - len(items))
    else:
        with pytest.raises(pcg.ArgumentError, match="grid"):
            dims3(value, "grid")


def _reaches(out, src, dst) -> bool:
    seen, todo = set(), [src]
    while todo:
        x = todo.pop()
        if x == dst:
            return True
        if x not in seen:
            seen.add(x)
            todo.extend(out.get(x, []))
    return False


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                   st.booleans()), max_size=40))))
def test_edge_checks_match_host_model(case):
    """Random add/remove attempts: refused exactly when the model says self-edge, duplicate,
    cycle or missing edge; accepted ones change the model like CUDA would."""
    n, ops = case
    mp = pytest.MonkeyPatch()
    try:
        g = fake_graph()
        nodes = [fake_node(g) for _ in range(n)]
        edges = Edges().install(mp)

        def add(frm, to):
            edges.add(g.table.node(int(frm[0])), g.table.node(int(to[0])))

        def remove(frm, to):
            a, b = int(frm[0]), int(to[0])
            edges.out[a].remove(b)
            edges.inc[b].remove(a)
        mp.setattr(topology_mod.versions, "graph_add_dependencies", lambda raw, f, t, data=None: add(f, t))
        mp.setattr(topology_mod.versions, "graph_remove_dependencies", lambda raw, f, t, data=None: remove(f, t))
        for i, j, adding in ops:
            a, b = nodes[i], nodes[j]
            has = b._h in edges.out.get(a._h, [])
            if adding:
                if i == j:
                    expect = "self-edge"
                elif has:
                    expect = "duplicate"
                elif _reaches(edges.out, b._h, a._h):
                    expect = "cycle"
                else:
                    expect = None
                call = lambda: g.add_dependency(a, b)  # noqa: E731
            else:
                expect = None if has else "no edge"
                call = lambda: g.remove_dependency(a, b)  # noqa: E731
            if expect is None:
                call()
                assert (b._h in edges.out.get(a._h, [])) == adding
            else:
                with pytest.raises(pcg.ArgumentError, match=expect):
                    call()
        # the model stays acyclic throughout
        for x in nodes:
            for y in edges.out.get(x._h, []):
                assert not _reaches(edges.out, y, x._h)
    finally:
        mp.undo()
