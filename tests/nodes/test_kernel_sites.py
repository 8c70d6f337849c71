"""CPU tests of the kernel node's site facets (pycudagraph/nodes/kernel_sites.py, arg_slots.py):
the one scanner of argument slots (8-byte aligned, inside structs, values from 1 << 16),
``sites()`` of a node built here and of one read back, ``exec_sites`` following the exec's
copy, and ``write_sites`` writing several slots of a node in one call through the exec's
record (a failed call changes nothing). Also the allocation node's ``"alloc"`` site. Fake
kernels, nodes and driver calls; no GPU."""

import ctypes
import struct

import pytest
from cuda.bindings import driver as dr
from hypothesis import given, settings, strategies as st

import pycudagraph as pcg
from pycudagraph._cuda import fast
from pycudagraph.nodes import arg_slots, captured_args
from pycudagraph.nodes.arg_slots import LOWEST, arg_addresses, arg_sites, patch_slot, patch_slots
from pycudagraph.nodes.arg_slots import pointer_slots
from pycudagraph.nodes.captured_args import CapturedArgs
from pycudagraph.nodes.facets import Site
from tests.support.fakes import fake_exec, fake_graph, fake_kernel, fake_kernel_node, fake_node
from tests.support.fakes import KernelArgs, fake_read_node

pytestmark = pytest.mark.usefixtures("cpu_device")

Q = struct.Struct("<Q")
X, Y, NEW = 0x7F00_0000_0000, 0x7F00_1000_0000, 0x7F00_2000_0000


# the one scanner -------------------------------------------------------------------------

def test_only_aligned_slots_from_the_lowest_address_are_sites():
    assert list(pointer_slots(b"\0" * 4 + Q.pack(33), 4)) == [(4, 33)]
    assert list(pointer_slots(Q.pack(1), 4)) == []  # 8 bytes at offset 4: no aligned slot
    spans = [(0, 0, Q.pack(X)), (1, 8, Q.pack(7)), (2, 16, Q.pack(1) + Q.pack(Y) + b"\0" * 4),
             (3, 40, struct.pack("<i", 1 << 20))]
    assert arg_sites(spans) == [Site("arg 0", 0, X, arg=0), Site("arg 2 +8", 8, Y, arg=2)]


def test_patching_slots():
    data = Q.pack(X) + Q.pack(5) + Q.pack(X)
    assert patch_slots(data, 0, X, Y) == (Q.pack(Y) + Q.pack(5) + Q.pack(Y), 2)
    assert patch_slot(data, 8, Y)[8:16] == Q.pack(Y)
    with pytest.raises(pcg.ArgumentError, match="no 8-byte slot at byte 20"):
        patch_slot(data, 20, Y)


# a node built here ---------------------------------------------------------------------

def test_built_sites_by_argument_index_leaving_out_doubles_and_small_values():
    k = fake_kernel("float* y, double a, long long n, int m, float* x")
    node = fake_kernel_node(fake_graph(), k, args=(X, 1.0, 1 << 20, 5, 0))
    assert node.sites() == [Site("arg 0", 0, X, arg=0), Site("arg 2", 0, 1 << 20, arg=2)]


def test_built_write_sites_goes_through_the_exec_copy(monkeypatch):
    g = fake_graph()
    node = fake_kernel_node(g, fake_kernel("float* y, float* x, int n"), args=(X, Y, 3))
    exe = fake_exec(g)
    rec = exe.exec_node(node)
    sent = []
    monkeypatch.setattr(fast, "exec_kernel_node_set_params",
                        lambda raw, h, pack, n: sent.append(pack.values()))
    s0, s1 = node.sites()
    node.write_sites(rec, [(s0, NEW), (s1, NEW + 8)])
    assert sent == [(NEW, NEW + 8, 3)]  # one call for the node
    assert [s.address for s in node.exec_sites(rec)] == [NEW, NEW + 8]
    assert [s.address for s in node.sites()] == [X, Y]  # the graph keeps its own
    with pytest.raises(pcg.ArgumentError, match="argument 2: no 8-byte slot at byte 0 of a 4-byte"):
        node.write_site(rec, Site("arg 2", 0, 3, arg=2), NEW)  # an int below 1 << 16
    assert len(sent) == 1


# a node read back from the driver ------------------------------------------------------

