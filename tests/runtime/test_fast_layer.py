"""Five hot calls of pycudagraph/_cuda/fast.py on the CPU (instantiate and update:
test_fast_instantiate_update.py), with the driver stub
(tests/support/native_driver.py): each takes the compiled route where it can, hands a value it
does not convert to the ctypes route (which packs it the same way), raises the CudaError
naming the call and its runtime twin when the driver refuses, and checks and traces as the
API promises. Each test runs as built and with PYCUDAGRAPH_NO_NATIVE=1.
"""

from tests.support.native_driver import both, run


@both
def test_launch_graph(native):
    run('''
        g = fake_graph()
        node = g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = g.instantiate()
        s = stream()
        assert route(lambda: exe.launch(s)) == C
        assert stub.last() == "cuGraphLaunch" and stub.ints(2) == (int(exe.handle), 0x5000)
        assert route(lambda: exe.launch()) == C and stub.ints(2)[1] == 0  # the legacy stream
        stub.set_rc("cuGraphLaunch", 1)
        made = stub.calls("cuGraphLaunch")
        refused_call = lambda: exe.launch(s)
        try:
            refused_call()
        except pcg.CudaError as exc:
            assert str(exc).startswith("cuGraphLaunch (cudaGraphLaunch) failed: "
                                       "CUDA_ERROR_INVALID_VALUE"), exc
        else:
            raise AssertionError("no CudaError")
        # the compiled route's failed call is repeated by the ctypes route, which raises
        assert stub.calls("cuGraphLaunch") - made == (2 if COMPILED else 1)
        stub.set_rc("cuGraphLaunch", 0)
        s._h = None
        refused(lambda: exe.launch(s), pcg.ClosedError, "was closed")
        exe.close()
        refused(lambda: exe.launch(stream()), pcg.ClosedError, "was closed")
    ''', native)


@both
def test_launch_as_a_method_in_c(native):
    """``GraphExec.launch`` is the base type's (a method of the C type ``ExecBase`` with the
    compiled route): a plain launch makes the driver call itself and keeps the stream; a
    pending host-node error raises after the launch; a wrong object or call is refused."""
    run('''
        from pycudagraph.runtime import hostfn
        g = fake_graph()
        g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = g.instantiate()
        s, s2 = stream(), stream()
        s2._h = s2._addr = 0x6000
        assert "launch" not in pcg.GraphExec.__dict__  # inherited
        kind = type(fast.ExecBase.__dict__["launch"]).__name__
        assert kind == ("method_descriptor" if COMPILED else "function"), kind
        assert route(lambda: exe.launch(s)) == C and exe._last_stream is s
        assert route(lambda: exe.launch(stream=s2)) == C and exe._last_stream is s2
        assert stub.ints(2) == (int(exe.handle), 0x6000)
        launch = exe.launch  # bound, as the benchmarks hold it
        assert route(lambda: launch(s)) == C and exe._last_stream is s
        exe._host_ids = {4242}
        hostfn.pending.append((4242, "cb", ValueError("boom")))
        made = stub.calls("cuGraphLaunch")
        refused_launch = False
        try:
            exe.launch(s2)
        except pcg.HostCallbackError as exc:
            refused_launch = "boom" in str(exc)
        assert refused_launch and stub.calls("cuGraphLaunch") == made + 1  # launched, then raised
        assert exe._last_stream is s2 and not hostfn.pending
        try:  # the method in C refuses it (TypeError), the Python one finds no handle
            fast.ExecBase.launch(object(), s)
        except (TypeError, AttributeError):
            pass
        else:
            raise AssertionError("no error")
        refused(lambda: exe.launch(s, s), TypeError, "")
    ''', native)


