"""The compiled hot path's entry points against a fake driver (CPU): nothing runs before the
thread is marked, it packs exactly as the Python path, hands back what it does not convert,
adds kernel nodes and rewrites one slot of an exec's kernel node.

The calls into "the driver" go to ctypes callbacks standing in for libcuda
(tests/support/native_driver.py), each test in a subprocess of its own.
"""

from tests.support.native_driver import needs_native, run_fake


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
