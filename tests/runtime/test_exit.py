"""GPU tests: KeyboardInterrupt/SystemExit inside a capture, and exiting with live objects.

Exiting runs in subprocesses (a crash or hang at exit cannot take the test run down):
the exit code must be the one asked for and stderr must be empty.
"""

import pytest

import pycudagraph as pcg
from tests.support.lifetime_util import run_python, small_graph_works

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(5), GeneratorExit()])
def test_base_exceptions_end_the_capture_and_propagate_unchanged(helpers, stream, exc):
    buf = pcg.DeviceBuffer(4096)
    with pytest.raises(type(exc)) as info:
        with pcg.capture(stream):
            helpers["fill"].launch(4, 256, (buf, 1.0, 1024), stream=stream)
            raise exc
    assert info.value is exc  # the very same exception, not a CaptureError
    assert pcg.capture_status(stream) == "none"  # the capture was ended
    assert pcg._cuda.check.capture_watchers == []
    helpers["fill"].launch(4, 256, (buf, 2.0, 1024), stream=stream)  # the stream works
    stream.synchronize()
    assert buf.to_numpy()[0] == 2.0
    small_graph_works(helpers)


def test_ordinary_exception_still_becomes_capture_error(stream):
    with pytest.raises(pcg.CaptureError, match="the block raised ValueError: nope"):
        with pcg.capture(stream):
            raise ValueError("nope")


_LIVE = """
    import sys, threading
    import numpy as np
    import pycudagraph as pcg

    mod = pcg.Module.from_file("helpers.cu")
    s, s2 = pcg.Stream(), pcg.Stream()
    ev = pcg.Event()
    buf, spare = pcg.DeviceBuffer(1 << 20), pcg.DeviceBuffer(4096)
    pin = pcg.PinnedBuffer(4096)
    view = pin.array(np.float32)
    g = pcg.Graph()
    k = g.add_kernel(mod["spin"], 1, 1, (200_000_000,))
    h = g.add_host(lambda: None, deps=[k])
    g.add_memcpy(pin, spare, deps=[h])
    g.add_event_record(ev, deps=[k])
    exe = g.instantiate()
    exe.launch(s)            # still running when the process exits
    exe.launch(s)
    deferred = pcg.DeviceBuffer(4096)
    g2 = pcg.Graph()
    g2.add_kernel(mod["fill"], 1, 1, (deferred, 1.0, 1))
    exe2 = g2.instantiate()
    deferred.free()          # deferred: exe2 holds it
    t = pcg.trace().__enter__()  # a trace left open
    def worker():            # objects made in another thread
        global wbuf, wexe
        wbuf = pcg.DeviceBuffer(4096)
        wg = pcg.Graph()
        wg.add_kernel(mod["fill"], 1, 1, (wbuf, 1.0, 1))
        wexe = wg.instantiate()
        wexe.launch(pcg.Stream())
    th = threading.Thread(target=worker)
    th.start(); th.join()
"""


@pytest.mark.parametrize("ending,code", [
    ("pass", 0),
    ("sys.exit(0)", 0),
    ("sys.exit(7)", 7),
    ("cap = pcg.capture(s2); cap.__enter__(); mod['fill'].launch(1, 1, (spare, 1.0, 1), stream=s2)", 0),
    ("cap = pcg.capture(s2); cap.__enter__(); mod['fill'].launch(1, 1, (spare, 1.0, 1), stream=s2); sys.exit(0)", 0),
    ("with pcg.capture(s2):\n        mod['fill'].launch(1, 1, (spare, 1.0, 1), stream=s2)\n        sys.exit(3)", 3),
    ("with pcg.capture(s2, mode='relaxed'):\n        mod['fill'].launch(1, 1, (spare, 1.0, 1), stream=s2)\n        raise SystemExit(0)", 0),
])
def test_exit_with_live_objects_is_silent(ending, code):
    res = run_python(_LIVE + "    " + ending + "\n", timeout=180)
    assert res.returncode == code, res.stderr[-3000:]
    assert res.stderr == "", res.stderr[-3000:]


def test_exit_after_everything_was_closed_explicitly():
    res = run_python("""
        import pycudagraph as pcg
        mod = pcg.Module.from_file("helpers.cu")
        s = pcg.Stream()
        buf = pcg.DeviceBuffer(4096)
        g = pcg.Graph()
        g.add_kernel(mod["fill"], 1, 1, (buf, 1.0, 1))
        exe = g.instantiate()
        exe.launch(s)
        exe.close(); g.close(); buf.free(); s.close()
    """)
    assert res.returncode == 0 and res.stderr == "", res.stderr[-3000:]