@both
def test_launch_kernel(native):
    run('''
        s, y = stream(), buffer()
        assert route(lambda: k.launch((2, 3), [32], (y, 2.5, 7), stream=s, shared_mem=16)) == C
        assert stub.ints(10) == (FUNC, 2, 3, 1, 32, 1, 1, 16, 0x5000, 0)
        assert stub.values(k.params) == (y.ptr, 2.5, 7)
        # keyword names made at run time (not the interned ones of a call site): the same
        names = {"".join(("str", "eam")): s, "".join(("shared", "_mem")): 8,
                 "".join(("ar", "gs")): (y, 3.5, 9)}
        assert route(lambda: k.launch(1, 32, **names)) == C
        assert stub.ints(10)[7:9] == (8, 0x5000) and stub.values(k.params) == (y.ptr, 3.5, 9)
        # a grid the compiled route does not convert (a numpy int): the ctypes route, same call
        assert route(lambda: k.launch(np.int64(2), 32, [y, 2.5, 7], stream=s)) == "ctypes"
        assert stub.ints(4) == (FUNC, 2, 1, 1) and stub.values(k.params) == (y.ptr, 2.5, 7)

        sig = ("float* a, double d, bool f, signed char i8, unsigned char u8, short i16, "
               "unsigned short u16, unsigned int u32, long long i64, unsigned long long u64")
        k10 = fake_kernel(sig, "k10")
        stub.expect(k10.params)
        args = (y, 1.25, True, -128, 255, -32768, 65535, 2**32 - 1, -2**63, 2**64 - 1)
        assert route(lambda: k10.launch(1, 32, args, stream=s)) == C
        packed = ArgPack(k10.layout, k10, args, 1, 32)
        assert stub.values(k10.params) == packed.values() == (y.ptr,) + args[1:]
        args = (y.ptr, np.float64(0.5), np.bool_(False), np.int8(-1), 1, 2, 3, np.uint32(4), 5, 6)
        assert route(lambda: k10.launch(1, 32, args, stream=s)) == C
        assert stub.values(k10.params) == ArgPack(
            k10.layout, k10, args, 1, 32).values()

        # ints of one, two and three 30-bit digits (two are read in line), both signs
        k3 = fake_kernel("float* p, long long q, unsigned long long u", "k3")
        stub.expect(k3.params)
        for v in (2**30 - 1, 2**30, 2**47 + 12345, 2**60 - 1, 2**60, 2**63 - 1):
            assert route(lambda: k3.launch(1, 32, (v, v, v), stream=s)) == C
            assert stub.values(k3.params) == (v, v, v)
        for v in (-(2**30), -(2**47) - 3, -(2**60), -(2**63)):
            assert route(lambda: k3.launch(1, 32, (y, v, 2**63 + 1), stream=s)) == C
            assert stub.values(k3.params) == (y.ptr, v, 2**63 + 1)
            refused(lambda: k3.launch(1, 32, (v, 0, 0), stream=s), pcg.ArgumentError, "")
            refused(lambda: k3.launch(1, 32, (y, 0, v), stream=s), pcg.ArgumentError, "")
        assert route(lambda: k3.launch(1, 32, (y, 1, 2), stream=2**47 + 7)) == C
        assert stub.ints(10)[8] == 2**47 + 7  # a stream handle of two digits

        half = fake_kernel("__half h, int n", "kh")  # a kind packed in Python only
        stub.expect(half.params)
        assert route(lambda: half.launch(1, 32, (1.5, 3), stream=s)) == "ctypes"
        stub.expect(k.params)
        refused(lambda: k.launch(1, 32, (y, "x", 7), stream=s), pcg.ArgumentError,
                "parameter 1 'a' (float) cannot take 'x'")
        refused(lambda: k.launch(1, 32, (y, 1.0, 2**31), stream=s), pcg.ArgumentError,
                "parameter 2 'n' (int)")
        refused(lambda: k.launch(1, 32, (y, 1.0), stream=s), pcg.ArgumentError, "2 given")
        refused(lambda: k.launch(0, 32, (y, 1.0, 3), stream=s), pcg.ArgumentError, "positive")
        gone = buffer()
        gone.free()
        refused(lambda: k.launch(1, 32, (gone, 1.0, 3), stream=s), pcg.ClosedError, "was freed")
        closed = stream()
        closed._h = None
        refused(lambda: k.launch(1, 32, (y, 1.0, 3), stream=closed), pcg.ClosedError, "")

        stub.set_rc("cuLaunchKernel", 700)
        try:
            k.launch(1, 32, (y, 1.0, 3), stream=s)
        except pcg.CudaError as exc:
            assert "cuLaunchKernel (cudaLaunchKernel) failed: CUDA_ERROR_ILLEGAL_ADDRESS" in str(exc)
        else:
            raise AssertionError("no CudaError")
        stub.set_rc("cuLaunchKernel", 0)

        # while a capture is open only a configuration within the known limits goes
        kept = []
        check.capture_watchers.append([])
        _lifetime.capture_keeps.append(kept)
        refused(lambda: k.launch(1, 2048, (y, 1.0, 3), stream=s), pcg.ArgumentError,
                "threads per block")
        assert route(lambda: k.launch(1, 32, [y, 1.0, 3], stream=s)) == C
        assert any(isinstance(x, tuple) and y in x for x in kept), kept
        check.capture_watchers.pop()
        _lifetime.capture_keeps.pop()

        seen.multi = True  # several devices: the checked packing picks the device's function
        assert route(lambda: k.launch(1, 32, (y, 1.0, 3), stream=s)) == "ctypes"
        seen.multi = False
        assert route(lambda: k.launch(1, 32, (y, 1.0, 3), stream=s)) == C
    ''', native)


