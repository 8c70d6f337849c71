"""The hot calls as the API makes them (Graph.add_kernel, Kernel.launch, GraphExec.set_arg),
with the driver stub behind both routes (CPU): what the checked packing refuses never
reaches the driver, and what it keeps alive is kept."""

from tests.support.native_driver import both, run


@both
def test_add_keeps_the_checked_paths_guarantees(native):
    run('''
        g = fake_graph()
        a = fake_node(g)
        buf = buffer()
        node = g.add_kernel(k, 1, 32, (buf, 1.0, 4), deps=[a])
        assert stub.last() == "cuGraphAddKernelNode" and stub.deps(1) == [a._h]
        assert node._pack.refs[0] is buf and _lifetime.holders_of(buf)  # the ledger sees it
        refused(lambda: g.add_kernel(k, 1, 32, (buf, 1.0, 4), deps=[a, a]),
                pcg.ArgumentError, "twice")
        refused(lambda: g.add_kernel(k, 1, 2048, (buf, 1.0, 4)), pcg.ArgumentError,
                "threads per block")
        gone = buffer()
        gone.free()
        assert freed == [gone]
        refused(lambda: g.add_kernel(k, 1, 32, (gone, 1.0, 4)), pcg.ClosedError, "was freed")
        b = fake_node(g)
        b._raw = REMOVED
        refused(lambda: g.add_kernel(k, 1, 32, (buf, 1.0, 4), deps=[b]), pcg.ClosedError,
                "removed")
        g.table.closed = True
        refused(lambda: g.add_kernel(k, 1, 32, (buf, 1.0, 4)), pcg.ClosedError, "closed")
        g.table.closed = False
        with pcg.trace() as t:
            g.add_kernel(k, 1, 32, (buf, 1.0, 4))
        assert [r.api for r in t.records] == ["cuGraphAddKernelNode"]
    ''', native)


def test_fits_is_false_for_limits_never_loaded():
    from tests.support.fakes import fake_kernel
    from pycudagraph.compile import limits as validate
    k = fake_kernel()
    assert k._fits(1, 32, 0) and not k._fits(1, 2048, 0) and not k._fits((1,), 32, 0)
    del validate.KERNEL_LIMITS[k.last_function[0]]
    assert not k._fits(1, 32, 0)  # unknown limits: the checked path loads them


@both
def test_set_arg_retires_and_refuses_as_the_checked_path(native):
    run('''
        g = fake_graph()
        one, two, three = buffer(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (one, 1.0, 4))
        exe = fake_exec(g)
        exe.set_arg(node, 0, two)
        assert stub.last() == "cuGraphExecKernelNodeSetParams"
        assert stub.values(k.params)[0] == two.ptr
        exe.set_arg(node, 0, three)  # `two` may still be read by a queued launch
        assert any(r is two for r in exe._ledger.retired)
        two.free()
        assert freed == [] and _lifetime.deferred_frees() == [two]
        exe.synchronize()  # no launch yet: nothing to wait for; the retired are let go
        assert freed == [two]
        gone = buffer()
        gone.free()
        refused(lambda: exe.set_arg(node, 0, gone), pcg.ClosedError, "was freed")
        refused(lambda: exe.set_arg(node, 3, 1.0), pcg.ArgumentError, "out of range")
        refused(lambda: exe.set_arg(node, "zz", 1.0), pcg.ArgumentError, "no parameter named")
        exe.close()
        refused(lambda: exe.set_arg(node, 1, 2.0), pcg.ClosedError, "closed")
    ''', native)


@both
def test_an_exec_with_records_goes_when_dropped_without_the_collector(native):
    # an exec that may be parked keeps its records in its reuse box, which its finalizer
    # holds until the exec goes: a record holding the exec would keep it (and all it
    # points at) alive for ever, past any collection
    run('''
        import gc, weakref
        g = fake_graph()
        one, two, three = buffer(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (one, 1.0, 4))
        gc.collect()
        gc.disable()
        exe = g.instantiate()
        assert type(exe._ledger.extra[2]).__name__ == "ReuseBox", exe._ledger.extra
        exe.set_arg(node, 0, two)  # a record, retiring `one`'s place
        exe.set_arg(node, 0, three)
        assert any(r is two for r in exe._ledger.retired)
        gone, ledger = weakref.ref(exe), weakref.ref(exe._ledger)
        del exe
        assert gone() is None, "the dropped exec is still alive"
        assert ledger() is None, "what the exec kept and retired outlived it"
        gc.enable()
        gc.collect()
    ''', native)


@both
def test_eager_launch_refuses_freed_buffers_and_feeds_captures(native):
    run('''
        buf = buffer()
        k.launch(1, 32, (buf, 1.0, 4))
        assert stub.last() == "cuLaunchKernel" and stub.values(k.params)[0] == buf.ptr
        kept = []
        check.capture_watchers.append([])  # a capture is open
        _lifetime.capture_keeps.append(kept)
        k.launch(1, 32, [buf, 2.0, 4])
        # under capture a configuration is checked before the driver sees it
        refused(lambda: k.launch(1, 2048, (buf, 1.0, 4)), pcg.ArgumentError, "threads per block")
        _lifetime.capture_keeps.remove(kept)
        check.capture_watchers.pop()
        assert any(buf in x for x in kept if isinstance(x, tuple)), kept
        gone = buffer()
        gone.free()
        refused(lambda: k.launch(1, 32, (gone, 1.0, 4)), pcg.ClosedError, "was freed")
        s = pcg.Stream.__new__(pcg.Stream)
        s._h, s._dev, s._addr = None, 0, 0x5000
        refused(lambda: k.launch(1, 32, (buf, 1.0, 4), stream=s), pcg.ClosedError, "")
    ''', native)


@both
def test_set_arg_checks_the_device_while_several_devices_are_in_use(native):
    """With two devices seen the buffer's device is judged against the node's (a node of
    device 0 here) before any route runs."""
    run('''
        g = fake_graph()
        node = g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = fake_exec(g)
        seen.multi = True
        other = buffer()
        other._dev = 1
        refused(lambda: exe.set_arg(node, 0, other), pcg.DeviceMismatchError,
                "runs on device 0 but argument 0 'y' (a DeviceBuffer) is memory of device 1")
        mine = buffer()
        assert route(lambda: exe.set_arg(node, 0, mine)) == C
        assert stub.values(k.params)[0] == mine.ptr
        with pcg.trace() as t:
            exe.set_arg(node, 0, buffer())
        assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
    ''', native)
