"""``GraphExec.block_launches``: while a reason is set, ``exe.launch`` raises
``PyCudaGraphError(reason)`` before any driver call, on the compiled route and with
PYCUDAGRAPH_NO_NATIVE=1 (CPU, the driver stub); ``None`` lifts the block."""

from tests.support.native_driver import both, run


@both
def test_blocked_launches_are_refused_before_the_driver(native):
    run('''
        g = fake_graph()
        g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = g.instantiate()
        s = stream()
        assert exe.launch_block is None
        assert route(lambda: exe.launch(s)) == C
        exe.block_launches("the graph's memory is asleep")
        assert exe.launch_block == "the graph's memory is asleep"
        last = exe._last_stream
        for call in (lambda: exe.launch(s), lambda: exe.launch(), lambda: exe.launch(stream=s),
                     exe.launch):
            refused(call, pcg.PyCudaGraphError, "the graph's memory is asleep")
        assert exe._last_stream is last  # nothing launched, nothing remembered
        try:
            exe.launch(s)
        except pcg.ClosedError:  # the block is its own error, not a closed object's
            raise AssertionError("a ClosedError")
        except pcg.PyCudaGraphError as exc:
            assert type(exc) is pcg.PyCudaGraphError and str(exc) == exe.launch_block
        exe.block_launches("another reason")  # replaced
        refused(lambda: exe.launch(s), pcg.PyCudaGraphError, "another reason")
        refused(lambda: exe.block_launches(3), pcg.ArgumentError, "reason must be a str")
        assert exe.launch_block == "another reason"
        exe.block_launches(None)
        assert exe.launch_block is None
        assert route(lambda: exe.launch(s)) == C
        try:
            exe.launch_block = "x"
        except AttributeError:
            pass
        else:
            raise AssertionError("launch_block is read-only")
        exe.block_launches("blocked, then closed")
        exe.close()  # a closed exec stays blocked: the reason is said first
        refused(lambda: exe.launch(s), pcg.PyCudaGraphError, "blocked, then closed")
    ''', native)