@both
def test_add_kernel(native):
    run('''
        g, other, y = fake_graph(), fake_graph(), buffer()
        a = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        assert stub.last() == "cuGraphAddKernelNode" and stub.ints(2) == (g.table.h, 0)
        assert a.kernel is k and a._pack.refs == [y, 1.0, 4] and _lifetime.holders_of(y)
        assert stub.header() == (FUNC, 1, 1, 1, 32, 1, 1, 0)
        assert stub.values(k.params) == a._pack.values() == (y.ptr, 1.0, 4)
        nodes = [a]
        add = lambda deps, grid=1: nodes.append(g.add_kernel(k, grid, 32, [y, 2.0, 5], deps=deps))
        assert route(lambda: add([a])) == C and stub.ints(2) == (g.table.h, 1)
        b = nodes[-1]
        assert stub.deps(1) == [a._h] and b.params.args == {"y": y.ptr, "a": 2.0, "n": 5}
        assert route(lambda: add((a, b))) == C and stub.deps(2) == [a._h, b._h]
        assert route(lambda: add(b)) == C and stub.deps(1) == [b._h]  # one node, not a list
        assert route(lambda: add(n for n in (a,))) == C and stub.deps(1) == [a._h]
        many = [g.add_kernel(k, 1, 32, (y, 1.0, 1)) for _ in range(70)]
        assert route(lambda: add(many)) == C and stub.ints(2) == (g.table.h, 70)
        assert stub.deps(64) == [n._h for n in many[:64]]
        # 1-D as a tuple or list, (n, 1, 1) as a saved graph gives it: the compiled route
        for grid in ((3, 1, 1), [3], (3, 1)):
            assert route(lambda: add([a], grid)) == C and stub.header()[1:4] == (3, 1, 1)
        assert route(lambda: add([a], (3, 2, 1))) == "ctypes"  # 2-D: the checked path
        assert stub.header()[1:4] == (3, 2, 1)
        # a grid the compiled route does not convert: the ctypes route, the same node
        assert route(lambda: add([a], np.int64(3))) == "ctypes"
        assert stub.header()[1:4] == (3, 1, 1) and stub.deps(1) == [a._h]

        # the method is the base type's (C on the compiled route), inherited; every form of
        # the common call is the same add, an attribute keyword or a bad call goes to the
        # checked method
        assert "add_kernel" not in pcg.Graph.__dict__
        kind = type(fast.GraphBase.__dict__["add_kernel"]).__name__
        assert kind == ("method_descriptor" if COMPILED else "function"), kind
        import inspect
        assert "device_updatable" in inspect.signature(pcg.Graph.add_kernel).parameters
        forms = (lambda: g.add_kernel(k, 1, 32, (y, 1.0, 2), 0, [a]),
                 lambda: g.add_kernel(kernel=k, grid=1, block=32, args=(y, 1.0, 2), deps=[a]),
                 lambda: g.add_kernel(k, 1, block=32, deps=(a,), shared_mem=0, args=[y, 1.0, 2]),
                 lambda: g.add_kernel(k, 1, 32, (y, 1.0, 2), deps=[a], priority=None))
        for form in forms:
            assert route(form) == C and stub.deps(1) == [a._h]
            assert stub.values(k.params) == (y.ptr, 1.0, 2)
        refused(lambda: g.add_kernel(k, 1, 32, (y, 1.0, 2), bogus=1), TypeError, "bogus")
        refused(lambda: g.add_kernel(k, 1), TypeError, "block")
        refused(lambda: g.add_kernel(k, 1, 32, (y, 1.0, 2), 0, (), 5), TypeError, "positional")
        refused(lambda: g.add_kernel(k, 1, 32, (y, 1.0, 2), grid=2), TypeError, "grid")
        refused(lambda: add([a, a]), pcg.ArgumentError, "twice")
        refused(lambda: add([fake_node(other)]), pcg.ArgumentError, "belongs to another graph")
        refused(lambda: add([object()]), pcg.ArgumentError, "must be a graph node")
        refused(lambda: g.add_kernel(k, 1, 2048, (y, 1.0, 4)), pcg.ArgumentError,
                "threads per block")
        refused(lambda: g.add_kernel(k, 1, 32, (y, 1.0)), pcg.ArgumentError, "2 given")
        refused(lambda: g.add_kernel(object(), 1, 32, (y, 1.0, 4)), pcg.ArgumentError,
                "must be a pycudagraph.Kernel")
        gone = buffer()
        gone.free()
        refused(lambda: g.add_kernel(k, 1, 32, (gone, 1.0, 4)), pcg.ClosedError, "was freed")
        b._raw = REMOVED
        refused(lambda: add([b]), pcg.ClosedError, "removed")
        refused(lambda: add([a, b]), pcg.ClosedError, "removed")
        b._raw = None
        count = len(g.table.nodes)
        stub.set_rc("cuGraphAddKernelNode", 1)
        try:
            add([a])
        except pcg.CudaError as exc:
            assert "cuGraphAddKernelNode (cudaGraphAddKernelNode) failed" in str(exc), exc
        else:
            raise AssertionError("no CudaError")
        stub.set_rc("cuGraphAddKernelNode", 0)
        assert len(g.table.nodes) == count  # no node object for a refused add
        g.table.closed = True
        refused(lambda: add([]), pcg.ClosedError, "was closed")
        refused(lambda: add([a]), pcg.ClosedError, "was closed")
        g.table.closed = False
        with pcg.trace() as t:
            assert route(lambda: add([a])) == "ctypes"  # traced: the ctypes route records it
        assert [r.api for r in t.records] == ["cuGraphAddKernelNode"]
        assert ", {n" in t.records[0].text, t.records[0].text
        seen.multi = True
        assert route(lambda: add([a])) == "ctypes"
        seen.multi = False
        assert route(lambda: add([a])) == C
    ''', native)


