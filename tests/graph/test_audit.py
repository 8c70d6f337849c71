"""``g.audit()`` and ``g.memory()`` (pycudagraph/inspect/audit.py, frameworks/owners.py).

CPU: slot reading, and the judgement of each address against fake pointer attributes
and fake owners (kept, pool, live, PyTorch's free and used blocks, none); memory released
to the driver since the capture (or an earlier audit) saw its allocation; the one walk over
each node's sites, and the capture's end hook that notes the allocations. GPU (child
processes): a freed CuPy input and a freed PyTorch input are named (node and argument)
before any launch; a kept input is not; an input whose memory went back to the driver
(CuPy's ``free_all_blocks``, PyTorch's ``empty_cache``) is named "released to the driver",
and ``g.memory()`` still counts the graph's pool.
"""

import struct

import pytest

import pycudagraph as pcg
from pycudagraph.capture import hooks
from pycudagraph.frameworks.pools import CapturePool
from pycudagraph.inspect import audit as audit_mod
from pycudagraph.inspect import ranges
from pycudagraph.inspect.audit import Baked, Finding, PointerInfo
from pycudagraph.nodes.arg_slots import pointer_slots
from pycudagraph.nodes.facets import Site
from tests.support.fake_frameworks import install_torch, without_frameworks
from tests.support.fakes import fake_buffer, fake_graph, fake_node, node_order
from tests.support.watchdog import run_ok

Q = struct.Struct("<Q")


def test_only_aligned_slots_are_read():
    data = Q.pack(11) + Q.pack(22) + b"\0" * 4
    assert list(pointer_slots(data, 0)) == [(0, 11), (8, 22)]
    assert list(pointer_slots(b"\0" * 4 + Q.pack(33), 4)) == [(4, 33)]  # 8-aligned in the buffer
    assert list(pointer_slots(Q.pack(1), 4)) == []  # an 8-byte value at 4: no pointer there


DEV = 0x7F00_0000_0000


@pytest.fixture
def world(monkeypatch):
    """A graph whose nodes hold the addresses a test lists, with made-up pointer facts."""
    without_frameworks(monkeypatch)
    g = fake_graph()
    node = fake_node(g)
    facts = {}
    state = {"baked": []}
    monkeypatch.setattr(audit_mod, "baked_addresses", lambda graph, problems=None: state["baked"])
    monkeypatch.setattr(audit_mod, "ensure_device", lambda: 0)
    monkeypatch.setattr(audit_mod, "pointer_info",
                        lambda a: facts.get(a, PointerInfo("unregistered", -1, 0, 0)))

    def judge(*baked, **named):
        state["baked"] = list(baked)
        return audit_mod.audit(g)

    return g, node, facts, judge


def on_device(facts, start, size, device=0):
    for a in range(start, start + size, 8):
        facts[a] = PointerInfo("device", device, start, size)


def test_kept_pool_and_graph_memory_are_fine(world):
    g, node, facts, judge = world
    kept = fake_buffer(256)
    g.table.ledger.keep_also(kept)
    pool = CapturePool()
    pool._state.cupy_ranges.add((DEV, 4096))
    g.table.ledger.keep_also(pool)
    on_device(facts, kept.ptr, 256)
    on_device(facts, DEV, 4096)
    assert judge(Baked(node, "arg 0", kept.ptr + 8, 0), Baked(node, "arg 1", DEV + 64, 1)) == []


def test_a_live_object_the_graph_does_not_keep(world):
    g, node, facts, judge = world
    loose = fake_buffer(512)
    on_device(facts, loose.ptr, 512)
    found, = judge(Baked(node, "arg 2", loose.ptr, 2))
    assert found.problem == "not kept alive" and found.place == "arg 2"
    assert "DeviceBuffer of 512 bytes" in found.detail and "cap.keep" in found.detail
    assert str(found).startswith("not kept alive: ")


def test_no_owner_is_freed(world):
    g, node, facts, judge = world
    on_device(facts, DEV, 1 << 20)
    found, = judge(Baked(node, "arg 0 +8", DEV + 8, 0, 8))
    assert found.problem == "freed" and "no live tensor" in found.detail


def test_numbers_in_kernel_slots_are_skipped(world):
    g, node, facts, judge = world
    assert judge(Baked(node, "arg 3", 0x12345678, 3)) == []


def test_copies_of_pageable_and_vanished_memory(world):
    g, node, facts, judge = world
    found = judge(Baked(node, "src", 0x5555_0000, side="host"),
                  Baked(node, "dst", DEV, side="device"))
    assert [(f.place, f.problem) for f in found] == [("src", "pageable host"), ("dst", "freed")]


