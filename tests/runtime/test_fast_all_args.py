"""``GraphExec.set_params(node, args=...)``: every argument of an exec's kernel node rewritten
through the compiled ``fast.set_args`` (the layout's plan, the same C packing a node add
uses), on the CPU with the driver stub (tests/support/native_driver.py), as built and with
PYCUDAGRAPH_NO_NATIVE=1. A refused value or call leaves the exec's pack as it was; what the
exec replaced is retired; anything the compiled route does not pack goes to the checked
Python packing, with the same result."""

from tests.support.native_driver import both, run


@both
def test_set_params_args_takes_the_compiled_route(native):
    run('''
        g, y, y2 = fake_graph(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        assert route(lambda: exe.set_params(node, args=(y2, 2.5, 9))) == C
        assert stub.last() == "cuGraphExecKernelNodeSetParams"
        assert stub.ints(2) == (int(exe.handle), node._h)
        assert stub.values(k.params) == (y2.ptr, 2.5, 9)
        assert any(r is y for r in exe._ledger.retired)  # a queued launch may still read y
        assert exe.exec_node(node).args.refs == [y2, 2.5, 9]
        assert node.params.args == {"y": y.ptr, "a": 1.0, "n": 4}  # the graph is unchanged
        assert route(lambda: exe.set_params(node, args=[y2.ptr, np.float64(3.5), np.int32(5)])) == C
        assert stub.values(k.params) == (y2.ptr, 3.5, 5)
        # a dict changes some arguments: the general path packs in Python, the same call
        # (made by the compiled entry of that one call where the extension is built)
        assert route(lambda: exe.set_params(node, args={"n": 6})) == C
        assert stub.values(k.params) == (y2.ptr, 3.5, 6)
        assert route(lambda: exe.set_params(node, args=iter((y, 1.5, 7)))) == C
        assert stub.values(k.params) == (y.ptr, 1.5, 7)
        with pcg.trace() as t:
            assert route(lambda: exe.set_params(node, args=(y, 1.5, 8))) == "ctypes"
        assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
    ''', native)


@both
def test_a_refused_update_changes_nothing(native):
    run('''
        g, y, y2 = fake_graph(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        exe.set_params(node, args=(y, 2.0, 5))
        rec = exe.exec_node(node)
        before, refs = rec.args.raw(), list(rec.args.refs)
        gone = buffer()
        gone.free()
        refused(lambda: exe.set_params(node, args=(y2, "x", 1)), pcg.ArgumentError,
                "parameter 1 'a' (float) cannot take 'x'")
        refused(lambda: exe.set_params(node, args=(y2, 1.0, 2**31)), pcg.ArgumentError,
                "parameter 2 'n' (int)")
        refused(lambda: exe.set_params(node, args=(y2, 1.0)), pcg.ArgumentError, "2 given")
        refused(lambda: exe.set_params(node, args=(gone, 1.0, 1)), pcg.ClosedError, "was freed")
        refused(lambda: exe.set_params(node, args=(True, 1.0, 1)), pcg.ArgumentError, "bool")
        assert rec.args.raw() == before and rec.args.refs == refs
        stub.set_rc("cuGraphExecKernelNodeSetParams", 400)
        try:
            exe.set_params(node, args=(y2, 7.5, 3))
        except pcg.CudaError as exc:
            assert str(exc).startswith("cuGraphExecKernelNodeSetParams "
                                       "(cudaGraphExecKernelNodeSetParams) failed"), exc
        else:
            raise AssertionError("no CudaError")
        stub.set_rc("cuGraphExecKernelNodeSetParams", 0)
        assert rec.args.raw() == before and rec.args.refs == refs
        assert route(lambda: exe.set_arg(node, 2, 11)) == C  # the next call carries it
        assert stub.values(k.params) == (y.ptr, 2.0, 11)
    ''', native)


