"""CPU tests of exec reuse (``pycudagraph.graph.exec_reuse``): the topology signature, the
bounded cache, the opt-out, flags, and the whole path with fake graphs: an exec released and
its graph destroyed are kept, an instantiate of an equal-topology graph updates that exec
(``cuGraphExecUpdate``) and addresses its nodes through the origin graph's. Every driver
call of the module is replaced: no fake handle reaches CUDA.
"""

import gc
import itertools
from types import SimpleNamespace

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
import pycudagraph.graph.exec_reuse as er
import pycudagraph.graph.reuse_signature as sig
from pycudagraph._cuda import fast
from pycudagraph._cuda import versions as versions_mod
from tests.support.fake_bodies import driver, kernel_node  # noqa: F401 - fixture
from tests.support.fakes import fake_graph, fake_if_node, fake_node, fake_read_node

_ids = itertools.count(0x5100_0000, 0x100)


class World:
    """What the fakes answer and what was destroyed."""

    def __init__(self, monkeypatch):
        self.order = {}  # raw graph -> node handles in creation order
        self.edges = {}  # raw graph -> edge count
        self.destroyed = []  # (exec, origin) pairs the cache destroyed
        self.graphs_destroyed = []
        self.execs_destroyed = []  # by the plain finalizer (reuse off)
        self.made = []  # exec handles the fake instantiate made
        self.mp = monkeypatch

    def note(self, g) -> None:
        """The driver's node list of ``g`` is its nodes as they are now."""
        self.order[g.table.h] = [int(n) for n in g.table.nodes.values()]

    def instantiate(self, graph_h, flags, graph):
        h = next(_ids)
        self.made.append(h)
        return h


@pytest.fixture
def world(monkeypatch, cpu_device):
    w = World(monkeypatch)
    monkeypatch.setattr(versions_mod, "graph_nodes",
                        lambda raw: [rt.cudaGraphNode_t(h) for h in w.order.get(int(raw), [])])
    monkeypatch.setattr(sig, "node_count", lambda raw, run=None: len(w.order.get(int(raw), [])))
    monkeypatch.setattr(sig, "edge_count", lambda raw, run=None: w.edges.get(int(raw), 0))
    monkeypatch.setattr(sig, "enabled", lambda exec_h, node_h, run=None: True)
    monkeypatch.setattr(sig, "node_handles",
                        lambda raw, run=None: tuple(w.order.get(int(raw), [])))
    monkeypatch.setattr(er, "destroy", lambda p: w.destroyed.append((p.exec_h, p.origin_h)))
    monkeypatch.setattr(rt, "cudaGraphDestroy", lambda raw: w.graphs_destroyed.append(int(raw)))
    monkeypatch.setattr(rt, "cudaGraphExecDestroy", lambda h: w.execs_destroyed.append(int(h)))
    monkeypatch.setattr(fast, "graph_instantiate", w.instantiate)
    monkeypatch.setattr(fast, "exec_update", lambda *a: 0)  # every update succeeds
    for name, value in (("on", True), ("per_signature", 4), ("max_execs", 16),
                        ("max_nodes", 100_000)):
        monkeypatch.setattr(er.settings, name, value)
    er.clear()
    yield w
    er.clear()


def owned_graph() -> pcg.Graph:
    """A fake graph pycudagraph owns (destroyed through ``destroy_graph``)."""
    return pcg.Graph._wrap(rt.cudaGraph_t(next(_ids)), owned=True)


def chain(w, a=1, b=2, g=None):
    """A graph of a kernel node and an empty node, noted in ``w``; (graph, kernel node)."""
    g = g if g is not None else owned_graph()
    k = kernel_node(g, a, b)
    fake_node(g)
    w.note(g)
    return g, k


# ----------------------------------------------------------------------------------
# The signature

def test_equal_topologies_have_equal_signatures(world):
    g1, _ = chain(world, 1, 2)
    g2, _ = chain(world, 30, 40)
    s1, s2 = er.signature(g1, 0), er.signature(g2, 0)
    assert s1 is not None and s1 == s2 and hash(s1) == hash(s2)
    assert s1[1:4] == (0, 2, 0)  # flags, nodes, edges


def test_node_kinds_order_count_and_edges_change_the_signature(world):
    g1, _ = chain(world)
    base = er.signature(g1, 0)
    g2 = owned_graph()  # the same kinds, the other order
    fake_node(g2)
    kernel_node(g2, 1, 2)
    world.note(g2)
    assert er.signature(g2, 0) != base
    g3, _ = chain(world)  # one node more
    fake_node(g3)
    world.note(g3)
    assert er.signature(g3, 0) != base
    g4, _ = chain(world)  # an edge more
    world.edges[g4.table.h] = 1
    assert er.signature(g4, 0) != base
    g5, _ = chain(world)  # a kernel node where the empty node was
    g5b = owned_graph()
    kernel_node(g5b, 1, 2)
    kernel_node(g5b, 1, 2)
    world.note(g5b)
    assert er.signature(g5b, 0) is not None
    assert er.signature(g5, 0) == base and er.signature(g5b, 0) != base


