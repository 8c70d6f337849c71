"""``Graph.add_kernel``'s one call, ``add_kernel_node`` (``graph/graph.py``,
``fast.node_maker``): with the compiled route the node, its pack and their record in the
table are made in C, and must be what ``KernelNode.build`` makes in Python; whatever C does
not do itself goes to ``build`` with the same arguments (CPU, the driver stub; as built and
with PYCUDAGRAPH_NO_NATIVE=1)."""

from tests.support.native_driver import both, run


@both
def test_the_node_made_in_c_is_the_one_build_makes(native):
    run('''
        import ctypes
        import sys
        from pycudagraph.graph import graph as graph_module
        from pycudagraph.nodes.kernel_node import KernelNode
        from pycudagraph.compile.args import ArgPack
        assert (graph_module.add_kernel_node == KernelNode.build) == (not COMPILED)
        g, y = fake_graph(), buffer()
        entered = []

        def watch(frame, event, arg):
            if event == "call" and frame.f_code is KernelNode.build.__func__.__code__:
                entered.append(1)
        a = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        sys.setprofile(watch)
        b = g.add_kernel(k, 2, 32, [y, 2.5, 7], 16, deps=(a,))
        sys.setprofile(None)
        assert (entered == []) == COMPILED, entered  # no Python frame of build when compiled
        m = KernelNode.build(g.table, (a,), k, (2, 1), (32, 1, 1), [y, 2.5, 7], 16)  # tuples: the same
        made = []  # build itself, 1-D: fast.add_kernel's compiled route makes the pack in C
        assert route(lambda: made.append(KernelNode.build(g.table, (a,), k, 2, 32, [y, 2.5, 7],
                                                          16))) == C
        for node in (b, m, made[0]):  # the same slots as the Python maker sets
            assert type(node) is KernelNode and node._table is g.table and node._raw is None
            assert g.table.nodes[node._h] is node and isinstance(node._h, int)
            assert g.table.ledger.held[id(node)] == (node, node._pack)
            p = node._pack
            assert type(p) is ArgPack and p.layout is m._pack.layout and p.kernel is k
            assert p.refs == [y, 2.5, 7] and type(p.refs) is list
            assert p.address == ctypes.addressof(ctypes.c_char.from_buffer(p.buf))
            assert p.values() == (y.ptr, 2.5, 7)
        hb, hm = b._pack.raw(), m._pack.raw()
        assert hb[8:36] == hm[8:36]  # grid, block, shared memory alike
        assert hb[72 + 8 * 3:] == hm[72 + 8 * 3:]  # the argument slots alike
        assert b.params.args == m.params.args == {"y": y.ptr, "a": 2.5, "n": 7}
        assert _lifetime.holders_of(y)
        # what C leaves to build: the same node, through the Python maker
        saved = k._hot
        k._hot = None
        c = g.add_kernel(k, 1, 32, (y, 1.0, 4), deps=[b])
        k._hot = saved
        assert g.table.nodes[c._h] is c and c._pack.refs == [y, 1.0, 4]
        assert stub.deps(1) == [b._h]
        count = len(g.table.nodes)
        stub.set_rc("cuGraphAddKernelNode", 1)
        try:
            g.add_kernel(k, 1, 32, (y, 1.0, 4))
        except pcg.CudaError as exc:
            assert "cuGraphAddKernelNode (cudaGraphAddKernelNode) failed" in str(exc), exc
        else:
            raise AssertionError("no CudaError")
        stub.set_rc("cuGraphAddKernelNode", 0)
        assert len(g.table.nodes) == count and len(g.table.ledger.held) == count
        g.table.dead = "was destroyed: a test"
        refused(lambda: g.add_kernel(k, 1, 32, (y, 1.0, 4)), pcg.ClosedError, "destroyed")
        g.table.dead = ""
        refused(lambda: g.add_kernel(k, 1, 32, (y, "x", 4)), pcg.ArgumentError, "a")
        refused(lambda: g.add_kernel(k, 1, 32, (y, 1.0, 4), deps=7), pcg.ArgumentError, "")
        assert len(g.table.nodes) == count
    ''', native)