@both
def test_what_the_compiled_route_does_not_pack(native):
    run('''
        g, y = fake_graph(), buffer()
        half = fake_kernel("__half h, int n", "kh")
        stub.expect(half.params)
        hn = g.add_kernel(half, 1, 32, (1.0, 2))
        exe = g.instantiate()
        assert route(lambda: exe.set_params(hn, args=(2.5, 3))) == "ctypes"  # packed in Python
        assert stub.values(half.params) == (2.5, 3)
        stub.expect(k.params)
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        seen.multi = True  # several devices: the general path checks the values' devices
        assert route(lambda: exe.set_params(node, args=(y, 2.5, 1))) == C
        seen.multi = False
        assert route(lambda: exe.set_params(node, args=(y, 2.5, 2))) == C
        node_b = g.add_kernel(k, 1, 32, (y, 1.0, 4))  # added after the exec was made
        refused(lambda: exe.set_params(node_b, args=(y, 1.0, 1)), pcg.PyCudaGraphError,
                "not a node of the graph")
        exe.close()
        refused(lambda: exe.set_params(node, args=(y, 1.0, 1)), pcg.ClosedError, "closed")
    ''', native)


@both
def test_one_exec_set_params_call_is_compiled_and_checked(native):
    """``fast.exec_kernel_node_set_params`` (graphed's rebind of a moved input) makes its one
    driver call through the extension where it is built, through ctypes while a trace is
    open; a refusal is raised once, naming the call, after one driver call."""
    run('''
        from pycudagraph._cuda import fast as fast_mod
        g, y = fake_graph(), buffer()
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        pack = exe.exec_node(node).args
        call = lambda: fast_mod.exec_kernel_node_set_params(exe.handle, int(node), pack, node)
        assert route(call) == C
        assert stub.last() == "cuGraphExecKernelNodeSetParams"
        assert stub.ints(2) == (int(exe.handle), int(node))
        with pcg.trace() as t:
            assert route(call) == "ctypes"
        assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
        driver_refuses(call, "cuGraphExecKernelNodeSetParams")
    ''', native)


@both
def test_slots_written_and_set_in_one_compiled_call(native):
    """``fast.exec_kernel_node_set_slots`` (a graphed call's rebind): on the compiled route
    the slots become ``ptrs[input] + delta`` and the one set-params call follows; where it
    is not made there (the ctypes route, a trace open, a value it cannot read) it answers
    False having written nothing; a refusal is raised naming the call."""
    run('''
        import ctypes, struct
        from pycudagraph._cuda import fast as fast_mod
        g, y = fake_graph(), buffer()
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        pack = exe.exec_node(node).args
        native = COMPILED
        buf = ctypes.create_string_buffer(b"\\x11" * 24, 24)
        at = ctypes.addressof(buf)
        slots = (at + 1, 1, 16, at + 12, 0, -8)   # an unaligned slot; a negative delta
        ptrs = [0x7000_0000_0000, 0x7100_0000_0000]
        call = lambda s=slots: fast_mod.exec_kernel_node_set_slots(
            int(exe.handle), int(node), pack, node, s, ptrs)
        made = stub.total()
        if native:
            assert call() is True
            assert stub.last() == "cuGraphExecKernelNodeSetParams"
            assert stub.ints(2) == (int(exe.handle), int(node))
            assert stub.total() == made + 1
            assert struct.unpack_from("<Q", buf, 1)[0] == ptrs[1] + 16
            assert struct.unpack_from("<Q", buf, 12)[0] == ptrs[0] - 8
            assert buf.raw[0:1] == b"\\x11" and buf.raw[20:] == b"\\x11" * 4
            ctypes.memset(buf, 0x11, 24)
        else:
            assert call() is False
        for bad in ((at, 2, 0), (at, 0), (at, -1, 0), (at, 0, 1 << 70), (0, 0, 0), (at, 0.5, 0)):
            assert call(bad) is False, bad
        with pcg.trace():
            assert call() is False
        assert buf.raw == b"\\x11" * 24   # nothing written where the call was not made
        assert stub.total() == made + (1 if native else 0)
        if native:
            driver_refuses(call, "cuGraphExecKernelNodeSetParams")
    ''', native)