@both
def test_set_arg(native):
    run('''
        g, y, y2 = fake_graph(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        h = int(exe.handle)
        assert route(lambda: exe.set_arg(node, 1, 2.5)) == C
        assert stub.ints(2) == (h, node._h) and stub.values(k.params) == (y.ptr, 2.5, 4)
        assert route(lambda: exe.set_arg(node, "a", 3.5)) == C  # by name: compiled too
        assert stub.values(k.params) == (y.ptr, 3.5, 4)
        assert route(lambda: exe.set_arg(node, np.int64(2), np.int32(9))) == C
        assert route(lambda: exe.set_arg(node, "y", y2)) == C
        assert stub.values(k.params) == (y2.ptr, 3.5, 9)
        assert any(r is y for r in exe._ledger.retired)  # a queued launch may still read y
        assert node.params.args == {"y": y.ptr, "a": 1.0, "n": 4}  # the graph's node is unchanged

        refused(lambda: exe.set_arg(node, 2, 1.5), pcg.ArgumentError, "parameter 2 'n' (int)")
        refused(lambda: exe.set_arg(node, 1, "x"), pcg.ArgumentError, "cannot take 'x'")
        refused(lambda: exe.set_arg(node, 3, 1.0), pcg.ArgumentError, "out of range")
        refused(lambda: exe.set_arg(node, -1, 1.0), pcg.ArgumentError, "out of range")
        refused(lambda: exe.set_arg(node, "zz", 1.0), pcg.ArgumentError, "no parameter named 'zz'")
        refused(lambda: exe.set_arg(node, True, 1.0), pcg.ArgumentError, "must be an int")
        refused(lambda: exe.set_arg(node, 1.0, 1.0), pcg.ArgumentError, "must be an int")
        gone = buffer()
        gone.free()
        refused(lambda: exe.set_arg(node, 0, gone), pcg.ClosedError, "was freed")
        stub.set_rc("cuGraphExecKernelNodeSetParams", 400)
        for key, value in ((1, 7.5), ("y", buffer())):
            try:
                exe.set_arg(node, key, value)
            except pcg.CudaError as exc:
                assert str(exc).startswith("cuGraphExecKernelNodeSetParams "
                    "(cudaGraphExecKernelNodeSetParams) failed: CUDA_ERROR_INVALID_HANDLE"), exc
            else:
                raise AssertionError("no CudaError")
        stub.set_rc("cuGraphExecKernelNodeSetParams", 0)
        # every refusal above left the exec's pack as it was: the next call carries it
        assert route(lambda: exe.set_arg(node, 2, 11)) == C
        assert stub.values(k.params) == (y2.ptr, 3.5, 11)

        half = fake_kernel("__half h, int n", "kh")
        stub.expect(half.params)  # (the stub reads as many values as it is told)
        hn = g.add_kernel(half, 1, 32, (1.0, 2))
        exe2 = g.instantiate()
        assert route(lambda: exe2.set_arg(hn, "h", 1.5)) == "ctypes"  # packed in Python only
        assert route(lambda: exe2.set_arg(hn, "n", 3)) == C
        assert stub.values(half.params) == (1.5, 3)
        stub.expect(k.params)

        with pcg.trace() as t:
            assert route(lambda: exe.set_arg(node, 1, 4.5)) == "ctypes"
        assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
        seen.multi = True  # the device check runs in Python first; the call is compiled
        assert route(lambda: exe.set_arg(node, 1, 5.5)) == C
        seen.multi = False
        got = []

        def other_thread():
            thread_state.device = 0
            got.append(route(lambda: exe.set_arg(node, 1, 6.5)))  # first call here: ctypes
            got.append(route(lambda: exe.set_arg(node, 1, 7.5)))

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert got == ["ctypes", C], got
        exe.close()
        refused(lambda: exe.set_arg(node, 1, 2.0), pcg.ClosedError, "closed")
    ''', native)