def test_flags_and_device_are_part_of_the_signature(world):
    g, _ = chain(world)
    priority = int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagUseNodePriority)
    assert er.signature(g, 0) != er.signature(g, priority)
    assert er.signature(g, 0, device=0) != er.signature(g, 0, device=1)


@pytest.mark.parametrize("kind", [pcg.MemAllocNode, pcg.MemFreeNode, pcg.ChildGraphNode,
                                  pcg.MemsetNode, pcg.MemcpyNode, pcg.HostNode,
                                  pcg.EventRecordNode, pcg.EventWaitNode])
def test_only_kernel_and_empty_nodes_are_reused(world, kind):
    g, _ = chain(world)
    assert er.signature(g, 0) is not None
    fake_read_node(g, kind)
    world.note(g)
    assert er.signature(g, 0) is None
    exe = g.instantiate()  # released: destroyed, not kept
    h = exe._h
    exe.close()
    assert world.destroyed == [(h, 0)] and er.stats()["waiting"] == 0


def test_conditional_nodes_are_never_reused(world):
    g, _ = chain(world)
    fake_if_node(g)
    world.note(g)
    assert er.signature(g, 0) is None


def test_an_empty_graph_or_nodes_not_read_yet_give_no_signature(world):
    assert er.signature(owned_graph(), 0) is None
    g, _ = chain(world)
    world.order[g.table.h].append(next(_ids))  # the driver knows a node the table has not read
    assert er.signature(g, 0) is None


# ----------------------------------------------------------------------------------
# The cache: bounds, least recently parked first out, settings

def parked(n=10, key="k"):
    return er._Parked(next(_ids), next(_ids), (0, 0, n, 0, key))


def test_per_signature_bound_evicts_the_oldest_of_that_signature(world):
    er.exec_reuse(per_signature=2)
    a, b, c = parked(), parked(), parked()
    other = parked(key="other")
    for p in (a, other, b, c):
        er._insert(p)
    assert world.destroyed == [(a.exec_h, a.origin_h)]
    assert er.stats() == {"ready": 3, "waiting": 0, "nodes": 30}


def test_count_and_node_bounds_evict_the_least_recently_parked(world):
    er.exec_reuse(max_execs=2)
    ps = [parked(key=i) for i in range(3)]
    for p in ps:
        er._insert(p)
    assert world.destroyed == [(ps[0].exec_h, ps[0].origin_h)]
    er.exec_reuse(max_nodes=25)  # 2 x 10 nodes fit; a third does not
    er._insert(parked(key="x"))
    assert world.destroyed[1] == (ps[1].exec_h, ps[1].origin_h)
    assert er.stats()["nodes"] == 20
    er.exec_reuse(max_nodes=5)  # lowering a bound trims at once
    assert er.stats() == {"ready": 0, "waiting": 0, "nodes": 0}


def test_take_gives_the_most_recent_of_a_signature_and_removes_it(world, monkeypatch):
    a, b = parked(), parked()
    er._insert(a)
    er._insert(b)
    monkeypatch.setattr(er, "signature", lambda graph, flags: a.key)
    graph = SimpleNamespace(table=SimpleNamespace(nodes=dict.fromkeys(range(a.key[2]))))
    assert er.take(graph, 0) is b
    assert er.take(graph, 0) is a
    assert er.take(graph, 0) is None and er.ready == 0 and world.destroyed == []


def test_turning_reuse_off_destroys_what_is_kept_and_keeps_nothing(world):
    p = parked()
    er._insert(p)
    assert er.exec_reuse(False) is True
    assert world.destroyed == [(p.exec_h, p.origin_h)] and er.stats()["ready"] == 0
    assert er.new_box(owned_graph(), 0) is None
    assert er.exec_reuse() is False and er.exec_reuse(True) is False


def test_settings_are_checked(world):
    with pytest.raises(pcg.ArgumentError, match="per_signature must be an int >= 0"):
        pcg.exec_reuse(per_signature=-1)
    with pytest.raises(pcg.ArgumentError, match="on must be a bool"):
        pcg.exec_reuse(1)


def test_the_environment_variable_starts_it_off(monkeypatch):
    monkeypatch.setenv(er.ENV, "0")
    assert er._Settings().on is False
    monkeypatch.setenv(er.ENV, "1")
    assert er._Settings().on is True