def test_other_device(world):
    g, node, facts, judge = world
    on_device(facts, DEV, 4096, device=1)
    found, = judge(Baked(node, "arg 0", DEV, 0))
    assert found.problem == "other device" and "device 1" in found.detail


def test_pinned_host_memory_is_fine(world):
    g, node, facts, judge = world
    facts[0x6000] = PointerInfo("host", 0, 0x6000, 4096)
    assert judge(Baked(node, "src", 0x6000, side="host")) == []


def test_torch_blocks_free_and_in_use(world, monkeypatch):
    g, node, facts, judge = world
    torch = install_torch(monkeypatch)
    torch.allocator.segments[:] = [{
        "address": DEV, "total_size": 4096, "segment_pool_id": (0, 0),
        "blocks": [{"size": 1024, "state": "active_allocated"},
                   {"size": 3072, "state": "inactive"}]}]
    on_device(facts, DEV, 4096)
    found = judge(Baked(node, "arg 0", DEV + 16, 0), Baked(node, "arg 1", DEV + 2048, 1))
    assert [(f.place, f.problem) for f in found] == [("arg 1", "freed")]
    assert "free block of PyTorch" in found[0].detail


def test_memory_counts_distinct_allocations(world, monkeypatch):
    g, node, facts, judge = world
    on_device(facts, DEV, 4096)
    on_device(facts, DEV + 8192, 8192)
    facts[0x9000] = PointerInfo("host", 0, 0x9000, 100)
    monkeypatch.setattr(audit_mod, "baked_addresses", lambda graph, problems=None: [
        Baked(node, "arg 0", DEV, 0), Baked(node, "arg 1", DEV + 8, 1),
        Baked(node, "arg 2", DEV + 8192, 2), Baked(node, "src", 0x9000, side="host"),
        Baked(node, "arg 3", 77, 3)])
    pool = CapturePool()
    pool._state.cupy_pool = type("P", (), {"total_bytes": lambda self: 1 << 20})()
    g.table.ledger.keep_also(pool)
    mem = audit_mod.memory(g)
    assert mem == {"pinned_bytes": 4096 + 8192, "allocations": 2,
                   "graph_pool_bytes": 1 << 20, "graph_pool": {"torch": 0, "cupy": 1 << 20}}


def test_memory_released_to_the_driver_since_the_capture(world):
    g, node, facts, judge = world
    ranges.remember(g, DEV + 8, PointerInfo("device", 0, DEV, 1 << 20))  # seen at capture
    ranges.remember(g, DEV + 16, PointerInfo("host", 0, DEV, 4096))  # pinned host: not kept
    found = judge(Baked(node, "arg 0", DEV + 8, 0), Baked(node, "dst", DEV + 8),
                  Baked(node, "arg 1", DEV + 16, 1), Baked(node, "arg 2", 0x1234_5678, 2))
    assert [(f.place, f.problem) for f in found] == [("arg 0", "freed"), ("dst", "freed")]
    assert "released to the driver" in found[0].detail
    assert f"{1 << 20}-byte device allocation at 0x{DEV:x}" in found[0].detail


def test_an_audit_remembers_the_allocations_it_saw(world):
    g, node, facts, judge = world
    kept = fake_buffer(256)
    g.table.ledger.keep_also(kept)
    on_device(facts, kept.ptr, 256)
    assert judge(Baked(node, "arg 0", kept.ptr, 0)) == []
    assert ranges.seen_ranges(g) == {kept.ptr: (kept.ptr, 256)}
    facts.clear()  # its memory went back to the driver since
    found, = judge(Baked(node, "arg 0", kept.ptr, 0))
    assert found.problem == "freed" and "released to the driver" in found.detail
    assert ranges.seen_ranges(fake_graph()) == {}  # each graph its own


def test_unmapped_graph_memory_is_not_taken_for_released(world, monkeypatch):
    g, node, facts, judge = world
    ranges.remember(g, DEV + 8, PointerInfo("device", 0, DEV, 4096))
    assert judge(Baked(node, "alloc", DEV, size=4096, role="alloc"),
                 Baked(node, "arg 0", DEV + 8, 0)) == []


def _sites_of(monkeypatch, table: dict) -> None:
    """Each EmptyNode's sites() answers ``table[node]`` (raised when an exception)."""
    def sites(node):
        out = table[node]
        if isinstance(out, Exception):
            raise out
        return out
    monkeypatch.setattr(pcg.EmptyNode, "sites", sites)


