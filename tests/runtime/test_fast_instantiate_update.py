"""Instantiate and whole-graph update through the hot-call layer (``fast.graph_instantiate``,
``fast.exec_update``) on the CPU, with the driver stub (tests/support/native_driver.py): the
compiled route makes the driver call, a trace takes the ctypes route, a refusal leaves the
graph and the exec as they were, and the exec's finalizer destroys the handle the driver gave
(``GraphExec.instantiate`` registers it before the call, holding no handle yet). Each test runs
as built and with PYCUDAGRAPH_NO_NATIVE=1.
"""

from tests.support.native_driver import both, run


@both
def test_instantiate(native):
    run('''
        import gc
        from cuda.bindings import runtime as rt
        import pycudagraph.graph.instantiation as made_mod
        destroyed = []
        rt.cudaGraphExecDestroy = lambda h: destroyed.append(int(h))
        g = fake_graph()
        g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        made = []
        assert route(lambda: made.append(g.instantiate())) == C
        exe = made.pop()
        assert stub.last() == "cuGraphInstantiateWithFlags" and stub.ints(2) == (g.table.h, 0)
        h = int(exe.handle)
        assert h == 0xE0E000 + stub.calls("cuGraphInstantiateWithFlags")
        assert exe._h == h and list(g.table.execs) == [exe] and exe.graph is g
        priority = int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagUseNodePriority)
        assert route(lambda: made.append(g.instantiate(use_node_priority=True))) == C
        assert stub.ints(2) == (g.table.h, priority)
        with pcg.trace() as t:
            assert route(lambda: made.append(g.instantiate())) == "ctypes"
        assert [r.api for r in t.records] == ["cuGraphInstantiateWithFlags"]
        second, third = made
        del made[:]
        # the constructor's form of it, and what it refuses before any driver call
        assert route(lambda: made.append(pcg.GraphExec(None, g, flags=0))) == C
        made.pop().close()
        refused(lambda: pcg.GraphExec(None, g, flags="0"), pcg.ArgumentError,
                "GraphExec: flags must be an int")
        refused(lambda: pcg.GraphExec(None, g, flags=-1), pcg.ArgumentError, "must be >= 0")
        refused(lambda: pcg.GraphExec(exe.handle, g, flags=0), pcg.ArgumentError,
                "give raw=None")
        refused(lambda: pcg.GraphExec(None, g, owned=False, flags=0), pcg.ArgumentError,
                "owned=True")
        destroyed.clear()
        # the finalizer destroys the handle the driver gave: at close(), or when collected
        exe.close()
        assert destroyed == [h] and exe not in g.table.execs
        exe.close()
        assert destroyed == [h]
        h2 = int(second.handle)
        del second
        gc.collect()
        assert destroyed == [h, h2] and list(g.table.execs) == [third]

        # the call raised: the exec made for it is undone (no destroy, the graph keeps none)
        hot = fast.graph_instantiate
        def boom(*args):
            raise KeyboardInterrupt
        fast.graph_instantiate = boom
        try:
            g.instantiate()
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError("no KeyboardInterrupt")
        fast.graph_instantiate = hot
        gc.collect()
        assert destroyed == [h, h2] and list(g.table.execs) == [third]

        # refused by the fast call: cudaGraphInstantiateWithParams says why; the exec made
        # for the call is dropped without a destroy and the graph does not wait for it
        stub.set_rc("cuGraphInstantiateWithFlags", 1)
        def with_params(fn, *args):
            assert fn is rt.cudaGraphInstantiateWithParams
            raise pcg.CudaError("cudaGraphInstantiateWithParams", 1, "CUDA_ERROR_INVALID_VALUE", "")
        made_mod.call = with_params
        try:
            g.instantiate()
        except pcg.CudaError as exc:
            assert "result:" in str(exc), exc
        else:
            raise AssertionError("no CudaError")
        gc.collect()
        assert destroyed == [h, h2] and list(g.table.execs) == [third]
        # refused by the fast call only: the exec comes from cudaGraphInstantiateWithParams
        made_mod.call = lambda fn, *args: rt.cudaGraphExec_t(0xABC)
        fourth = g.instantiate()
        assert int(fourth.handle) == 0xABC and set(g.table.execs) == {third, fourth}
        stub.set_rc("cuGraphInstantiateWithFlags", 0)
        h3 = int(third.handle)
        third.close()
        fourth.close()
        assert destroyed == [h, h2, h3, 0xABC] and not g.table.execs, destroyed
    ''', native)


