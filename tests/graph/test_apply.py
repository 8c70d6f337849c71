"""``exe.apply(new)`` on fake graphs and execs (CPU): per-node calls for what changed,
one update when that is cheaper or needed, in-place re-instantiation when CUDA refuses,
``fallback="raise"`` changing nothing, undoing a refused per-node call, and the report."""

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
import pycudagraph.apply.apply as apply_mod
import pycudagraph.graph.update as update_mod
from pycudagraph._cuda import fast
from pycudagraph.errors import CudaError
from tests.support.fake_bodies import driver  # noqa: F401 - fixture
from tests.support.fakes import (fake_edges, fake_exec, fake_graph, fake_if_node, fake_kernel,
                                 node_order)

SIG = "int a, int b"


@pytest.fixture
def kern(cpu_device):
    return fake_kernel(SIG)


def knode(graph, kernel, args):
    pack = kernel.pack(args, 1, 32)
    return graph.table.register(pcg.KernelNode(graph.table, int(pack.address) ^ id(graph), pack), pack)


@pytest.fixture
def graphs(monkeypatch, kern):
    """Three graphs of the same two-node chain: (1, 2) -> (3, 4), then (3, 5), then a third node."""
    made = []
    for args in ([(1, 2), (3, 4)], [(1, 2), (3, 5)], [(1, 2), (3, 4), (5, 6)]):
        g = fake_graph()
        nodes = [knode(g, kern, a) for a in args]
        made.append((g, nodes))
    node_order(monkeypatch, *[g for g, _ in made])
    fake_edges(monkeypatch, *[(n[0], n[1]) for _, n in made])
    return made


@pytest.fixture
def refuse(monkeypatch):
    """cuGraphExecUpdate refuses (topology changed); instantiation gives a fake handle that
    is never destroyed."""
    def update(exec_h, graph_h, exe, graph):
        return 910, 2, 0  # CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result 2, no node
    monkeypatch.setattr(fast, "exec_update", update)
    made = []

    def fake_call(fn, *args):
        if fn is rt.cudaGraphExecGetFlags:
            return 0
        assert fn is rt.cudaGraphInstantiateWithFlags
        made.append(rt.cudaGraphExec_t(0x7EE0_0000 + len(made)))
        return made[-1]
    monkeypatch.setattr(apply_mod, "call", fake_call)
    monkeypatch.setattr(update_mod, "release", lambda owner, fn, raw: (lambda: None))
    return made


def test_one_changed_node_is_one_call(graphs, driver):
    (g1, (a1, b1)), (g2, (a2, b2)), _ = graphs
    exe = fake_exec(g1)
    report = exe.apply(g2)
    assert report.method == "set_params"
    assert driver == [(int(b1), [3, 5])]
    assert report.calls == ["cuGraphExecKernelNodeSetParams (node 1)"]
    assert [c.field for c in report.diff.changes] == ["arg 'b'"]
    assert "set_params, 1 call(s)" in str(report)
    exe.set_arg(b2, "a", 9)  # the new graph's nodes stand for the exec's now
    assert driver[-1] == (int(b1), [9, 5])


def test_nothing_changed_makes_no_call(graphs, driver):
    (g1, _), _, _ = graphs
    exe = fake_exec(g1)
    report = exe.apply(g1)
    assert report.method == "unchanged" and report.calls == [] and driver == []


def test_compares_with_what_the_exec_runs(graphs, driver):
    (g1, (a1, b1)), _, _ = graphs
    exe = fake_exec(g1)
    exe.set_arg(b1, "b", 9)  # by hand: the exec now differs from g1
    driver.clear()
    report = exe.apply(g1)
    assert report.method == "set_params" and driver == [(int(b1), [3, 4])]


def test_apply_back_and_forth(graphs, driver):
    (g1, (_, b1)), (g2, _), _ = graphs
    exe = fake_exec(g1)
    exe.apply(g2)
    exe.apply(g1)
    assert [v for _, v in driver] == [[3, 5], [3, 4]]
    assert exe.apply(g1).method == "unchanged"


def test_update_when_cheaper(graphs, driver, monkeypatch):
    (g1, _), (g2, _), _ = graphs
    monkeypatch.setattr(apply_mod.COSTS, "per_node_call_us", 1000.0)
    report = fake_exec(g1).apply(g2)
    assert report.method == "update" and report.calls == ["cuGraphExecUpdate"] and driver == []
    assert report.estimate_us["update"] < report.estimate_us["set_params"]


