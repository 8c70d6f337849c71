"""A launch made while a capture is open keeps its kernel, and so the kernel's module (the
library ``cudaLibraryUnload`` would unload), alive for as long as the captured graph and its
execs, on both routes: the compiled launch packs on the C stack and makes no ArgPack that
would hold the kernel, so the launch itself must hand the kernel to the open captures
(CPU, the driver stub; as built and with PYCUDAGRAPH_NO_NATIVE=1)."""

from tests.support.native_driver import both, run


@both
def test_a_captured_launch_keeps_its_kernel_and_module_while_the_graph_lives(native):
    run('''
        import weakref

        class Module:  # stands for the compiled module: its library goes when it goes
            pass

        mod = Module()
        k2 = fake_kernel("float* y, float a, int n", "k2")
        k2.module = mod
        gone = weakref.ref(mod)
        y = buffer()
        kept = []
        check.capture_watchers.append([])  # a capture is open
        _lifetime.capture_keeps.append(kept)
        assert route(lambda: k2.launch(1, 32, (y, 1.0, 4))) == C
        _lifetime.capture_keeps.remove(kept)
        check.capture_watchers.pop()
        assert any(isinstance(x, tuple) and y in x for x in kept), kept  # the arguments
        g = fake_graph()
        g.table.ledger.keep_also(*kept)  # what Capture.__exit__ hands the captured graph
        del k2, mod, kept
        assert gone() is not None, "the captured graph let its kernel's module go"
        g.table.ledger.clear()  # what the graph's destruction does: the module goes with it
        assert gone() is None, "the module outlived the graph that kept it"
    ''', native)


@both
def test_a_loop_of_launches_keeps_the_kernel_once_and_each_launchs_arguments(native):
    # the rule of _lifetime.keep_launched and its C twin: a kernel among the last two kept
    # items is not added again (a loop of launches with no arguments keeps it once, one
    # with arguments every other launch), the arguments of every launch are. (The ctypes route's
    # checked packing keeps each launch's ArgPack too, between them: there the kernel is
    # kept more often, never less.)
    run('''
        from pycudagraph.compile.args import ArgPack
        k2 = fake_kernel("float* y, float a, int n", "k2")
        k3 = fake_kernel("", "k3")
        stub.expect(k3.params)  # the stub reads no argument values (k3 has none)
        y = buffer()
        kept = []
        check.capture_watchers.append([])  # a capture is open
        _lifetime.capture_keeps.append(kept)
        for _ in range(100):
            assert route(lambda: k3.launch(1, 32)) == C
        for i in range(3):
            k2.launch(1, 32, [y, float(i), 4])
        k3.launch(1, 32)
        k2.launch(1, 32, (y, 5.0, 4))  # k2 is not among the last two: kept again
        second = []
        _lifetime.capture_keeps.append(second)  # two captures open: each keeps its own
        k3.launch(1, 32)
        _lifetime.capture_keeps.remove(second)
        _lifetime.capture_keeps.remove(kept)
        check.capture_watchers.pop()
        args = [(y, 0.0, 4), (y, 1.0, 4), (y, 2.0, 4), (y, 5.0, 4)]
        if C == "C":
            assert kept == [k3, k2, args[0], args[1], k2, args[2], k3, k2, args[3], k3], kept
            assert second == [k3], second
        else:
            plain = [x for x in kept if not isinstance(x, ArgPack)]
            assert [x for x in plain if isinstance(x, tuple)] == args, plain
            assert plain.count(k3) <= 102 and plain[-1] is k3 and k2 in plain, plain
            assert k3 in second, second
    ''', native)