@pytest.fixture
def captured(monkeypatch):
    """A captured kernel node with a pointer, an int, a struct and an unaligned pointer;
    the exec's set-params calls recorded (``fail`` makes them refuse)."""
    g = fake_graph()
    node = fake_read_node(g, pcg.CapturedKernelNode)
    kargs = KernelArgs((0, Q.pack(X + 16)), (8, struct.pack("<i", 7)),
                       (16, Q.pack(X) + Q.pack(1024) + Q.pack(Y + 8)),
                       (40, b"\0" * 4 + Q.pack(X)))
    monkeypatch.setattr(CapturedArgs, "of", classmethod(lambda cls, n: kargs.read()))
    calls, state = [], {"fail": False}

    def exec_call(exec_raw, node_h, p):
        if state["fail"]:
            raise pcg.CudaError("cuGraphExecKernelNodeSetParams", 1, "CUDA_ERROR_X", "x")
        kp = (ctypes.c_void_p * 4).from_address(p.kernelParams)
        calls.append([ctypes.string_at(kp[i], n) for i, (_, n) in enumerate(kargs.info)])

    monkeypatch.setattr(captured_args, "_exec_call", exec_call)
    return g, node, calls, state


def test_captured_sites_read_every_aligned_slot(captured):
    g, node, _, _ = captured
    assert node.sites() == [Site("arg 0", 0, X + 16, arg=0), Site("arg 2 +0", 0, X, arg=2),
                            Site("arg 2 +16", 16, Y + 8, arg=2)]  # not 1024, not unaligned


def test_captured_write_sites_in_one_call_and_a_failed_one_changes_nothing(captured):
    g, node, calls, state = captured
    exe = fake_exec(g)
    rec = exe.exec_node(node)
    a0, a2, a2b = node.sites()
    state["fail"] = True
    with pytest.raises(pcg.CudaError):
        node.write_sites(rec, [(a0, NEW), (a2b, NEW + 8)])
    assert node.exec_sites(rec) == node.sites()  # nothing changed
    state["fail"] = False
    node.write_sites(rec, [(a0, NEW), (a2, NEW + 64), (a2b, NEW + 8)])
    (args,) = calls
    assert Q.unpack(args[0])[0] == NEW and args[1] == struct.pack("<i", 7)
    assert [Q.unpack_from(args[2], k)[0] for k in (0, 8, 16)] == [NEW + 64, 1024, NEW + 8]
    assert [s.address for s in node.exec_sites(rec)] == [NEW, NEW + 64, NEW + 8]


def test_captured_arguments_that_cannot_be_read_raise_from_sites(monkeypatch):
    node = fake_read_node(fake_graph(), pcg.CapturedKernelNode)
    p = dr.CUDA_KERNEL_NODE_PARAMS()  # kernelParams null: the arguments are in 'extra'
    monkeypatch.setattr(CapturedArgs, "of", classmethod(lambda cls, n: cls(p, [(0, 8)])))
    with pytest.raises(pcg.PyCudaGraphError, match="extra"):
        node.sites()


# the allocation node -------------------------------------------------------------------

def test_an_allocation_site_is_the_memory_it_hands_out(monkeypatch):
    node = fake_node(fake_graph(), pcg.MemAllocNode)
    monkeypatch.setattr(pcg.MemAllocNode, "params", property(lambda n: {"ptr": X, "nbytes": 4096}))
    assert node.sites() == [Site("alloc", 0, X, 4096, role="alloc")]
    with pytest.raises(pcg.ArgumentError, match="no address an exec can change"):
        node.write_site(None, node.sites()[0], Y)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 63), st.integers(0, 5))
def test_slot_scanner_reads_every_aligned_slot(data, offset, index):
    """The one-pass scanner reads the same slots as an 8-byte unpack at each aligned place,
    and arg_addresses gives exactly the addresses of arg_sites."""
    want = [(k, struct.unpack_from("<Q", data, k)[0])
            for k in range((-offset) % 8, len(data) - 7, 8)]
    assert list(pointer_slots(data, offset)) == want
    spans = [(index, offset, data), (index + 1, offset + 8, bytes(reversed(data)))]
    assert arg_addresses(spans) == [s.address for s in arg_sites(spans)]
    assert all(v >= LOWEST for v in arg_addresses(spans))


