"""The rebind plan of a graphed callable (pycudagraph/frameworks/rebind_plan.py), on the CPU:
which argument slots hold an input's addresses (exact and interior, in by-value structs,
only at 8-byte aligned positions, never one past the end), and what a call writes."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.errors import PyCudaGraphError
from pycudagraph.frameworks import rebind_plan
from pycudagraph.frameworks.arrays import ArrayInfo
from pycudagraph.nodes import MemcpyParams
from pycudagraph.nodes.captured_args import CapturedArgs
from pycudagraph.nodes.exec_node import ExecNode
from tests.support.fakes import fake_graph, fake_read_node
from tests.support.fakes import KernelArgs

X, Y = 0x7F00_0000_0000, 0x7F00_1000_0000
Q = struct.Struct("<Q")


def info(ptr, nbytes, lo=None):
    lo = ptr if lo is None else lo
    return ArrayInfo(None, ptr, lo, lo + nbytes, ("k",), "torch", 0)


@pytest.fixture
def world(monkeypatch):
    """One captured kernel node with four arguments, an exec and a recording fast path."""
    g = fake_graph()
    node = fake_read_node(g, pcg.CapturedKernelNode)
    struct_arg = Q.pack(X) + Q.pack(1024) + Q.pack(Y + 8) + Q.pack(X + 40)
    kargs = KernelArgs((0, Q.pack(X + 16)),          # arg 0: x + 16 (interior)
                       (8, struct.pack("<i", 7)),     # arg 1: an int
                       (16, struct_arg),              # arg 2: a struct holding x, n, y+8, x+40
                       (48, Q.pack(X + 64)),          # arg 3: one past x's end: not x
                       (56, b"\0" * 4 + Q.pack(X)))   # arg 4: x at an unaligned position
    monkeypatch.setattr(CapturedArgs, "of", classmethod(lambda cls, n: kargs.read()))
    monkeypatch.setattr(rebind_plan, "exec_walk", lambda graph: [(node, True)])
    calls = []

    class Fast:
        fail = False

        def exec_kernel_node_set_slots(self, *args):
            return False  # as on the ctypes route: the bytes are written in Python

        def exec_kernel_node_set_params(self, exe, node_h, pack, n):
            if Fast.fail:
                raise pcg.CudaError("cuGraphExecKernelNodeSetParams", 1, "CUDA_ERROR_X", "x")
            args = rec.args
            calls.append((int(exe), node_h, [args.get(i) for i in range(len(args.info))]))

    monkeypatch.setattr(rebind_plan, "fast", Fast())
    rec = ExecNode(node, rt.cudaGraphExec_t(0xE0), (), lambda old: None)
    rec.args = kargs.read()

    class Exe:
        handle = rt.cudaGraphExec_t(0xE0)

        def exec_node(self, n):
            assert n is node
            return rec

    return Exe(), g, node, rec, calls, Fast


def test_slots_found_once(world):
    exe, g, node, rec, calls, _ = world
    plan = rebind_plan.RebindPlan(exe, g, [info(X, 64), info(Y, 32)])
    assert plan.slots == [3, 1]  # x+16, x in the struct, x+40; y+8. Not x+64, not unaligned
    assert plan.unproven == []
    assert plan.sites([0]) == plan.sites([1]) == plan.sites([0, 1])  # one node, one site


def test_a_call_rewrites_only_the_slots(world):
    exe, g, node, rec, calls, _ = world
    plan = rebind_plan.RebindPlan(exe, g, [info(X, 64), info(Y, 32)])
    X2 = 0x7F00_2000_0008
    assert plan.apply([X2, Y], [0]) == 1
    (exe_h, node_h, args), = calls
    assert exe_h == 0xE0 and node_h == int(node)
    assert Q.unpack(args[0])[0] == X2 + 16
    assert args[1] == struct.pack("<i", 7)
    assert [Q.unpack_from(args[2], k)[0] for k in (0, 8, 16, 24)] == [X2, 1024, Y + 8, X2 + 40]
    assert Q.unpack(args[3])[0] == X + 64  # one past the end stays
    assert Q.unpack_from(args[4], 4)[0] == X  # unaligned stays
    assert plan.bound == [X2, Y]


def test_a_failed_call_changes_nothing(world):
    exe, g, node, rec, calls, fast = world
    plan = rebind_plan.RebindPlan(exe, g, [info(X, 64)])
    fast.fail = True
    with pytest.raises(pcg.CudaError):
        plan.apply([0x7F00_3000_0000], [0])
    assert Q.unpack(rec.args.get(0))[0] == X + 16
    assert Q.unpack_from(rec.args.get(2), 0)[0] == X
    assert plan.bound == [X]


def test_negative_strides_span_below_the_data_pointer(world):
    exe, g, node, rec, calls, _ = world
    # an array whose data pointer is x + 32, reaching down to x (a reversed view)
    plan = rebind_plan.RebindPlan(exe, g, [info(X + 32, 64, lo=X)])
    assert plan.slots == [3]
    plan.apply([0x7F00_4000_0020], [0])
    assert Q.unpack(calls[-1][2][0])[0] == 0x7F00_4000_0020 - 32 + 16


def test_child_graph_inputs_are_refused(world, monkeypatch):
    exe, g, node, rec, calls, _ = world
    monkeypatch.setattr(rebind_plan, "exec_walk", lambda graph: [(node, False)])
    with pytest.raises(PyCudaGraphError, match="child graph"):
        rebind_plan.RebindPlan(exe, g, [info(X, 64)])


def test_copy_sites_go_through_exec_set(world, monkeypatch):
    exe, g, _, _, _, _ = world
    copy = fake_read_node(g, pcg.MemcpyNode)
    upload = fake_read_node(g, pcg.MemcpyNode)
    params = {int(copy): MemcpyParams(Y, X + 8, 32, "device->device"),
              int(upload): MemcpyParams(Y + 64, 0x1000, 16, "host->device")}
    monkeypatch.setattr(pcg.MemcpyNode, "params", property(lambda n: params[int(n)]))
    set_calls = []
    monkeypatch.setattr(pcg.MemcpyNode, "exec_set",
                        lambda n, rec, **kw: set_calls.append((int(n), kw)))
    monkeypatch.setattr(rebind_plan, "exec_walk", lambda graph: [(copy, True), (upload, True)])
    recs = {}
    exe.exec_node = lambda n: recs.setdefault(int(n), ExecNode(n, exe.handle, (), None))
    plan = rebind_plan.RebindPlan(exe, g, [info(X, 64), info(Y, 32)])
    assert plan.slots == [1, 1]
    assert len(plan.unproven) == 1 and "table of addresses" in plan.unproven[0]
    plan.apply([0x5000, 0x6000], [0, 1])
    assert set_calls == [(int(copy), {"src": 0x5008}), (int(copy), {"dst": 0x6000})]


def test_a_node_holding_no_input_address_is_passed_by_a_search_of_its_bytes(world, monkeypatch):
    exe, g, node, rec, calls, _ = world
    looked = []
    monkeypatch.setattr(pcg.CapturedKernelNode, "addresses",
                        lambda self: looked.append(1) or [])
    far = 0x7F00_5000_0000  # no argument holds anything in this input's 64 KiB block
    plan = rebind_plan.RebindPlan(exe, g, [info(far, 64)])
    assert plan.slots == [0] and looked == []  # passed at the search: its values not read
    plan = rebind_plan.RebindPlan(exe, g, [info(X + 8, 8)])  # the block of x: values read
    assert looked == [1]


def _plan_slots(args, inputs, marks_on: bool):
    """The slots a plan finds in one captured kernel node of ``args`` ((offset, bytes) per
    argument) for ``inputs``, with the bytes search on or off."""
    g = fake_graph()
    node = fake_read_node(g, pcg.CapturedKernelNode)
    kargs = KernelArgs(*args)
    rec = ExecNode(node, rt.cudaGraphExec_t(0xE0), (), lambda old: None)
    rec.args = kargs.read()

    class Exe:
        handle = rt.cudaGraphExec_t(0xE0)

        def exec_node(self, n):
            return rec

    saved = (CapturedArgs.of, rebind_plan.exec_walk, rebind_plan.value_marks)
    CapturedArgs.of = classmethod(lambda cls, n: kargs.read())
    rebind_plan.exec_walk = lambda graph: [(node, True)]
    if not marks_on:
        rebind_plan.value_marks = lambda ranges: None
    try:
        plan = rebind_plan.RebindPlan(Exe(), g, inputs)
    finally:
        CapturedArgs.of, rebind_plan.exec_walk, rebind_plan.value_marks = saved
    return plan.slots, [[[(k, i, d) for _buf, k, i, d in s.slots] for s in plan.sites([n])]
                        for n in range(len(inputs))]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0, 8, 40, 64, 1 << 16, (1 << 16) + 8, 3 << 20]),
                min_size=1, max_size=12),
       st.lists(st.integers(0, 4), min_size=1, max_size=12),
       st.lists(st.tuples(st.sampled_from([X, X + (1 << 16) - 16, Y]),
                          st.integers(1, 1 << 17)), min_size=1, max_size=2))
def test_the_bytes_search_changes_no_plan(deltas, kinds, inputs):
    """The same slots and sites with the search as without it, for arguments holding values
    inside, at the edges of and outside the inputs, aligned or not, in structs or alone."""
    args, at = [], 0
    for j, delta in enumerate(deltas):
        kind = kinds[j % len(kinds)]
        base = inputs[j % len(inputs)][0]
        value = Q.pack(base + delta)
        data = {0: value, 1: struct.pack("<i", 7), 2: value + Q.pack(1024) + value,
                3: b"\0" * 4 + value, 4: Q.pack(delta)}[kind]
        at = (at + 7) // 8 * 8
        args.append((at, data))
        at += len(data)
    infos = [info(ptr, n) for ptr, n in inputs]
    assert _plan_slots(args, infos, True) == _plan_slots(args, infos, False)


def test_a_node_its_file_accounts_for_is_planned_from_the_file_alone(world, monkeypatch):
    from pycudagraph.files.slot_sites import FileSites
    from pycudagraph.nodes.facets import Site
    exe, g, node, rec, calls, _ = world
    monkeypatch.setattr(pcg.CapturedKernelNode, "sites",
                        lambda self: pytest.fail("a node its file accounts for is searched"))
    # the file relocates x+16 (arg 0) and y+8 (arg 2 +16); x in the struct and x+40 are
    # byte patterns the file did not put there: not taken for x's address
    known = FileSites({id(node)}, {id(node): [Site("arg 0", 0, X + 16, arg=0),
                                              Site("arg 2 +16", 16, Y + 8, arg=2)]})
    plan = rebind_plan.RebindPlan(exe, g, [info(X, 64), info(Y, 32)], known)
    assert plan.slots == [1, 1] and plan.unproven == []
    X2 = 0x7F00_2000_0000
    assert plan.apply([X2, Y + 64], [0, 1]) == 1
    args = calls[-1][2]
    assert Q.unpack(args[0])[0] == X2 + 16
    assert [Q.unpack_from(args[2], k)[0] for k in (0, 8, 16, 24)] == [X, 1024, Y + 72, X + 40]


def test_a_node_its_file_accounts_for_with_no_input_site_is_passed(world, monkeypatch):
    from pycudagraph.files.slot_sites import FileSites
    exe, g, node, rec, calls, _ = world
    monkeypatch.setattr(pcg.CapturedKernelNode, "sites",
                        lambda self: pytest.fail("a node its file accounts for is searched"))
    plan = rebind_plan.RebindPlan(exe, g, [info(X, 64)], FileSites({id(node)}, {}))
    assert plan.slots == [0] and plan.sites([0]) == []
