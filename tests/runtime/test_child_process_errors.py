"""Misuse in a child process with a watchdog: a crash or hang there cannot take the run down.

Each snippet makes one bad call through the public API on the GPU, catches the refusal,
then builds and launches a small graph and checks its result: the child must exit 0 having
printed the refusal (with the word naming the problem) and ``HEALTHY``.
"""

import pytest

from tests.support.watchdog import run_snippet

PRELUDE = """
import numpy as np
import pycudagraph as pcg
m = pcg.Module.from_file("helpers.cu")
k = m["fill"]
buf = pcg.DeviceBuffer(256)
g = pcg.Graph()
a, b = g.add_empty(), g.add_empty(deps=[])
g.add_dependency(a, b)
def bad():
{body}
try:
    bad()
    print("NOT REFUSED")
except pcg.PyCudaGraphError as exc:
    print("REFUSED", type(exc).__name__, exc)
y = pcg.DeviceBuffer(64 * 4)
h = pcg.Graph()
n1 = h.add_kernel(k, 1, 64, (y, 4.0, 64))
h.add_kernel(m["add_one"], 1, 64, (y, 64), deps=[n1])
s = pcg.Stream()
h.instantiate().launch(s)
s.synchronize()
assert np.all(y.to_numpy(np.float32) == 5.0)
print("HEALTHY")
"""

CASES = {
    "block_2048": ("k.launch(1, 2048, (buf, 1.0, 4))", "threads per block"),
    "grid_y_65536": ("g.add_kernel(k, (1, 65536), 32, (buf, 1.0, 4))", "grid y"),
    "smem_1MiB": ("k.launch(1, 32, (buf, 1.0, 4), shared_mem=1 << 20)", "shared_mem"),
    "smem_negative": ("k.launch(1, 32, (buf, 1.0, 4), shared_mem=-1)", "shared_mem"),
    "grid_str": ("k.launch('12', 32, (buf, 1.0, 4))", "grid"),
    "true_pointer": ("k.launch(1, 32, (True, 1.0, 4))", "bool"),
    "self_edge": ("g.add_dependency(a, a)", "self-edge"),
    "cycle": ("g.add_dependency(b, a)", "cycle"),
    "duplicate_edge": ("g.add_dependency(a, b)", "duplicate"),
    "missing_edge": ("g.remove_dependency(b, a)", "no edge"),
    "memset_overrun_update": ("n = g.add_memset(buf, 0, 256)\n    g.instantiate().set_params(n, count=257)",
                              "does not fit"),
    "memcpy_overrun_update": ("n = g.add_memcpy(buf, pcg.DeviceBuffer(256))\n    n.set_params(nbytes=512)",
                              "does not fit"),
    "set_arg_past_end": ("n = g.add_kernel(k, 1, 32, (buf, 1.0, 4))\n    g.instantiate().set_arg(n, 7, 1)",
                         "out of range"),
    "nested_capture": ("s = pcg.Stream()\n    with pcg.capture(s):\n        with pcg.capture(s):\n"
                       "            pass", "nested capture"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_misuse_in_child(name):
    body, word = CASES[name]
    out = run_snippet(PRELUDE.format(body="    " + body), timeout=120)
    assert out.kind == "ok", str(out)
    assert "REFUSED" in out.output and word in out.output, out.output
    assert "HEALTHY" in out.output, out.output


def test_watchdog_tells_crash_from_exception():
    assert run_snippet("print('hi')").kind == "ok"
    assert run_snippet("raise ValueError('x')").kind == "exception"
    crash = run_snippet("import os; os.abort()")
    assert crash.kind == "crash" and crash.signal_name == "SIGABRT"
    assert run_snippet("import time; time.sleep(30)", timeout=1).kind == "timeout"
