"""CPU tests: body graphs of conditional nodes meet the exec's per-node updates, removal
and whole-graph update (fake graphs and nodes: no raw call reaches CUDA)."""

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import versions as versions_mod
from tests.support.fakes import fake_graph, fake_kernel, fake_node, node_order
from tests.support.fake_bodies import SIG, driver, exec_of, if_node, kernel_node  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("cpu_device")


def test_a_removed_body_node_is_not_updated_through_a_cached_entry(driver):
    g = fake_graph()
    cond = if_node(g)
    k = kernel_node(cond.body, 1, 2)
    exe = exec_of(g)
    exe.set_arg(k, "a", 5)  # the exec now has its own entry for k
    assert driver == [(int(k), [5, 2])]
    cond.body.remove_node(k)
    with pytest.raises(pcg.ClosedError, match="was removed from its graph"):
        exe.set_arg(k, "a", 6)
    assert len(driver) == 1  # the dangling node handle never reached the driver


def test_removing_a_conditional_node_forgets_its_body_nodes(driver):
    g = fake_graph()
    cond = if_node(g)
    inner = if_node(cond.body)
    k = kernel_node(inner.body, 1, 2)
    exe = exec_of(g)
    exe.set_arg(k, 1, 7)
    g.remove_node(cond)
    with pytest.raises(pcg.ClosedError, match="belongs to Graph"):
        exe.set_arg(k, 1, 8)
    assert driver == [(int(k), [1, 7])]


def test_update_pairs_the_nodes_of_bodies(driver, monkeypatch):
    old, new = fake_graph(), fake_graph()
    c_old, c_new = if_node(old), if_node(new)
    k_old, k_new = kernel_node(c_old.body, 1, 2), kernel_node(c_new.body, 10, 20)
    e_old, e_new = fake_node(c_old.body), fake_node(c_new.body)
    node_order(monkeypatch, old, new, c_old.body, c_new.body)
    exe = exec_of(old)
    exe.update(new)  # its nodes are paired on the next per-node update
    exe.set_arg(k_new, "a", 11)  # the new graph's body node stands for the exec's
    assert driver == [(int(k_old), [11, 20])]
    exe.set_arg(k_old, "a", 12)  # the old node: its other arguments are the update's
    assert driver[-1] == (int(k_old), [12, 20])
    assert exe.exec_node(e_new).node is e_old
    assert exe.exec_node(c_new).node is c_old


@pytest.mark.parametrize("call, words", [
    (lambda g, h: g.conditional_handle(default="1"), "conditional_handle: default must be"),
    (lambda g, h: g.add_if(7), "add_if: handle: a conditional node needs a ConditionalHandle"),
    (lambda g, h: g.add_while(None), "add_while: handle: "),
    (lambda g, h: g.add_if_else(pcg.ConditionalHandle(fake_graph(), 1)),
     "add_if_else: handle .* was made for another graph"),
    (lambda g, h: g.add_switch(h, 0), "add_switch: count: .*positive number of bodies"),
    (lambda g, h: g.add_switch(h, "2"), "add_switch: count: "),
    (lambda g, h: g.add_dependency(fake_node(g), fake_node(g), port="fast"), "port must be one of"),
    (lambda g, h: kernel_node(g, 1, 2).set_attribute(3, 1), "no kernel-node attribute 3"),
    (lambda g, h: kernel_node(g, 1, 2).set_attribute(["priority"], 1), "no kernel-node attribute"),
    (lambda g, h: kernel_node(g, 1, 2).set_attribute("priority", "high"), "priority takes an int"),
    (lambda g, h: kernel_node(g, 1, 2).copy_attributes_from(fake_node(g)),
     "copy_attributes_from: other must be a KernelNode"),
])
def test_conditional_and_attribute_entries_raise_argument_errors(monkeypatch, call, words):
    """Refused before CUDA with the ArgumentError the other entry points raise, naming the
    entry point and the parameter."""
    monkeypatch.setattr(versions_mod, "driver_version", lambda: 13000)
    monkeypatch.setattr(versions_mod, "node_dependencies", lambda handle: [])
    monkeypatch.setattr(versions_mod, "node_dependents", lambda handle: [])
    g = fake_graph()
    with pytest.raises(pcg.ArgumentError, match=words):
        call(g, pcg.ConditionalHandle(g, 1))