def test_strategy_forces_a_way(graphs, driver):
    (g1, _), (g2, _), _ = graphs
    assert fake_exec(g1).apply(g2, strategy="update").method == "update"
    assert fake_exec(g1).apply(g2, strategy="set_params").method == "set_params"


def test_topology_change_goes_to_update(graphs, driver):
    (g1, _), _, (g3, _) = graphs
    report = fake_exec(g1).apply(g3)
    assert report.method == "update" and not report.diff.same_topology


def test_refused_update_reinstantiates_in_place(graphs, driver, refuse):
    (g1, _), _, (g3, (_, b3, c3)) = graphs
    exe = fake_exec(g1)
    report = exe.apply(g3)
    assert report.method == "reinstantiate"
    assert "topology changed" in report.reason
    assert isinstance(report.error, pcg.GraphExecUpdateError)
    assert report.calls == ["cuGraphExecUpdate (refused)", "cudaGraphInstantiateWithFlags"]
    assert int(exe.handle) == int(refuse[0]) and exe.graph is g3
    assert "CUDA refused the update: topology changed" in str(report)
    exe.set_arg(c3, "b", 1)  # its nodes are the exec's own now
    assert driver[-1] == (int(c3), [5, 1])


def test_raise_changes_nothing(graphs, driver, refuse):
    (g1, (a1, b1)), _, (g3, _) = graphs
    exe = fake_exec(g1)
    before = int(exe.handle)
    with pytest.raises(pcg.GraphExecUpdateError, match="topology changed") as info:
        exe.apply(g3, fallback="raise")
    assert info.value.reason.startswith("topology changed")
    assert int(exe.handle) == before and exe.graph is g1 and not refuse
    exe.set_arg(b1, "b", 7)
    assert driver[-1] == (int(b1), [3, 7])


def test_refused_node_call_is_undone_then_update(graphs, monkeypatch, kern):
    g1, g2 = fake_graph(), fake_graph()
    old = [knode(g1, kern, (1, 2)), knode(g1, kern, (3, 4))]
    knode(g2, kern, (1, 9))
    knode(g2, kern, (3, 9))
    node_order(monkeypatch, *[g for g, _ in graphs], g1, g2)
    sent = []

    def set_params(exe, h, pack, node):
        if h == int(old[1]):
            raise CudaError("cuGraphExecKernelNodeSetParams", 1, "CUDA_ERROR_INVALID_VALUE", "no")
        sent.append((h, list(pack.values())))
    monkeypatch.setattr(fast, "exec_kernel_node_set_params", set_params)
    monkeypatch.setattr(fast, "exec_update", lambda *_: 0)
    report = fake_exec(g1).apply(g2)
    assert sent == [(int(old[0]), [1, 9]), (int(old[0]), [1, 2])]  # set, then undone
    assert report.method == "update" and isinstance(report.error, CudaError)


def test_body_nodes_are_set_one_by_one(monkeypatch, driver, kern):
    g1, g2 = fake_graph(), fake_graph()
    i1, i2 = fake_if_node(g1), fake_if_node(g2)
    inner = knode(i1.body, kern, (1, 2))
    knode(i2.body, kern, (1, 3))
    node_order(monkeypatch, g1, g2, i1.body, i2.body)
    fake_edges(monkeypatch)
    report = fake_exec(g1).apply(g2)
    assert report.method == "set_params" and driver == [(int(inner), [1, 3])]
    assert report.calls == ["cuGraphExecKernelNodeSetParams (node 0 in body 0 of node 0)"]


def test_refused_arguments(graphs):
    (g1, _), (g2, _), _ = graphs
    exe = fake_exec(g1)
    with pytest.raises(pcg.ArgumentError, match="fallback must be one of"):
        exe.apply(g2, fallback="ignore")
    with pytest.raises(pcg.ArgumentError, match="strategy must be one of"):
        exe.apply(g2, strategy="fast")
    with pytest.raises(pcg.ArgumentError, match="graph must be a pycudagraph.Graph"):
        exe.apply(object())
    bare = pcg.GraphExec(rt.cudaGraphExec_t(0x7EF0_0000), None, owned=False)
    with pytest.raises(pcg.PyCudaGraphError, match="apply needs the exec's graph"):
        bare.apply(g2)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["apply_built", "calibrate"])
def test_gpu_check(name):
    from tests.support.watchdog import run_snippet
    out = run_snippet(f"from tests.support.flow_checks import run\nrun({name!r})", timeout=300)
    assert out.kind == "ok" and f"PASSED {name}" in out.output, str(out)
