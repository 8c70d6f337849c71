"""CPU tests: which node an exec's record stands for, once handles can be reused.

After ``exe.update(g2)`` the nodes of ``g2`` are update twins of the exec's nodes; when
``g2`` is destroyed, collected or loses a node, its handles may be given to nodes of other
graphs, which must never reach the exec: records are keyed by node identity, and a twin's
key dies with the twin. A failing node CUDA names inside a conditional body is described
without being cached in the enclosing graph. Fake graphs and nodes: no raw call reaches CUDA.
"""

import gc
import weakref

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import versions as versions_mod
import pycudagraph.graph.exec as exec_mod
from tests.support.fakes import _ids, fake_graph, fake_kernel_node, node_order
from tests.support.fake_bodies import driver, exec_of, if_node, kernel_node  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("cpu_device")


@pytest.fixture
def twins(driver, monkeypatch):  # noqa: F811 - the fixture imported above
    """An exec of ``old`` updated from ``new`` and paired: ``k_new`` stands for ``k_old``."""
    old, new = fake_graph(), fake_graph()
    k_old, k_new = kernel_node(old, 1, 2), kernel_node(new, 10, 20)
    node_order(monkeypatch, old, new)
    exe = exec_of(old)
    exe.update(new)
    exe.set_arg(k_new, "a", 11)
    assert driver == [(int(k_old), [11, 20])] and exe.exec_node(k_new) is exe.exec_node(k_old)
    return {"exe": exe, "new": new, "k_new": k_new, "sent": driver}  # a test may drop some


def impostor_of(h):
    """A node of an unrelated graph that CUDA gave the address ``h`` (reused)."""
    other = fake_graph()
    pack = fake_kernel_node(other, args=(7, 7), sig="int a, int b").kernel.pack((7, 7), 1, 32)
    return other.table.register(pcg.KernelNode(other.table, h, pack), pack)


def refused(exe, node, sent):
    n = len(sent)
    with pytest.raises(pcg.PyCudaGraphError, match="not a node of the graph"):
        exe.set_arg(node, "a", 99)
    with pytest.raises(pcg.PyCudaGraphError, match="not a node of the graph"):
        exe.set_params(node, args={"a": 99})
    assert len(sent) == n  # the exec was not updated through the reused handle


def test_a_closed_update_graphs_twins_are_forgotten(twins):
    exe, new, k_new, sent = twins.values()
    new._fin = lambda: None  # owned: close() destroys it (its exec no longer needs it)
    new.close()
    assert new.table.dead
    with pytest.raises(pcg.ClosedError, match="which was closed"):
        exe.set_arg(k_new, "a", 12)
    refused(exe, impostor_of(int(k_new)), sent)


def test_a_collected_update_graphs_twins_are_forgotten(twins):
    exe, sent, h = twins["exe"], twins["sent"], int(twins["k_new"])
    probe = weakref.ref(twins["new"])
    n_records = len(exe._nodes)
    del twins["new"], twins["k_new"]
    gc.collect()
    assert probe() is None  # the update graph was collected (its raw graph destroyed)
    assert len(exe._nodes) == n_records - 1  # the twin's key went with the twin
    refused(exe, impostor_of(h), sent)


def test_a_node_removed_from_an_update_graph_is_forgotten(twins):
    exe, new, k_new, sent = twins.values()
    new.remove_node(k_new)
    with pytest.raises(pcg.ClosedError, match="was removed from its graph"):
        exe.set_arg(k_new, "a", 12)
    refused(exe, impostor_of(int(k_new)), sent)


@pytest.fixture
def failing_update(monkeypatch):
    """cuGraphExecUpdate refuses, naming the node ``failing[0]`` (a handle)."""
    failing = []

    def exec_update(exec_h, graph_h, exe, graph):
        return 1, 4, failing[0]  # CUDA_ERROR_INVALID_VALUE, function changed, the node
    monkeypatch.setattr(exec_mod.fast, "exec_update", exec_update)
    return failing


def test_a_failing_body_node_is_not_cached_in_the_parent(failing_update, monkeypatch):
    g = fake_graph()
    cond = if_node(g)
    k = kernel_node(cond.body, 1, 2)
    node_order(monkeypatch, g, cond.body)  # find_node walks the graph and its bodies
    exe = exec_of(fake_graph())
    failing_update.append(int(k))
    with pytest.raises(pcg.GraphExecUpdateError, match="function changed") as info:
        exe.update(g)
    assert info.value.node is k and int(k) not in g.table.nodes
    with pytest.raises(pcg.PyCudaGraphError):
        exe.exec_node(info.value.node)  # not a node of the exec's graph


def test_a_failing_body_node_read_back_belongs_to_its_body(failing_update, monkeypatch):
    """A body node Python never saw is listed (cudaGraphGetNodes) and made by its body."""
    g = fake_graph()
    cond = if_node(g)
    h = next(_ids)
    order = {g.table.h: [rt.cudaGraphNode_t(int(cond))],
             cond.body.table.h: [rt.cudaGraphNode_t(h)]}
    monkeypatch.setattr(versions_mod, "graph_nodes", lambda raw: order[int(raw)])
    monkeypatch.setattr(versions_mod, "node_type", lambda node: 5)  # an empty node
    exe = exec_of(fake_graph())
    failing_update.append(h)
    with pytest.raises(pcg.GraphExecUpdateError, match="node: empty") as info:
        exe.update(g)
    node = info.value.node
    assert node.graph is cond.body and cond.body.table.nodes[h] is node and h not in g.table.nodes


def test_a_clones_ledger_holds_what_the_originals_nodes_point_at(monkeypatch, cpu_device):
    """Graph.clone mirrors each found node's ledger entry, so an exec of the clone finds the
    kernel nodes' ArgPacks (GraphExec reads its graph's ledger, not the node objects)."""
    from cuda.bindings import runtime as rt

    from tests.support.fakes import fake_buffer, fake_graph, fake_kernel
    import pycudagraph.graph.clone as clone_mod
    g = fake_graph()
    k = fake_kernel()
    buf = fake_buffer(64)
    pack = k.pack((buf, 1.0, 4), 1, 32, 0)
    node = g.table.register(pcg.KernelNode(g.table, 0x5100, pack), pack)
    ok = rt.cudaError_t.cudaSuccess
    calls = {"cudaGraphClone": lambda graph: (ok, rt.cudaGraph_t(0x5200)),
             "cudaGraphNodeFindInClone": lambda n, graph: (ok, rt.cudaGraphNode_t(0x5300))}
    monkeypatch.setattr(clone_mod, "call", lambda fn, *a: calls[fn.__name__](*a)[1])
    c = g.clone()
    copy = c.find(node)
    assert copy.kernel is k and c.table.kept(copy) == (pack,)