def test_removing_an_edge_with_the_wrong_port_says_its_port(monkeypatch):
    from pycudagraph.nodes.edges import edge_data
    monkeypatch.setattr(versions_mod, "driver_version", lambda: 13000)
    g = fake_graph()
    a, b = kernel_node(g, 1, 2), kernel_node(g, 3, 4)
    (data,) = edge_data("programmatic")
    monkeypatch.setattr(versions_mod, "node_dependencies", lambda handle: [a._h])
    monkeypatch.setattr(versions_mod, "graph_get_edges_with_data",
                        lambda raw: ([a.handle], [b.handle], [data]))

    def refuse(raw, frm, to, data=None):
        raise pcg.CudaError("cudaGraphRemoveDependencies", 1, "cudaErrorInvalidValue",
                            "invalid argument")
    monkeypatch.setattr(versions_mod, "graph_remove_dependencies", refuse)
    with pytest.raises(pcg.CudaError, match="is a programmatic edge: remove it with "
                                            "port='programmatic'"):
        g.remove_dependency(a, b)
    with pytest.raises(pcg.CudaError) as info:  # the port given is the edge's: no hint
        g.remove_dependency(a, b, port="programmatic")
    assert "remove it with" not in str(info.value)


def test_closing_a_graph_closes_its_bodies_while_an_exec_keeps_it():
    g = fake_graph()
    cond = if_node(g)
    inner = if_node(cond.body)
    k = kernel_node(inner.body, 1, 2)
    exe = exec_of(g)  # an exec keeps the raw graph: close() only marks it closed
    g.close()
    assert not g.table.dead
    for body in (cond.body, inner.body):
        with pytest.raises(pcg.ClosedError, match="was closed"):
            body.add_empty()
    assert exe.exec_node(k).node is k  # the exec still updates the nodes of its bodies


@pytest.mark.parametrize("port", [["programmatic"], 3, b"programmatic"])
def test_a_port_that_is_not_a_name_is_an_argument_error(port):
    g = fake_graph()
    with pytest.raises(pcg.ArgumentError, match="port must be one of"):
        g.add_dependency(fake_node(g), fake_node(g), port=port)


def test_after_update_a_removed_node_is_not_reached_through_its_twin(driver, monkeypatch):
    old, new = fake_graph(), fake_graph()
    k_old, k_new = kernel_node(old, 1, 2), kernel_node(new, 10, 20)
    e_old, e_new = fake_node(old), fake_node(new)
    node_order(monkeypatch, old, new)
    exe = exec_of(old)
    exe.update(new)
    exe.set_arg(k_new, "a", 11)  # pairs the graphs: k_new stands for k_old
    old.remove_node(k_old)
    old.remove_node(e_old)
    with pytest.raises(pcg.PyCudaGraphError, match="not a node of the graph"):
        exe.set_arg(k_new, "a", 12)  # k_old's handle is gone: no update through it
    with pytest.raises(pcg.PyCudaGraphError, match="not a node of the graph"):
        exe.set_enabled(e_new, False)
    assert driver == [(int(k_old), [11, 20])]


def test_a_conditional_node_of_a_closed_graph_still_describes_itself(monkeypatch):
    monkeypatch.setattr(versions_mod, "graph_nodes", lambda raw: [1, 2])
    g = fake_graph()
    cond = if_node(g)
    exec_of(g)
    g.close()  # the exec keeps the raw graph: error messages still show the node
    assert "if on 0x1 (body nodes: 2)" in repr(cond)


def test_edges_stay_inside_one_body(monkeypatch):
    """Edge and dependency checks treat a body as its own graph: the cycle check walks the
    body's edges, and no edge or dependency joins a body's node to its parent's."""
    from tests.support.fakes import Edges
    edges = Edges().install(monkeypatch)
    g = fake_graph()
    top = fake_node(g)
    cond = if_node(g)
    body = cond.body
    nodes = [fake_node(body) for _ in range(3)]
    a, b, c = nodes
    edges.add(a, b)
    edges.add(b, c)
    with pytest.raises(pcg.ArgumentError, match="cycle"):
        body.add_dependency(c, a)
    with pytest.raises(pcg.ArgumentError, match="duplicate edge"):
        body.add_dependency(a, b)
    for call in (lambda: g.add_dependency(top, a), lambda: body.add_dependency(a, top),
                 lambda: g.add_empty(deps=[a]), lambda: body.add_empty(deps=[top]),
                 lambda: g.remove_node(a), lambda: body.remove_dependency(top, a)):
        with pytest.raises(pcg.ArgumentError, match="belongs to another graph"):
            call()


def test_update_from_the_same_graph_takes_its_bodies_new_arguments(driver, monkeypatch):
    g = fake_graph()
    cond = if_node(g)
    k = kernel_node(cond.body, 1, 2)
    node_order(monkeypatch, g, cond.body)
    exe = exec_of(g)
    pack = fake_kernel(SIG).pack((10, 20), 1, 32)  # what k.set_params(args=...) leaves
    k._pack = pack
    cond.body.table.register(k, pack)
    exe.update(g)  # carries the new arguments into the exec
    exe.set_arg(k, "a", 5)
    assert driver == [(int(k), [5, 20])]  # not the arguments of instantiate time
