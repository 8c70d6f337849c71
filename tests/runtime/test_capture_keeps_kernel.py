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