def test_device_launch_execs_are_not_parked(world):
    g, _ = chain(world)
    device_launch = int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagDeviceLaunch)
    assert er.new_box(g, device_launch) is None and er.new_box(g, 0) is not None


# ----------------------------------------------------------------------------------
# The whole path with fake graphs

def released(world, g):
    """Instantiate ``g``, release the exec, destroy ``g``; the exec's handle."""
    exe = g.instantiate()
    h = exe._h
    exe.close()
    g.close()
    return h


def test_a_released_exec_is_updated_and_addresses_the_origin_nodes(world, driver):  # noqa: F811
    g1, k1 = chain(world, 1, 2)
    exe1 = g1.instantiate()
    h1 = exe1._h
    exe1.close()
    assert er.stats()["waiting"] == 1 and world.destroyed == []
    g1.close()  # the origin is taken, not destroyed
    assert er.stats() == {"ready": 1, "waiting": 0, "nodes": 2}
    assert g1.table.h not in world.graphs_destroyed
    updates = []
    driver_update = fast.exec_update
    world.mp.setattr(fast, "exec_update", lambda *a: updates.append(a[:2]) or driver_update(*a))
    g2, k2 = chain(world, 10, 20)
    exe2 = g2.instantiate()
    assert updates == [(h1, g2.table.h)] and len(world.made) == 1  # no instantiate
    assert exe2 is not exe1 and exe2._h == h1 and exe2.graph is g2 and not exe2.closed
    exe2.set_arg(k2, "a", 11)  # addressed by the node of the graph h1 was instantiated from
    assert driver == [(int(k1), [11, 20])]
    assert exe2.exec_node(k2).node_h == int(k1)
    exe2.close()  # parked again, with the same origin
    assert er.stats()["ready"] == 1 and world.destroyed == []
    exe3 = chain(world, 5, 6)[0].instantiate()
    assert exe3._h == h1


def test_a_refused_update_destroys_the_parked_exec_and_instantiates(world):
    h1 = released(world, chain(world)[0])
    origin = world.order and next(iter(world.order))
    world.mp.setattr(fast, "exec_update", lambda *a: (1, 3, 0))
    g2, _ = chain(world)
    exe = g2.instantiate()
    assert world.destroyed == [(h1, origin)] and exe._h == world.made[-1] != h1
    assert er.stats()["ready"] == 0


def test_reuse_off_instantiates_and_destroys(world):
    pcg.exec_reuse(False)
    h1 = released(world, chain(world)[0])
    assert world.execs_destroyed == [h1] and world.destroyed == []
    exe = chain(world)[0].instantiate()
    assert exe._h == world.made[-1] != h1


def test_an_exec_with_a_disabled_node_is_not_parked(world, driver):  # noqa: F811
    g, k = chain(world)
    exe = g.instantiate()
    exe.exec_node(k)  # a record: set_enabled makes one
    world.mp.setattr(sig, "enabled", lambda exec_h, node_h, run=None: node_h != int(k))
    h = exe._h
    exe.close()
    assert world.destroyed == [(h, 0)] and er.stats()["waiting"] == 0


def test_a_graph_changed_after_instantiate_is_not_parked(world):
    g, _ = chain(world)
    exe = g.instantiate()
    fake_node(g)  # added after instantiate: the exec no longer matches the graph
    world.note(g)
    h = exe._h
    exe.close()
    assert world.destroyed == [(h, 0)]


def test_a_node_removed_before_the_origin_is_taken_stops_the_reuse(world, driver):  # noqa: F811
    g, k = chain(world)
    exe = g.instantiate()
    h = exe._h
    exe.close()
    assert er.stats()["waiting"] == 1
    g.remove_node(k)
    world.note(g)  # the driver's list lost the node: the exec's nodes no longer line up
    g.close()
    assert world.destroyed == [(h, 0)] and g.table.h in world.graphs_destroyed
    assert er.stats() == {"ready": 0, "waiting": 0, "nodes": 0}


def test_execs_of_graphs_not_owned_are_not_parked(world):
    g = fake_graph()  # adopted: pycudagraph never destroys its raw graph
    chain(world, g=g)
    exe = g.instantiate()
    h = exe._h
    exe.close()
    assert world.destroyed == [(h, 0)]


def test_a_collected_exec_and_graph_are_kept(world):
    g = chain(world)[0]
    exe = g.instantiate()
    h = exe._h
    del exe
    assert er.stats()["waiting"] == 1  # its graph lives on
    del g  # a graph and its table refer to each other: the collector takes it
    gc.collect()
    assert er.stats()["ready"] == 1 and world.destroyed == []
    assert chain(world)[0].instantiate()._h == h


