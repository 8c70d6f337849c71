"""The driver stub behind the compiled hot path's CPU tests: ``tests/support/driver_stub.c``
stands in for libcuda, and both routes of the hot calls (compiled and ctypes) call it.

``run(body, native)`` runs ``PRELUDE + body`` in a fresh interpreter, because
``fast.use_driver_library`` replaces the process-wide entry points (a GPU test session in the
same process must keep the real ones); with ``native=False`` the interpreter runs with
PYCUDAGRAPH_NO_NATIVE=1. ``both`` parametrizes a test over the two. In the body,
``route(fn)`` runs fn and says which route made its driver call ("C" or "ctypes"): the
ctypes route calls ``fast._f``'s functions, the compiled route calls the stub directly.
"""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from pycudagraph._cuda import fast
from tests.support import driver_stub

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_STUB: list = []


def stub_path() -> str:
    """The driver stub, built once per test session (skips without a C compiler)."""
    if not _STUB:
        try:
            _STUB.append(driver_stub.build(tempfile.mkdtemp(prefix="pcg-stub-")))
        except (RuntimeError, OSError) as exc:
            pytest.skip(f"cannot build tests/support/driver_stub.c here: {exc}")
    return _STUB[0]


#: What every body starts with: the stub as the driver, device 0 current, this thread ready
#: for the compiled route, a kernel ``k`` (float* y, float a, int n) and the helpers
#: ``route``, ``refused``, ``driver_refuses``, ``buffer`` and ``stream``. ``C`` is what a
#: compiled call reads as in this run ("ctypes" under PYCUDAGRAPH_NO_NATIVE=1).
PRELUDE = textwrap.dedent('''
    import os, threading
    import numpy as np
    import pycudagraph as pcg
    from tests.support.driver_stub import Stub
    from tests.support.fakes import fake_buffer, fake_exec, fake_graph, fake_kernel, fake_node
    from pycudagraph import _lifetime
    from pycudagraph._cuda import check, fast
    from pycudagraph._cuda.context import seen, thread_state
    from pycudagraph.compile.args import ArgPack
    from pycudagraph.nodes.base import REMOVED

    stub = Stub(os.environ["PCG_STUB"])
    fast.use_driver_library(stub.path)
    thread_state.device = 0  # the (pretended) current device: no CUDA runtime call is made
    COMPILED = fast.native_status().startswith("compiled")
    C = "C" if COMPILED else "ctypes"
    VIA_CTYPES = [0]

    def _counting(fn):
        def call(*args):
            VIA_CTYPES[0] += 1
            return fn(*args)
        return call

    for _attr in ("launch", "launch_kernel", "add_kernel", "exec_set", "instantiate", "update"):
        setattr(fast._f, _attr, _counting(getattr(fast._f, _attr)))

    def route(fn):
        made, via = stub.total(), VIA_CTYPES[0]
        fn()
        assert stub.total() > made, "no driver call was made"
        return "ctypes" if VIA_CTYPES[0] > via else "C"

    def refused(fn, cls, words):
        """fn raises cls with words in its message, and calls no driver function."""
        made = stub.total()
        try:
            fn()
        except cls as exc:
            assert words in str(exc), exc
        else:
            raise AssertionError(f"no {cls.__name__} ({words})")
        assert stub.total() == made, "the driver was called"

    def driver_refuses(fn, api, rc=400):
        """With the stub answering ``rc`` for ``api``, fn raises the CudaError naming it
        after one driver call."""
        stub.set_rc(api, rc)
        made = stub.total()
        try:
            fn()
        except pcg.CudaError as exc:
            assert str(exc).startswith(api), exc
        else:
            raise AssertionError(f"a refused {api} was not raised")
        assert stub.total() == made + 1, "not one driver call"

    freed = []

    def buffer():
        b = fake_buffer(64)
        b._addr, b._dev = b.ptr, 0
        b._fin = lambda b=b: freed.append(b)
        return b

    def stream():
        s = pcg.Stream.__new__(pcg.Stream)
        s._h, s._dev, s._addr = 0x5000, 0, 0x5000
        return s

    k = fake_kernel("float* y, float a, int n")
    FUNC = k.last_function[0]
    stub.expect(k.params)
    thread_state.visited = {0}
    fast._ensure()  # this thread's context is current: the compiled route may run here
''')


def run(body: str, native: bool) -> None:
    """PRELUDE + body in a fresh interpreter, with or without the compiled route."""
    if native and fast.native_status().startswith("ctypes"):
        pytest.skip(f"hot path: {fast.native_status()}")
    code = PRELUDE + textwrap.dedent(body) + "\nprint('stub run ok')\n"
    env = dict(os.environ, PCG_STUB=stub_path(),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(fast.NATIVE_ENV, None)
    if not native:
        env[fast.NATIVE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "stub run ok" in done.stdout, done.stdout + done.stderr


both = pytest.mark.parametrize("native", [True, False], ids=["compiled", "ctypes"])