def test_the_walk_lists_every_site_and_names_unreadable_nodes(monkeypatch):
    g = fake_graph()
    a, b, c = fake_node(g), fake_node(g), fake_node(g)
    node_order(monkeypatch, g)
    _sites_of(monkeypatch, {a: [Site("src", 0, 0x6000, 64, side="host")],
                            b: pcg.PyCudaGraphError("arguments in 'extra'"),
                            c: [Site("alloc", 0, DEV, 4096, role="alloc")]})
    problems = []
    baked = audit_mod.baked_addresses(g, problems)
    assert baked == [Baked(a, "src", 0x6000, side="host", size=64),
                     Baked(c, "alloc", DEV, size=4096, role="alloc")]
    (p,) = problems
    assert (p.node, p.place, p.problem) == (b, "sites", "not audited") and "extra" in p.detail


def test_the_capture_end_hook_notes_each_allocation(monkeypatch):
    g = fake_graph()
    a, b = fake_node(g), fake_node(g)
    node_order(monkeypatch, g)
    _sites_of(monkeypatch, {a: [Site("arg 0", 0, DEV + 64, arg=0), Site("src", 0, 0x6000)],
                            b: pcg.PyCudaGraphError("unreadable")})
    facts = {DEV + 64: PointerInfo("device", 0, DEV, 8192),
             0x6000: PointerInfo("host", 0, 0x6000, 4096)}
    monkeypatch.setattr(ranges, "pointer_info", lambda address: facts[address])
    counted = []  # cudaGraphGetNodes asked for the count only: the graph has 2 nodes
    monkeypatch.setattr(ranges, "call", lambda fn, h, n: counted.append((fn, n)) or (None, 2))
    assert ranges.note_capture in hooks._end_hooks  # registered by importing pycudagraph
    assert ranges.note_captures(False) is True
    try:
        hooks.run_end_hooks(g)
        assert ranges.seen_ranges(g) == {}
    finally:
        assert ranges.note_captures(True) is False
    hooks.run_end_hooks(g)
    assert ranges.seen_ranges(g) == {DEV + 64: (DEV, 8192)}
    assert counted and counted[-1][1] == 0
    with pytest.raises(pcg.ArgumentError, match="on must be True or False"):
        ranges.note_captures(1)
    with pytest.raises(pcg.ArgumentError, match="max_nodes must be None or an int"):
        ranges.note_captures(True, max_nodes=-1)


def test_a_graph_over_the_node_limit_is_not_noted(monkeypatch):
    """Noting costs a read per node: a capture of more than MAX_NODES nodes skips it."""
    g = fake_graph()
    a = fake_node(g)
    node_order(monkeypatch, g)
    _sites_of(monkeypatch, {a: [Site("arg 0", 0, DEV + 64, arg=0)]})
    monkeypatch.setattr(ranges, "pointer_info", lambda address: PointerInfo("device", 0, DEV, 8192))
    monkeypatch.setattr(ranges, "call", lambda fn, h, n: (None, ranges.MAX_NODES + 1))
    hooks.run_end_hooks(g)
    assert ranges.seen_ranges(g) == {}
    ranges.note_captures(True, max_nodes=None)
    try:
        hooks.run_end_hooks(g)
        assert ranges.seen_ranges(g) == {DEV + 64: (DEV, 8192)}
    finally:
        ranges.note_captures(True)


def test_an_end_hook_that_raises_is_passed_over(monkeypatch):
    seen = []
    monkeypatch.setattr(hooks, "_end_hooks", [lambda g: 1 / 0, seen.append])
    hooks.run_end_hooks("graph")
    assert seen == ["graph"]
    with pytest.raises(pcg.ArgumentError, match="hook must be callable"):
        hooks.register_end_hook(3)


def test_finding_text():
    f = Finding("node", "arg 2", 0xABC, "freed", "why")
    assert str(f) == "freed: 'node' arg 2 = 0xabc (why)"


# --- GPU ------------------------------------------------------------------------------

CUPY_FREED = """
import gc, sys
try:
    import cupy as cp
except ImportError:
    print("SKIP no cupy"); sys.exit(0)
import pycudagraph as pcg
s = pcg.Stream()
cs = cp.cuda.Stream.from_external(s)
with cs:  # made on the stream that reads them
    x = cp.arange(1 << 20, dtype=cp.float32)
    kept = cp.ones(1 << 20, dtype=cp.float32)
    x * 2 + kept
s.synchronize()
with pcg.capture(s, mode="thread_local") as cap:
    with cs:
        y = x * 2 + kept
    cap.keep(kept)
addr = x.data.ptr
found = cap.graph.audit()
print([str(f) for f in found])
mine = [f for f in found if f.address == addr]
assert mine and mine[0].problem == "not kept alive", found
assert not [f for f in found if f.address == kept.data.ptr]
del x
gc.collect()
found = cap.graph.audit()
mine = [f for f in found if f.address == addr]
assert mine and mine[0].problem == "freed", found
assert mine[0].node.type == "kernel" and mine[0].place.startswith("arg "), mine[0]
print(mine[0])
print("OK")
"""

