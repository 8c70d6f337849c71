"""The compiled hot path (CPU): it builds and imports, packs exactly as the Python path,
hands back what it does not convert, and is off with PYCUDAGRAPH_NO_NATIVE=1.

The calls into "the driver" go to ctypes callbacks standing in for libcuda. They run in a
subprocess each, because ``_native.init`` replaces the process-wide entry-point table
(a GPU test session in the same process must keep the real one).
"""

import importlib
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from pycudagraph._cuda import _build, fast
from pycudagraph.cli import info

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


def test_extension_builds_here(tmp_path):
    """The C source compiles with this interpreter's headers and imports as a module."""
    cmd = _build.command()
    out = tmp_path / os.path.basename(_build.target())
    cmd[cmd.index("-o") + 1] = str(out)
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("_native", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.K_OTHER == 12 and callable(mod.graph_launch)


def test_installed_extension_is_the_active_path():
    """`pip install -e .` builds it in place; without PYCUDAGRAPH_NO_NATIVE it is used."""
    if os.environ.get(fast.NATIVE_ENV, "") not in ("", "0"):
        pytest.skip("PYCUDAGRAPH_NO_NATIVE is set in this session")
    assert fast.native is not None, (
        f"hot path: {fast.native_status()}; build it in place with `pip install -e .`, "
        "`python setup.py build_ext --inplace` or `python pycudagraph/_cuda/_build.py`")
    importlib.import_module("pycudagraph._cuda._native")
    assert fast.native_status().startswith("compiled (pycudagraph._cuda._native")
    assert info.hot_path() == fast.native_status()


def test_disabled_by_environment_variable():
    code = ("from pycudagraph._cuda import fast\n"
            "from pycudagraph.compile.args import Layout\n"
            "from pycudagraph.compile.signature import parse_params\n"
            "from pycudagraph.cli import info\n"
            "assert fast.native is None\n"
            "assert Layout('k', parse_params('float* y, int n')).native is None\n"
            "print(info.hot_path())\n")
    env = dict(os.environ, PYTHONPATH=ROOT, PYCUDAGRAPH_NO_NATIVE="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)"


def test_info_report_names_the_hot_path():
    data = {"pycudagraph": "0", "python": "3", "numpy": "2", "cuda_bindings": "13",
            "runtime": "13.0", "runtime_int": 13000, "driver": "13.0", "driver_int": 13000,
            "nvrtc": "13.0", "devices": [], "device_error": "none", "features": [],
            "hot_path": "ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)"}
    data["features"] = info._features(13000)
    assert "Hot path        ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)" in info.report(data)


def test_layout_kinds():
    from pycudagraph.compile.args import Layout
    from pycudagraph.compile.signature import parse_params
    if fast.native is None:
        pytest.skip(fast.native_status())
    assert Layout("k", parse_params("float* y, double a, bool b, short s")).native.simple
    for sig in ("half h", "__nv_bfloat16 b", "float4 v"):
        assert not Layout("k", parse_params(sig)).native.simple, sig
    with pytest.raises(ValueError, match="outside the buffer"):
        fast.native.Layout(bytes([fast.native.K_I32]), (72,), 84, (None,))


@needs_native
def test_nothing_runs_before_the_thread_is_marked_or_while_tracing():
    run_fake('''
        assert N.launch_kernel(NL, 0x77, 1, 1, ARGS, 0, 0) == -1 and not CALLS  # not marked
        N.mark_thread()
        check.tracer = lambda *a: None
        assert N.graph_launch(5, 6) == -1 and not CALLS  # a trace records: Python path
        check.tracer = None
        assert N.graph_launch(5, 6) == 0 and CALLS == [("launch", (5, 6))]
        import threading
        seen = []
        t = threading.Thread(target=lambda: seen.append(N.graph_launch(5, 6)))
        t.start(); t.join()
        assert seen == [-1]  # per thread: a new thread goes through the Python path first
    ''')


@needs_native
def test_eager_launch_packs_as_the_python_path():
    run_fake('''
        N.mark_thread()
        assert N.launch_kernel(NL, 0x77, (4, 2), 256, ARGS, 0x55, 64) == 0
        name, (f, grid, block, shm, s, values, extra) = CALLS[-1]
        assert (f, grid, block, shm, s, extra) == (0x77, (4, 2, 1), (256, 1, 1), 64, 0x55, None)
        py = ArgPack(LAYOUT, None, ARGS, (4, 2), 256, 64)
        assert values == py.values() == (0x1000, 2.5, 7, True, 1.25, 200, -5, 4000000000)
        import numpy as np
        class Dev:  # a device array: its pointer comes from the slot's converter
            __cuda_array_interface__ = {"data": (0x2000, False), "shape": (1,), "typestr": "<f4",
                                        "version": 3}
        args = (Dev(), np.float32(0.5), np.int32(3), 1, 2, np.uint8(1), True, 0)
        assert N.launch_kernel(NL, 0x77, (1, 1, 1), (32,), list(args), 0, 0) == 0
        assert CALLS[-1][1][5] == ArgPack(LAYOUT, None, args, 1, 1).values()
        RC["launch_kernel"] = 701
        assert N.launch_kernel(NL, 0x77, 1, 1, ARGS, 0, 0) == 701  # the driver's code
    ''')


@needs_native
def test_values_it_does_not_convert_are_handed_back_untouched():
    run_fake('''
        N.mark_thread()
        bad = [
            ((0x1000, 2.5, 7.5) + ARGS[3:], "a float for an int"),
            ((0x1000, 2.5, 2**31) + ARGS[3:], "an int out of range"),
            ((-1,) + ARGS[1:], "a negative pointer"),
            (("x",) + ARGS[1:], "a str for a pointer"),
            ((0x1000, "2.5") + ARGS[2:], "a str for a float"),
            ((0x1000, 1e300) + ARGS[2:], "a float too large for float32"),
            (ARGS[:3] + (2,) + ARGS[4:], "2 for a bool"),
            (ARGS[:5] + (256,) + ARGS[6:], "256 for an unsigned char"),
            (ARGS[:-1], "one argument short"),
        ]
        for args, what in bad:
            assert N.launch_kernel(NL, 0x77, 1, 1, args, 0, 0) == -1, what
        for grid in (0, [1], (1, 2, 3, 4), 2**32, (1, 0), 1.0):
            assert N.launch_kernel(NL, 0x77, grid, 1, ARGS, 0, 0) == -1, grid
        assert N.launch_kernel(NL, 0x77, 1, 1, ARGS, 0, -1) == -1  # shared memory
        assert N.launch_kernel(NL, 0, 1, 1, ARGS, 0, 0) == -1      # no function yet
        assert N.launch_kernel(object(), 0x77, 1, 1, ARGS, 0, 0) == -1
        half = Layout("k", parse_params("half h")).native
        assert N.launch_kernel(half, 0x77, 1, 1, (1.0,), 0, 0) == -1  # packed in Python
        assert not CALLS
    ''')


@needs_native
def test_kernel_node_add_makes_an_argpack_and_checks_graph_membership():
    run_fake('''
        N.mark_thread()
        N.set_pack_type(ArgPack)
        class G:
            _h = 0x6000
        from pycudagraph.nodes.base import REMOVED
        class Node:
            def __init__(self, graph, h, raw=None):
                self.graph, self._h, self._raw = graph, h, raw
        g, other = G(), G()
        r = N.add_kernel(NL, LAYOUT, "kern", 0x77, 2, 128, ARGS, 0, g, (Node(g, 0x11), Node(g, 0x12)))
        h, pack = r
        name, (graph, deps, params) = CALLS[-1]
        assert (graph, deps, params, h) == (0x6000, [0x11, 0x12], pack.address, 0xABC0)
        assert type(pack) is ArgPack and pack.refs == list(ARGS) and pack.kernel == "kern"
        py = ArgPack(LAYOUT, "kern", ARGS, 2, 128, func=0x77)
        assert pack.values() == py.values() and pack.dims == py.dims
        assert struct.unpack_from("<Q", pack.buf, 40)[0] == pack.address + 72
        assert pack.copy().values() == py.values()
        h2, _ = N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, list(ARGS), 0, g, [Node(g, 0x13)])
        assert CALLS[-1][1][1] == [0x13]  # lists of arguments and dependencies as well
        n = len(CALLS)
        assert N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, ARGS, 0, g, (Node(other, 1),)) == -1
        assert N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, ARGS, 0, g, Node(g, 1)) == -1
        assert N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, ARGS, 0, g, (object(),)) == -1
        assert N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, ARGS, 0, g, (Node(g, 1, REMOVED),)) == -1
        assert N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, ARGS, 0, g, (Node(g, 5), Node(g, 5))) == -1
        assert len(CALLS) == n
        RC["add"] = 1
        assert N.add_kernel(NL, LAYOUT, "k", 0x77, 1, 1, ARGS, 0, g, ()) == 1
    ''')


@needs_native
def test_exec_set_arg_rewrites_one_slot_and_returns_what_to_retire():
    run_fake('''
        N.mark_thread()
        pack = ArgPack(LAYOUT, None, ARGS, 1, 1)
        assert N.exec_set_arg(0xE, 0xF, pack, 1, 9.5) == 0
        name, (e, node, values) = CALLS[-1]
        assert (e, node) == (0xE, 0xF) and values[1] == 9.5 and pack.refs[1] == 9.5
        class Buf:
            ptr = 0x3000
        buf = Buf()
        import pycudagraph.runtime.memory as mem
        conv = lambda v: v.ptr if isinstance(v, Buf) else mem.device_pointer(v)
        layout2 = Layout("k", parse_params(SIG))
        layout2.native = N.Layout(bytes([N.K_PTR] + [N.K_OTHER] * 7), layout2.offsets,
                                  layout2.size, (conv,) + (None,) * 7)
        pack2 = ArgPack(layout2, None, ARGS, 1, 1)
        assert N.exec_set_arg(0xE, 0xF, pack2, 0, buf) == 0  # old value 0x1000 is plain
        assert CALLS[-1][1][2][0] == 0x3000
        assert N.exec_set_arg(0xE, 0xF, pack2, 0, 0x4000) == (buf,)  # the caller retires buf
        before = pack.raw()
        for i, v in ((2, 1.5), (8, 1), (-1, 1), ("a", 1.0), (1, "x")):
            assert N.exec_set_arg(0xE, 0xF, pack, i, v) == -1
        assert pack.raw() == before
        RC["exec_set"] = 400
        assert N.exec_set_arg(0xE, 0xF, pack, 1, 3.0) == 400
        assert pack.raw() == before and pack.refs[1] == 9.5  # the failed write is undone
    ''')


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


@needs_native
def test_compiled_add_keeps_the_checked_paths_guarantees():
    run_fake(INTEGRATED + textwrap.dedent('''
        g = fake_graph()
        a = fake_node(g)
        buf = buffer()
        node = g.add_kernel(k, 1, 32, (buf, 1.0, 4), deps=[a])
        assert CALLS[-1][0] == "add" and CALLS[-1][1][1] == [a._h]  # the compiled add
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
        g._closed = True
        refused(lambda: g.add_kernel(k, 1, 32, (buf, 1.0, 4)), pcg.ClosedError, "closed")
        g._closed = False
        with pcg.trace() as t:
            g.add_kernel(k, 1, 32, (buf, 1.0, 4))
        assert [r.api for r in t.records] == ["cuGraphAddKernelNode"]
    '''))


def test_fits_is_false_for_limits_never_loaded():
    from tests.support.fakes import fake_kernel
    from pycudagraph.compile import limits as validate
    k = fake_kernel()
    assert k._fits(1, 32, 0) and not k._fits(1, 2048, 0) and not k._fits((1,), 32, 0)
    del validate.KERNEL_LIMITS[k._func_int]
    assert not k._fits(1, 32, 0)  # unknown limits: the checked path loads them


@needs_native
def test_compiled_set_arg_retires_and_refuses_as_the_checked_path():
    run_fake(INTEGRATED + textwrap.dedent('''
        from pycudagraph._lifetime import Ledger
        g = fake_graph()
        one, two, three = buffer(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (one, 1.0, 4))
        exe = fake_exec(g)
        exe._src = {node._h: node._pack}
        exe._ledger = Ledger({"graph": g.keepalive()}, owner=exe)
        exe._last_stream = _NEVER
        exe._fin, exe._addr = (lambda: None), exe._h
        g._execs.add(exe)
        exe.set_arg(node, 0, two)
        assert CALLS[-1][0] == "exec_set" and CALLS[-1][1][2][0] == two.ptr
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
    '''))


@needs_native
def test_compiled_eager_launch_refuses_freed_buffers_and_feeds_captures():
    run_fake(INTEGRATED + textwrap.dedent('''
        buf = buffer()
        k.launch(1, 32, (buf, 1.0, 4))
        assert CALLS[-1][0] == "launch_kernel" and CALLS[-1][1][5][0] == buf.ptr
        kept = []
        _lifetime.capture_keeps.append(kept)
        k.launch(1, 32, [buf, 2.0, 4])
        # under capture a configuration is checked before the driver sees it
        refused(lambda: k.launch(1, 2048, (buf, 1.0, 4)), pcg.ArgumentError, "threads per block")
        _lifetime.capture_keeps.remove(kept)
        assert any(buf in x for x in kept if isinstance(x, tuple)), kept
        gone = buffer()
        gone.free()
        refused(lambda: k.launch(1, 32, (gone, 1.0, 4)), pcg.ClosedError, "was freed")
        s = pcg.Stream.__new__(pcg.Stream)
        s._h, s._dev, s._addr = None, 0, 0x5000
        refused(lambda: k.launch(1, 32, (buf, 1.0, 4), stream=s), pcg.ClosedError, "")
    '''))


@needs_native
def test_compiled_set_arg_hands_back_while_several_devices_are_in_use():
    """With two devices seen the compiled set_arg does not run: the checked path judges the
    buffer's device against the node's (a node of device 0 here)."""
    run_fake(INTEGRATED + textwrap.dedent('''
        from pycudagraph._cuda.context import seen
        from pycudagraph._lifetime import Ledger
        g = fake_graph()
        node = g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
        exe = fake_exec(g)
        exe._src = {node._h: node._pack}
        exe._ledger = Ledger(owner=exe)
        exe._last_stream, exe._fin, exe._addr = _NEVER, (lambda: None), exe._h
        seen.multi = True
        other = buffer()
        other._dev = 1
        refused(lambda: exe.set_arg(node, 0, other), pcg.DeviceMismatchError,
                "runs on device 0 but argument 0 'y' (a DeviceBuffer) is memory of device 1")
        mine = buffer()
        with pcg.trace() as t:  # the checked path's call (the compiled one is not traced)
            exe.set_arg(node, 0, mine)
        assert [r.api for r in t.records] == ["cuGraphExecKernelNodeSetParams"]
        assert CALLS[-1][0] == "exec_set" and CALLS[-1][1][2][0] == mine.ptr
    '''))
