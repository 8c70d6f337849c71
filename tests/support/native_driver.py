"""The fake driver of the compiled hot path tests: ctypes callbacks stand in for libcuda.

``run_fake(body)`` runs ``PRELUDE + body`` in a fresh interpreter, because ``_native.init``
replaces the process-wide entry-point table (a GPU test session in the same process must
keep the real one). ``INTEGRATED`` adds fake graphs, kernels and buffers
(:mod:`tests.support.fakes`) for the compiled paths as the public API calls them.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from pycudagraph._cuda import fast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The fake driver: every entry point records its arguments (and a copy of the launch's
# argument bytes) and returns RC[name] (0 unless a test sets it).
PRELUDE = textwrap.dedent('''
    import ctypes, struct
    import pycudagraph as pcg
    from pycudagraph._cuda import _native as N, check
    from pycudagraph.compile.args import ArgPack, Layout
    from pycudagraph.compile.signature import parse_params

    VP, U = ctypes.c_void_p, ctypes.c_uint
    CALLS, RC = [], {}
    SIG = "float* y, float a, int n, bool f, double d, unsigned char c, long long q, unsigned int u"

    def record(name, *args):
        CALLS.append((name, args))
        return RC.get(name, 0)

    def slots(params_addr, layout):
        """Values the launch would read: through the void* array, as the driver reads them."""
        out = []
        for i, p in enumerate(layout.params):
            ptr = ctypes.cast(params_addr + 8 * i, ctypes.POINTER(ctypes.c_uint64))[0]
            out.append(struct.unpack("<" + p.fmt, ctypes.string_at(ptr, p.size))[0])
        return tuple(out)

    LAYOUT = Layout("k", parse_params(SIG))
    ARGS = (0x1000, 2.5, 7, True, 1.25, 200, -5, 4000000000)

    F_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, VP, VP)(lambda e, s: record("launch", e, s))
    def _lk(f, gx, gy, gz, bx, by, bz, shm, s, params, extra):
        return record("launch_kernel", f, (gx, gy, gz), (bx, by, bz), shm, s,
                      slots(params, LAYOUT), extra)
    F_LK = ctypes.CFUNCTYPE(ctypes.c_int, VP, U, U, U, U, U, U, U, VP, VP, VP)(_lk)
    def _add(out, graph, deps, n, params):
        dep = [ctypes.cast(deps, ctypes.POINTER(ctypes.c_uint64))[i] for i in range(n)]
        ctypes.cast(out, ctypes.POINTER(ctypes.c_uint64))[0] = 0xABC0 + len(CALLS)
        return record("add", graph, dep, params)
    F_ADD = ctypes.CFUNCTYPE(ctypes.c_int, VP, VP, VP, ctypes.c_size_t, VP)(_add)
    def _set(e, node, params):
        hdr = struct.unpack_from("<Q", ctypes.string_at(params + 40, 8))[0]
        return record("exec_set", e, node, slots(hdr, LAYOUT))
    F_SET = ctypes.CFUNCTYPE(ctypes.c_int, VP, VP, VP)(_set)
    def addr(f):
        return ctypes.cast(f, VP).value
    N.init({"cuGraphLaunch": addr(F_LAUNCH), "cuLaunchKernel": addr(F_LK),
            "cuGraphAddKernelNode_v2": addr(F_ADD),
            "cuGraphExecKernelNodeSetParams_v2": addr(F_SET)}, vars(check))
    NL = LAYOUT.native
    assert NL is not None and NL.simple
''')


def run_fake(body: str) -> None:
    """Run PRELUDE + body in a fresh interpreter; fail with its output when it fails."""
    code = PRELUDE + textwrap.dedent(body) + "\nprint('fake-driver ok')\n"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(fast.NATIVE_ENV, None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "fake-driver ok" in done.stdout, done.stdout + done.stderr


needs_native = pytest.mark.skipif(fast.native is None, reason=f"hot path: {fast.native_status()}")


# The compiled paths as the API calls them (Graph.add_kernel, Kernel.launch, GraphExec.set_arg)
# with the fake driver behind both paths: what the checked path refuses never reaches it.
INTEGRATED = textwrap.dedent('''
    from tests.support.fakes import fake_graph, fake_node, fake_kernel, fake_exec, fake_buffer
    from pycudagraph import _lifetime
    from pycudagraph._cuda import fast
    from pycudagraph._cuda.context import thread_state
    from pycudagraph.graph.exec import _NEVER
    from pycudagraph.nodes.base import REMOVED
    thread_state.device = 0  # the (pretended) current device: no CUDA call is made
    fast._f.launch_kernel, fast._f.add_kernel, fast._f.exec_set = F_LK, F_ADD, F_SET
    N.mark_thread()
    k = fake_kernel("float* y, float a, int n")
    k._native = k._layout.native
    LAYOUT = k._layout  # what the fake driver decodes
    freed = []

    def buffer():
        b = fake_buffer(64)
        b._addr, b._dev = b.ptr, 0
        b._fin = lambda b=b: freed.append(b)
        return b

    def refused(fn, cls, words):
        n = len(CALLS)
        try:
            fn()
        except cls as exc:
            assert words in str(exc), exc
        else:
            raise AssertionError(f"no {cls.__name__} ({words})")
        assert len(CALLS) == n, CALLS[n:]  # nothing reached the driver
''')
