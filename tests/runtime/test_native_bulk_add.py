"""``fast.add_kernel_nodes``: kernel nodes added from fixed records (a loaded graph file's),
in C with no Python call per node on the compiled route, one ``graph.add_kernel`` per node
on the ctypes route: the same nodes, packs, dependencies and errors (CPU, the driver stub;
as built and with PYCUDAGRAPH_NO_NATIVE=1)."""

from tests.support.native_driver import both, run

PRELUDE = '''
    import struct
    from pycudagraph._cuda.bulk import RECORD, arg_length
    from pycudagraph.nodes.kernel_node import KernelNode

    LEN = arg_length(k)  # float* y (8), float a (4), int n (4)
    assert LEN == 16, LEN

    def records(n, grid=(2, 1, 1), block=(32, 1, 1), chain=True):
        r = np.zeros(n, RECORD)
        r["grid"], r["block"], r["shared_mem"] = grid, block, 0
        r["arg_offset"] = np.arange(n) * LEN
        r["arg_length"] = LEN
        deps = np.arange(n - 1, dtype="<u4") if chain else np.zeros(0, "<u4")
        if chain:
            r["dep_first"][1:] = np.arange(n - 1)
            r["dep_count"][1:] = 1
        args = b"".join(struct.pack("<Qfi", 0x7000 + 64 * i, 0.5 * i, i) for i in range(n))
        return r, args, deps
'''


@both
def test_a_chain_added_in_bulk_is_the_chain_add_kernel_makes(native):
    run(PRELUDE + '''
        g = fake_graph()
        r, args, deps = records(1000)
        before = stub.total()
        nodes = fast.add_kernel_nodes(g, (k,), r.tobytes(), args, deps.tobytes())
        assert stub.total() - before == 1000
        assert len(nodes) == 1000 and len(g.table.nodes) == 1000
        if COMPILED:
            assert VIA_CTYPES[0] == 0, VIA_CTYPES  # no per-node route call
        for i in (0, 1, 500, 999):
            node = nodes[i]
            assert type(node) is KernelNode and g.table.nodes[node._h] is node
            assert g.table.ledger.held[id(node)] == (node, node._pack)
            assert node._pack.refs == [0x7000 + 64 * i, 0.5 * i, i]
            assert node._pack.values() == (0x7000 + 64 * i, 0.5 * i, i)
            assert node.params.args == {"y": 0x7000 + 64 * i, "a": 0.5 * i, "n": i}
        assert stub.deps(1) == [nodes[998]._h]  # the last add waited for the one before
        one = g.add_kernel(k, 2, 32, (0x7000, 0.0, 0))  # the single add: the same bytes
        assert one._pack.raw()[8:36] == nodes[0]._pack.raw()[8:36]
        assert one._pack.raw()[72 + 24:] == nodes[0]._pack.raw()[72 + 24:]
        nodes[3]._pack.set(2, 77)  # an ordinary pack: set by index and by name
        assert nodes[3]._pack.values()[2] == 77
        assert nodes[3]._pack.layout.index["n"] == 2
        # a 3-D launch and a node with no dependencies: the C route leaves them to the twin
        r2, args2, deps2 = records(3, grid=(2, 2, 1), chain=False)
        more = fast.add_kernel_nodes(g, (k,), r2, args2, deps2)
        assert [n.params.grid for n in more] == [(2, 2, 1)] * 3
    ''', native)


@both
def test_bad_records_are_refused_before_any_node_is_added(native):
    run(PRELUDE + '''
        g = fake_graph()
        r, args, deps = records(4)

        def bad(words, r=r, args=args, deps=deps, kernels=(k,)):
            refused(lambda: fast.add_kernel_nodes(g, kernels, r, args, deps),
                    pcg.ArgumentError, words)
            assert len(g.table.nodes) == 0

        x = r.copy(); x["kernel"][2] = 1
        bad("record 2: kernel index 1 is out of range", x)
        x = r.copy(); x["arg_length"][1] = 12
        bad("record 1: 12 argument bytes for kernel", x)
        x = r.copy(); x["arg_offset"][3] = len(args) - 8
        bad("record 3: arguments at bytes", x)
        x = r.copy(); x["dep_first"][2] = 99
        bad("record 2: dependencies 99..100 run past", x)
        bad("record 2: dependency 3 is not a node made earlier",
            deps=np.array([0, 1, 3], "<u4"))
        x = r.copy(); x["block"][0] = (64, 32, 1)
        bad("record 0: block (64, 32, 1) is more than 1024 threads", x)
        x = r.copy(); x["block"][0] = (1 << 31, 1 << 31, 4)  # a product that wraps to 0 in int64
        bad("record 0: block (2147483648, 2147483648, 4) is more than 1024", x)
        x = r.copy(); x["grid"][1] = (0, 1, 1)
        bad("record 1: grid (0, 1, 1) has a dimension of 0", x)
        bad("not a whole number of 48-byte records", r.tobytes()[:-4])
        bad("kernels must be a tuple", kernels=[k])
        bad("kernels[0] is a int", kernels=(5,))
        bad("recs must be a bytes-like object", r=[1, 2])
        # a refusal after the checks (a driver error): the nodes the call made are removed
        stub.set_rc("cuGraphAddKernelNode", 1)
        try:
            fast.add_kernel_nodes(g, (k,), r, args, deps)
        except pcg.CudaError as exc:
            assert "cuGraphAddKernelNode" in str(exc), exc
        else:
            raise AssertionError("no CudaError")
        stub.set_rc("cuGraphAddKernelNode", 0)
        assert not [n for n in g.table.nodes.values() if n.live]
        g.table.dead = "was destroyed: a test"
        try:
            fast.add_kernel_nodes(g, (k,), r, args, deps)
        except pcg.ClosedError:
            pass
        else:
            raise AssertionError("no ClosedError")
    ''', native)