def test_after_an_update_a_reused_exec_takes_both_graphs_nodes(world, driver):  # noqa: F811
    g1, k1 = chain(world, 1, 2)
    released(world, g1)
    g2, k2 = chain(world, 10, 20)
    exe = g2.instantiate()
    g3, k3 = chain(world, 30, 40)
    exe.update(g3)  # as after any exec's update: its own graph's nodes and g3's both work
    exe.set_arg(k3, "a", 31)
    exe.set_arg(k2, "b", 41)
    assert driver == [(int(k1), [31, 40]), (int(k1), [31, 41])]
    assert exe.exec_node(k2) is exe.exec_node(k3)
    h = exe._h
    exe.close()  # updated: what its nodes launch is g3's, not known here: destroyed
    assert er.stats()["ready"] == 0 and world.destroyed[-1][0] == h


def test_reads_made_while_parking_are_not_traced(world):
    runs = []
    world.mp.setattr(sig, "node_handles",
                     lambda raw, run=None: runs.append(run) or tuple(world.order.get(int(raw), [])))
    g, _ = chain(world)
    exe = g.instantiate()
    exe.close()  # parked by its finalizer: quiet reads (a trace may be on, at any moment)
    g.close()  # the origin taken: quiet again
    assert er.stats()["ready"] == 1 and runs == [sig.quiet, sig.quiet]


def test_quiet_checks_the_code_and_records_nothing(cpu_device):
    def ok(*args):
        return (rt.cudaError_t.cudaSuccess, 7, 8)

    def refused(*args):
        return (rt.cudaError_t.cudaErrorInvalidValue,)

    ok.__name__, refused.__name__ = "cudaGraphGetNodes", "cudaGraphNodeGetEnabled"
    with pcg.trace() as t:
        assert sig.quiet(ok, 1, 0) == (7, 8)
        with pytest.raises(pcg.CudaError, match="cudaGraphNodeGetEnabled"):
            sig.quiet(refused, 1)
    assert t.records == []


def test_a_graph_changed_after_a_reuse_is_not_parked_again(world):
    released(world, chain(world)[0])
    g2, k2 = chain(world)
    exe = g2.instantiate()
    h = exe._h
    fake_node(g2)  # the graph changed after the exec took it
    world.note(g2)
    exe.close()
    assert er.stats()["ready"] == 0 and world.destroyed[-1][0] == h


def test_a_parked_exec_keeps_the_kernels_its_nodes_launch(world):
    g1, k1 = chain(world)
    exe = g1.instantiate()
    exe.close()
    g1.close()
    (p,) = er._by_key[er.signature(chain(world)[0], 0)]
    assert p.kernels == ((k1.kernel,), (k1.kernel,))  # the origin's, the exec's
    g2, k2 = chain(world)
    exe2 = g2.instantiate()
    assert exe2._h == p.exec_h
    exe2.close()  # the origin's kernels and its own graph's
    (p2,) = er._by_key[er.signature(g2, 0)]
    assert p2.kernels == ((k1.kernel,), (k2.kernel,))


def test_a_reused_exec_of_a_graph_closed_while_it_lives(world, driver):  # noqa: F811
    g1, k1 = chain(world, 1, 2)
    released(world, g1)
    g2, k2 = chain(world, 10, 20)
    exe = g2.instantiate()
    g2.close()  # kept while the exec lives
    assert not g2.table.dead
    exe.set_arg(k2, "a", 11)
    assert driver[-1] == (int(k1), [11, 20])
    exe.close()  # parked again; the closed graph is destroyed now
    assert er.stats()["ready"] == 1 and g2.table.h in world.graphs_destroyed
    with pytest.raises(pcg.ClosedError, match="belongs to Graph .* which was closed"):
        k2.check_live()


def test_a_graph_of_a_size_none_kept_has_makes_no_driver_read(world):
    released(world, chain(world)[0])  # a 2-node exec ready
    counted = []
    world.mp.setattr(sig, "node_count",
                     lambda raw, run=None: counted.append(raw) or len(world.order[int(raw)]))
    g, _ = chain(world)
    fake_node(g)  # 3 nodes: no exec of that size is kept
    world.note(g)
    kept = g.instantiate()
    assert counted == [] and er.stats()["ready"] == 1 and kept._h == world.made[-1]
    assert er._sizes == {2: 1}
    exe = chain(world)[0].instantiate()  # 2 nodes: read, matched, taken
    assert len(counted) == 1 and er.stats()["ready"] == 0 and er._sizes == {}
    exe.close()