TORCH_FREED = """
import gc, sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
side = torch.cuda.Stream()
t = torch.randn(1 << 20, device="cuda")
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    t * 3
    with pcg.capture(pcg.Stream.wrap(side), mode="thread_local") as cap:
        u = t * 3
side.synchronize()
addr = t.data_ptr()
found = cap.graph.audit()
mine = [f for f in found if f.address == addr]
assert mine and mine[0].problem == "not kept alive" and "torch.Tensor" in mine[0].detail, found
del t
gc.collect()
found = cap.graph.audit()
mine = [f for f in found if f.address == addr]
assert mine and mine[0].problem == "freed", found
assert "PyTorch" in mine[0].detail and mine[0].place.startswith("arg "), mine[0]
assert mine[0].node.type == "kernel"
print(mine[0])
assert not [f for f in found if f.address == u.data_ptr()]  # in the graph's pool
print("OK")
"""



CUPY_RELEASED = """
import gc, sys
try:
    import cupy as cp
except ImportError:
    print("SKIP no cupy"); sys.exit(0)
import pycudagraph as pcg
from pycudagraph.inspect.ranges import pointer_info
s = pcg.Stream()
cs = cp.cuda.Stream.from_external(s)
with cs:  # made on the stream that reads it; 64 MiB: a cudaMalloc of its own
    x = cp.arange(1 << 24, dtype=cp.float32)
    x * 2
s.synchronize()
with pcg.capture(s, mode="thread_local") as cap:
    with cs:
        y = x * 2
s.synchronize()
addr = x.data.ptr
assert cap.pool is not None and cap.pool.cupy_pool is not None
before = cap.graph.memory()
assert before["graph_pool"]["cupy"] > 0, before
del x
gc.collect()
cp.get_default_memory_pool().free_all_blocks()
assert pointer_info(addr).memory == "unregistered", pointer_info(addr)
found = cap.graph.audit()
print([str(f) for f in found])
mine = [f for f in found if f.address == addr]
assert mine and mine[0].problem == "freed", found
assert "released to the driver" in mine[0].detail, mine[0]
assert mine[0].node.type == "kernel" and mine[0].place.startswith("arg "), mine[0]
assert not [f for f in found if f.address == y.data.ptr]  # in the graph's pool
after = cap.graph.memory()
print("memory", before, after)
assert after["graph_pool"] == before["graph_pool"], (before, after)
assert before["pinned_bytes"] - after["pinned_bytes"] >= 1 << 26, (before, after)
print("OK")
"""

TORCH_RELEASED = """
import gc, sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
from pycudagraph.inspect.ranges import pointer_info
side = torch.cuda.Stream()
t = torch.randn(1 << 24, device="cuda")  # 64 MiB: a segment of its own
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    t * 3
    with pcg.capture(pcg.Stream.wrap(side), mode="thread_local") as cap:
        u = t * 3
side.synchronize()
addr = t.data_ptr()
before = cap.graph.memory()
assert before["graph_pool"]["torch"] > 0, before
del t
gc.collect()
torch.cuda.synchronize()
torch.cuda.empty_cache()
assert pointer_info(addr).memory == "unregistered", pointer_info(addr)
found = cap.graph.audit()
print([str(f) for f in found])
mine = [f for f in found if f.address == addr]
assert mine and mine[0].problem == "freed", found
assert "released to the driver" in mine[0].detail, mine[0]
assert mine[0].node.type == "kernel" and mine[0].place.startswith("arg "), mine[0]
assert not [f for f in found if f.address == u.data_ptr()]  # in the graph's pool
after = cap.graph.memory()
print("memory", before, after)
assert after["graph_pool"] == before["graph_pool"], (before, after)
print("OK")
"""



@pytest.mark.gpu
def test_audit_names_a_freed_cupy_input():
    print(run_ok(CUPY_FREED))


@pytest.mark.gpu
def test_audit_names_a_freed_torch_input():
    print(run_ok(TORCH_FREED))


@pytest.mark.gpu
def test_audit_names_cupy_memory_released_to_the_driver():
    print(run_ok(CUPY_RELEASED))


@pytest.mark.gpu
def test_audit_names_torch_memory_released_to_the_driver():
    print(run_ok(TORCH_RELEASED))