@both
def test_update(native):
    run('''
        g1, g2, g3 = fake_graph(), fake_graph(), fake_graph()
        for g in (g1, g2, g3):
            g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = g1.instantiate()
        assert route(lambda: exe.update(g2)) == C
        assert stub.last() == "cuGraphExecUpdate"
        assert stub.ints(2) == (int(exe.handle), g2.table.h)
        assert exe.graph is g1 and exe in g2.table.execs
        with pcg.trace() as t:
            assert route(lambda: exe.update(g1)) == "ctypes"
        assert [r.api for r in t.records] == ["cuGraphExecUpdate"]
        # refused: raises naming the call, and the exec keeps what it had
        stub.set_rc("cuGraphExecUpdate", 910)
        taken = exe._taken
        try:
            exe.update(g3)
        except pcg.GraphExecUpdateError as exc:  # the stub's info: topology, no node
            assert "cuGraphExecUpdate" in str(exc) and exc.reason.startswith("topology"), exc
            assert exc.node is None
        else:
            raise AssertionError("no GraphExecUpdateError")
        assert exe._taken is taken and exe not in g3.table.execs
        stub.set_rc("cuGraphExecUpdate", 0)
        assert route(lambda: exe.update(g3)) == C and exe in g3.table.execs
        exe.close()
        refused(lambda: exe.update(g2), pcg.ClosedError, "closed")
    ''', native)


@both
def test_update_keeps_what_it_replaced_until_no_launch_can_read_it(native):
    run('''
        from pycudagraph.graph.exec import RETIRE_CHECK
        g1, g2, g3 = fake_graph(), fake_graph(), fake_graph()
        watched = buffer()
        g1.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        g2.add_kernel(k, 1, 32, (watched, 2.0, 4))
        g3.add_kernel(k, 1, 32, (buffer(), 3.0, 4))
        exe = g1.instantiate()
        exe.update(g2)
        assert exe._pending is g2 and exe in g2.table.execs
        assert exe._ledger.uses(watched)  # taken by the update
        exe.update(g3)  # g2 superseded before its nodes were paired: let go
        assert exe._pending is g3 and exe not in g2.table.execs
        retired = exe._ledger.retired
        assert exe._ledger.uses(watched)  # retired: a queued launch may still read it
        for _ in range(RETIRE_CHECK - len(retired) - 1):
            exe.update(g3)
        assert len(retired) == RETIRE_CHECK - 1, len(retired)
        exe.update(g3)  # the check: never launched, so nothing can read the retired
        assert not exe._ledger.retired and not exe._ledger.uses(watched)
    ''', native)


@both
def test_update_runs_few_python_frames_before_its_driver_call(native):
    # Python right before a large driver call runs with the CPU caches cold, about 1-2 us a
    # frame on a GPU host: the update's bookkeeping and its driver call are one frame
    # (_swap_in), with the two reads it needs (what the new graph keeps); no WeakSet, no
    # retire frame, no ledger method per step.
    run('''
        import sys
        g1, g2 = fake_graph(), fake_graph()
        for g in (g1, g2):
            g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = g1.instantiate()
        exe.update(g2)  # the first update of an exec: nothing of its own paired yet
        frames, seen = [], []
        def watch(frame, event, arg):
            if event == "call":
                (seen if seen else frames).append(frame.f_code.co_name)
            elif event == "c_call" and arg is fast.exec_update:
                seen.append(1)  # the driver call: what follows is not counted
        sys.setprofile(watch)
        exe.update(g1)
        sys.setprofile(None)
        if COMPILED:
            assert seen and frames == ["update", "_swap_in", "exec_keep", "share"], frames
        else:  # the ctypes route's exec_update is Python: it is the driver call there
            assert frames[:4] == ["update", "_swap_in", "exec_keep", "share"], frames
        assert exe._pending is g1 and exe in g1.table.execs
    ''', native)