def test_a_node_built_from_a_function_reads_its_sites_from_the_bytes_it_was_built_with(
        monkeypatch):
    """``CapturedKernelNode.build_function`` (a graph file's library kernel): its sites come
    from the bytes it was built with, no read back; once ``set_params`` changes the node,
    they are read back (``cuGraphKernelNodeGetParams``)."""
    from pycudagraph.nodes import captured_kernel
    g = fake_graph()
    made = []
    checked = []
    monkeypatch.setattr(captured_kernel, "function_offsets", lambda func, sizes: checked.append(
        (func, list(sizes))) or [0, 8, 16])
    monkeypatch.setattr(captured_kernel.fast, "add_function_node",
                        lambda graph_h, deps, func, dims, args: made.append(
                            ("cuGraphAddKernelNode", func, dims)) or 0x4242)
    monkeypatch.setattr(captured_kernel, "call",
                        lambda fn, *a: made.append(fn.__name__) or 0x4242)
    reads = []

    def read_back(cls, node):
        reads.append(node)
        raise AssertionError("read back")

    monkeypatch.setattr(CapturedArgs, "of", classmethod(read_back))
    args = (Q.pack(X), struct.pack("<i", 3), Q.pack(5) + Q.pack(Y))
    node = pcg.CapturedKernelNode.build_function(g.table, (), 0x6000, 1, 32, 0, args)
    assert made == [("cuGraphAddKernelNode", 0x6000, (1, 1, 1, 32, 1, 1, 0))]
    assert checked == [(0x6000, [8, 4, 16])] and int(node) == 0x4242
    assert node.sites() == [Site("arg 0", 0, X, arg=0), Site("arg 2 +8", 8, Y, arg=2)]
    assert node.addresses() == [X, Y] and reads == []
    assert node.copy_for(g.table, 0x4343).sites() == node.sites()  # a clone's copy: the same
    # with a trace open: through cuda.bindings, whose record shows the struct's fields
    monkeypatch.setattr(captured_kernel, "function_params", lambda func, grid, block, smem, a: (
        dr.CUDA_KERNEL_NODE_PARAMS(), (), [0, 8, 16]))  # the offsets it checked the sizes with
    monkeypatch.setattr(captured_kernel.check, "tracer", lambda *a: None)
    traced = pcg.CapturedKernelNode.build_function(fake_graph().table, (), 0x6000, 1, 32, 0, args)
    monkeypatch.setattr(captured_kernel.check, "tracer", None)
    assert made[-1] == "cuGraphAddKernelNode" and len(checked) == 1
    assert traced.sites() == node.sites()

    class Read:  # what set_params reads and writes
        apply = staticmethod(lambda a, where: [])
        struct_with = staticmethod(lambda *a: None)
        spans = staticmethod(lambda: [(0, 0, Q.pack(NEW))])

    kargs = Read()
    monkeypatch.setattr(CapturedArgs, "of", classmethod(lambda cls, n: reads.append(n) or kargs))
    monkeypatch.setattr(captured_kernel.context, "ensure_device", lambda: None)
    node.set_params(args={0: NEW})
    assert made[-1] == "cuGraphKernelNodeSetParams"
    assert node.addresses() == [NEW] and reads.count(node) == 2  # read back now


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 15), st.binary(min_size=0, max_size=48)),
                min_size=0, max_size=6),
       st.lists(st.tuples(st.integers(1 << 16, 1 << 48), st.integers(0, 1 << 18)),
                min_size=1, max_size=3),
       st.lists(st.integers(0, 40), max_size=4))
def test_a_search_of_the_bytes_never_passes_a_value_inside_the_ranges(args, ranges, plant):
    """may_hold is False only when no slot value lies in the ranges; a value planted inside
    them, at an aligned or unaligned place, is always found."""
    ranges = [(lo, lo + n) for lo, n in ranges]
    spans, at, planted = [], 0, False
    for i, (pad, data) in enumerate(args):
        data = bytearray(data)
        if plant:  # one value inside a range, written at any place of the bytes
            where = plant[i % len(plant)]
            lo, hi = ranges[i % len(ranges)]
            if hi > lo and where + 8 <= len(data):
                data[where:where + 8] = (lo + (where * 7919) % (hi - lo)).to_bytes(8, "little")
                planted = True
        at += pad
        spans.append((i, at, bytes(data)))
        at += len(data)
    marks = arg_slots.value_marks(ranges, most=64)
    if marks is None:
        return
    inside = any(lo <= v < hi for v in arg_slots.arg_addresses(spans) for lo, hi in ranges)
    found = arg_slots.may_hold(spans, marks)
    assert found or not inside
    assert found or not planted
    # the same arguments kept as one block (a graph file's bytes) read and search the same
    block, cuts, start = b"".join(d for _, _, d in spans), [], 0
    for i, offset, data in spans:
        cuts.append((i, offset, start, start + len(data)))
        start += len(data)
    held = arg_slots.ArgSpans(b"pad" + block + b"tail", 3, tuple(cuts))
    assert arg_slots.may_hold(held, marks) == found and held.block() == block
    assert held == spans and list(held) == spans and len(held) == len(spans)
    assert arg_slots.arg_addresses(held) == arg_slots.arg_addresses(spans)


def test_ranges_over_too_many_blocks_have_no_marks():
    assert arg_slots.value_marks([(0, 1 << 20)], most=8) is None  # 16 blocks of 64 KiB
    assert len(arg_slots.value_marks([(0x7F00_0000_FFF8, 0x7F00_0001_0008)])) == 2
    assert arg_slots.value_marks([(5, 5)]) == ()  # an empty range: nothing can be inside
