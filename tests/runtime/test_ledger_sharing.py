"""An exec keeps its graph's ledger entries by sharing the dict (``Ledger.share``, O(1)) instead
of copying it; the graph copies it before its next change (``Ledger.writable``), so what the
exec took never changes (CPU; the driver stub for the node adds, both routes)."""

from pycudagraph._lifetime import Ledger
from tests.support.native_driver import both, run


def test_a_shared_dict_is_copied_before_the_next_change():
    led = Ledger()
    led.hold(1, "a")
    taken = led.share()
    assert taken is led.held and led.shared
    led.hold(2, "b")
    assert taken == {1: ("a",)} and led.held == {1: ("a",), 2: ("b",)} and not led.shared
    taken = led.share()
    led.add(1, "c")
    assert taken == {1: ("a",), 2: ("b",)} and led.held[1] == ("a", "c")
    taken = led.share()
    led.drop(2)
    assert 2 in taken and 2 not in led.held
    taken = led.share()
    led.clear()  # the owner was destroyed: the copy that shares the dict still keeps it
    assert taken == {1: ("a", "c")} and led.held == {} and not led.shared
    led.hold(3, "d")
    taken = led.share()
    assert led.writable() is not taken and led.held == taken == {3: ("d",)}


@both
def test_what_an_exec_took_outlives_later_changes_to_its_graph(native):
    run('''
        g, y, z = fake_graph(), buffer(), buffer()
        a = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        taken = g.table.exec_keep()[0][0]
        assert taken is g.table.ledger.held and g.table.ledger.shared
        b = g.add_kernel(k, 1, 32, (z, 1.0, 4), deps=[a])  # copies first (C leaves it to build)
        assert id(b) not in taken and id(b) in g.table.ledger.held
        assert not g.table.ledger.shared and taken[id(a)] == (a, a._pack)
        c = g.add_kernel(k, 1, 32, (z, 1.0, 4), deps=[b])  # not shared: C adds it (compiled)
        assert id(c) in g.table.ledger.held and id(c) not in taken
        kept = g.keepalive()[0][0]  # a copy for the caller, which shares nothing
        assert kept == g.table.ledger.held and kept is not g.table.ledger.held
        assert not g.table.ledger.shared
        g.table.exec_keep()
        g.table.keep_also(a, z)
        assert g.table.ledger.held[id(a)] == (a, a._pack, z) and taken[id(a)] == (a, a._pack)
    ''', native)


@both
def test_a_graph_instantiated_while_its_node_is_added_keeps_both_right(native):
    """Python code run by the add itself (an argument's __index__) shares the ledger before
    the node is recorded: the node goes to a copy, and what was taken stays without it."""
    run('''
        g, y = fake_graph(), buffer()
        a = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        taken = []

        class Count:
            def __index__(self):
                taken.append(g.table.exec_keep()[0][0])
                return 4
        b = g.add_kernel(k, 1, 32, (y, 1.0, Count()), deps=[a])
        assert len(taken) == 1 and id(a) in taken[0] and id(b) not in taken[0]
        assert g.table.nodes[int(b)] is b and g.table.ledger.held[id(b)] == (b, b._pack)
        assert not g.table.ledger.shared and g.table.ledger.held is not taken[0]
        assert stub.values(k.params) == (y.ptr, 1.0, 4)
    ''', native)

