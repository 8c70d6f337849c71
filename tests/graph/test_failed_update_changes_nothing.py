"""A failed update changes nothing (CPU with fakes; one GPU test in a child process).

Every update path (``set_arg``, ``set_params`` of each node type, ``rebind``, ``update``)
checks everything before it writes, and when the raw call itself fails it puts back what it
wrote: the exec keeps launching its old arguments, and keeps alive what it kept. The raw
calls are replaced by recorders here (``fail`` makes them refuse), so no fake handle ever
reaches CUDA."""

import ctypes
import struct

import numpy as np
import pytest
from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import fast
from pycudagraph.compile.args import ArgPack, Layout
from pycudagraph.compile.signature import parse_params
from pycudagraph.nodes import captured_args, event_nodes, host_node, kernel_node, memory_nodes
from pycudagraph.nodes import structure
from pycudagraph.nodes.exec_node import ExecNode
from pycudagraph.runtime.hostfn import HostCall

from tests.support.fakes import fake_buffer, fake_exec, fake_graph, fake_kernel, fake_kernel_node
from tests.support.fakes import fake_node
from tests.support.watchdog import run_snippet

SIG = "float* y, float a, int n, __nv_bfloat16 h, float2 v, bool f"
GOOD = (0x1000, 2.5, 7, 1.5, (1.0, 2.0), True)
BAD = [(1, "2.5"), (2, 2**40), (2, 1.5), (3, None), (3, 1e39), (4, {1: 2, 3: 4}), (4, (1.0,)),
       (5, "no"), (0, -1), (0, True), (1, 1e39), (3, "1.5"), (4, {1.0, 2.0}), (5, 2)]


class Driver:
    """Stands for the raw calls: records them, or refuses with ``fail`` set."""

    def __init__(self):
        self.calls: list = []
        self.fail = False

    def error(self, api):
        return pcg.CudaError(api, 1, "cudaErrorInvalidValue", "invalid argument")

    def call(self, fn, *args):
        name = getattr(fn, "__name__", str(fn))
        self.calls.append((name, args))
        if self.fail:
            raise self.error(name)
        return None


@pytest.fixture
def driver(monkeypatch, cpu_device):
    d = Driver()

    def exec_set(exe, node_h, pack, node):
        d.calls.append(("cuGraphExecKernelNodeSetParams", pack.raw()))
        if d.fail:
            raise d.error("cuGraphExecKernelNodeSetParams")

    def ctypes_exec_set(exec_h, node_h, address):  # set_arg's ctypes route
        d.calls.append(("cuGraphExecKernelNodeSetParams", node_h))
        return 1 if d.fail else 0  # CUDA_ERROR_INVALID_VALUE

    monkeypatch.setattr(fast, "exec_kernel_node_set_params", exec_set)
    monkeypatch.setattr(kernel_node, "_set_arg", fast._set_arg)  # the Python route, recorded
    monkeypatch.setattr(fast._f, "exec_set", ctypes_exec_set)
    for mod in (memory_nodes, host_node, event_nodes, structure):
        monkeypatch.setattr(mod, "call", d.call)
    monkeypatch.setattr(captured_args, "_exec_call",
                        lambda exe, node_h, p: d.call(dr.cuGraphExecKernelNodeSetParams, node_h))
    return d


# ArgPack ------------------------------------------------------------------------------

def _pack():
    return ArgPack(Layout("k", parse_params(SIG)), None, GOOD, 4, 64, 128)


@pytest.mark.parametrize("i, value", BAD, ids=[f"{i}-{v!r}" for i, v in BAD])
def test_full_args_with_one_bad_value_change_nothing(i, value):
    pack = _pack()
    before, refs = pack.raw(), list(pack.refs)
    args = list(GOOD)
    args[i] = value
    with pytest.raises(pcg.ArgumentError, match=f"parameter {i} "):
        pack.apply(args)
    assert pack.raw() == before and pack.refs == refs


@pytest.mark.parametrize("i, value", BAD[:8], ids=[f"{i}-{v!r}" for i, v in BAD[:8]])
def test_dict_args_with_one_bad_value_change_nothing(i, value):
    pack = _pack()
    before = pack.raw()
    with pytest.raises(pcg.ArgumentError, match=f"parameter {i} "):
        pack.apply({2: 9, i: value, "a": 1.0} if i != 2 else {0: 0x2000, i: value})
    assert pack.raw() == before


@pytest.mark.parametrize("dims", [dict(grid=0), dict(block=(1, "2")), dict(shared_mem=-1),
                                  dict(grid=(1, 2, 3, 4)), dict(shared_mem=2**33)], ids=repr)
def test_bad_dimensions_after_good_args_change_nothing(dims):
    pack = _pack()
    before = pack.raw()
    with pytest.raises(pcg.ArgumentError):
        pack.apply([0x2000, 1.0, 1, 1.0, (0.0, 0.0), False], **dims)
    assert pack.raw() == before


# kernel nodes in an exec ------------------------------------------------------------

@pytest.fixture
def kexec(driver):
    g = fake_graph()
    node = fake_kernel_node(g, fake_kernel(SIG), args=GOOD)
    exe = fake_exec(g)
    return g, node, exe, exe.exec_node(node)


@pytest.mark.parametrize("i, value", BAD, ids=[f"{i}-{v!r}" for i, v in BAD])
def test_set_params_with_one_bad_value_makes_no_call(kexec, driver, i, value):
    g, node, exe, rec = kexec
    before, graph_before = rec.args.raw(), node.params
    args = list(GOOD)
    args[i] = value
    with pytest.raises(pcg.ArgumentError, match=f"parameter {i} "):
        exe.set_params(node, args=args)
    assert driver.calls == [] and rec.args.raw() == before and node.params == graph_before


@pytest.mark.parametrize("i, value", BAD[:8], ids=[f"{i}-{v!r}" for i, v in BAD[:8]])
def test_set_arg_with_a_bad_value_makes_no_call(kexec, driver, i, value):
    g, node, exe, rec = kexec
    before = rec.args.raw()
    with pytest.raises(pcg.ArgumentError, match=f"parameter {i} "):
        exe.set_arg(node, i, value)
    assert driver.calls == [] and rec.args.raw() == before


def test_a_refused_call_puts_the_exec_bytes_back(kexec, driver):
    g, node, exe, rec = kexec
    before, refs = rec.args.raw(), list(rec.args.refs)
    new = fake_buffer(64)
    driver.fail = True
    with pytest.raises(pcg.CudaError):
        exe.set_params(node, args=[new, 9.0, 9, 9.0, (9.0, 9.0), False], grid=8)
    with pytest.raises(pcg.CudaError):
        exe.set_arg(node, "y", new)
    assert rec.args.raw() == before and rec.args.refs == refs
    assert len(driver.calls) == 2 and driver.calls[0][1] != before  # tried, then put back
    driver.fail = False
    exe.set_params(node, args=[new, 9.0, 9, 9.0, (9.0, 9.0), False])
    assert rec.args.raw() != before and rec.args.refs[0] is new


# captured kernel nodes --------------------------------------------------------------

def _captured(values):
    """A CapturedArgs over ``values`` (bytes per argument) as the driver would hand them."""
    bufs = [ctypes.create_string_buffer(v, len(v)) for v in values]
    ptrs = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
    p = dr.CUDA_KERNEL_NODE_PARAMS()
    p.func, p.gridDimX, p.gridDimY, p.gridDimZ = 0x71, 2, 1, 1
    p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes = 32, 1, 1, 0
    p.kernelParams = ctypes.addressof(ptrs)
    offsets = np.cumsum([0] + [len(v) for v in values[:-1]])
    args = captured_args.CapturedArgs(p, [(int(o), len(v)) for o, v in zip(offsets, values)])
    return args, (bufs, ptrs)


@pytest.fixture
def cexec(driver):
    g = fake_graph()
    node = fake_node(g, pcg.CapturedKernelNode)
    args, keep = _captured([struct.pack("<Q", 0x4000), struct.pack("<i", 5), bytes(24)])
    retired = []
    rec = ExecNode(node, rt.cudaGraphExec_t(0x6000), (), retired.append)
    rec.args = args
    return rec, keep, retired


@pytest.mark.parametrize("changes", [
    dict(args={0: 0x5000, 1: "x"}), dict(args={1: 2**40}), dict(args={2: b"short"}),
    dict(args=[0x5000, 1]), dict(args={0: 0x5000}, grid=0), dict(args={0: 0x5000}, block="64"),
    dict(args={0: 0x5000}, shared_mem=-5), dict(args={5: 1}), dict(args={"n": 1}),
])
def test_captured_node_refuses_before_writing(cexec, driver, changes):
    rec, _, retired = cexec
    before = [rec.args.get(i) for i in range(3)]
    dims = rec.args.params.gridDimX, rec.args.params.blockDimX
    with pytest.raises(pcg.ArgumentError):
        rec.args.exec_set(rec, **changes)
    assert driver.calls == [] and [rec.args.get(i) for i in range(3)] == before
    assert (rec.args.params.gridDimX, rec.args.params.blockDimX) == dims and retired == []


def test_captured_node_puts_bytes_and_dims_back_when_the_call_fails(cexec, driver):
    rec, _, retired = cexec
    before = [rec.args.get(i) for i in range(3)]
    driver.fail = True
    with pytest.raises(pcg.CudaError):
        rec.args.exec_set(rec, args={0: 0x5000, 1: 6}, grid=8, block=64)
    assert [rec.args.get(i) for i in range(3)] == before
    assert (rec.args.params.gridDimX, rec.args.params.blockDimX) == (2, 32)
    assert rec.keep == {}


# rebind -----------------------------------------------------------------------------

OLD, NEW = 0x7F00_0000_4000, 0x7F00_0000_8000


def test_rebind_puts_back_the_nodes_it_patched_when_a_later_one_fails(driver, monkeypatch):
    g = fake_graph()
    k = fake_kernel("float* y, float* x, int n")
    nodes = [fake_kernel_node(g, k, args=(OLD, 0x10 * (i + 1), i)) for i in range(3)]
    monkeypatch.setattr(pcg.Graph, "nodes", property(lambda self: list(self.table.nodes.values())))
    exe = fake_exec(g)
    before = [exe.exec_node(n).args.raw() for n in nodes]
    calls = []

    def exec_set(exe_raw, node_h, pack, node):  # one call per node, through its record
        calls.append(node_h)
        if len(calls) == 3:  # the third node's call fails
            raise pcg.CudaError("cuGraphExecKernelNodeSetParams", 1, "CUDA_ERROR_INVALID_VALUE",
                                "invalid argument")

    monkeypatch.setattr(fast, "exec_kernel_node_set_params", exec_set)
    with pytest.raises(pcg.CudaError):
        exe.rebind(OLD, NEW)
    assert [exe.exec_node(n).args.raw() for n in nodes] == before
    assert len(calls) == 5  # three tries, then the first two put back
    assert [exe.exec_node(n).args.refs[0] for n in nodes] == [OLD] * 3
    monkeypatch.setattr(fast, "exec_kernel_node_set_params", lambda *a: None)
    assert exe.rebind(OLD, NEW) == 3
    assert [exe.exec_node(n).args.values()[0] for n in nodes] == [NEW] * 3


@pytest.mark.parametrize("new, words", [(True, "bool"), (-1, "address"), ("x", "device pointer"),
                                        (np.zeros(4), "host memory"), (2**64, "address")],
                         ids=repr)
def test_rebind_refuses_a_bad_new_address_before_any_call(driver, new, words):
    g = fake_graph()
    fake_kernel_node(g, fake_kernel("float* y, int n"), args=(OLD, 1))
    exe = fake_exec(g)
    with pytest.raises(pcg.ArgumentError, match=words):
        exe.rebind(OLD, new)
    assert driver.calls == []


@pytest.mark.parametrize("flag", ["yes", None, 2], ids=repr)
def test_rebind_missing_ok_must_be_a_bool(driver, flag):
    exe = fake_exec(fake_graph())
    with pytest.raises(pcg.ArgumentError, match="missing_ok must be True or False"):
        exe.rebind(OLD, NEW, missing_ok=flag)


# the other node types ----------------------------------------------------------------

def _event():
    ev = pcg.Event.__new__(pcg.Event)
    ev._raw, ev._h, ev._addr, ev._dev, ev.timing = rt.cudaEvent_t(0x9000), 0x9000, 0x9000, 0, True
    ev._fin = None
    return ev


NODE_CASES = [
    (pcg.MemcpyNode, "memcpy", dict(dst=np.zeros(4)), "read-only|fit|destination"),
    (pcg.MemcpyNode, "memcpy", dict(nbytes=1 << 20), "does not fit"),
    (pcg.MemcpyNode, "memcpy", dict(nbytes="64"), "nbytes must be an int"),
    (pcg.MemcpyNode, "memcpy", dict(src=1.5), "memcpy src must be a buffer"),
    (pcg.MemsetNode, "memset", dict(value="x"), "memset value must be an int or a float"),
    (pcg.MemsetNode, "memset", dict(count=1 << 20), "does not fit the destination"),
    (pcg.MemsetNode, "memset", dict(element_size=3), "element_size must be 1, 2 or 4"),
    (pcg.HostNode, "host", dict(fn=42), "fn must be callable"),
    (pcg.HostNode, "host", dict(fn=print, args=5), "args must be a tuple"),
    (pcg.EventRecordNode, "event", dict(event="ev"), "event must be a pycudagraph.Event"),
    (pcg.EventWaitNode, "event", dict(event=None), "event must be a pycudagraph.Event"),
    (pcg.ChildGraphNode, "child", dict(graph="g"), "graph must be a Graph"),
]


def _seeded(cls, place):
    """A node of ``cls`` in a fake exec whose record already holds something at ``place``."""
    g = fake_graph()
    node = fake_node(g, cls)
    exe = fake_exec(g)
    rec = exe.exec_node(node)
    dst, src = fake_buffer(64), fake_buffer(64)
    held = {"memcpy": (dst, src, 64),
            "memset": (memory_nodes.MemsetParams(int(dst), 0, 1, 64, 1, 0), dst),
            "host": (HostCall(print, ()),), "event": (_event(),), "child": (fake_graph(),)}[place]
    rec.keep[place] = held
    return exe, node, rec, held


@pytest.mark.parametrize("cls, place, changes, words", NODE_CASES,
                         ids=[f"{c.__name__}-{list(ch)[0]}" for c, _, ch, _ in NODE_CASES])
def test_a_refused_node_update_makes_no_call_and_keeps_what_it_held(driver, cls, place,
                                                                    changes, words):
    exe, node, rec, held = _seeded(cls, place)
    with pytest.raises(pcg.ArgumentError, match=words):
        exe.set_params(node, **changes)
    assert driver.calls == [] and rec.keep[place] is held


GOOD_CHANGES = [(pcg.MemcpyNode, "memcpy", dict(nbytes=32)),
                (pcg.MemsetNode, "memset", dict(value=7)),
                (pcg.HostNode, "host", dict(fn=len, args=("ab",))),
                (pcg.EventRecordNode, "event", dict(event=_event())),
                (pcg.ChildGraphNode, "child", dict(graph=fake_graph()))]


@pytest.mark.parametrize("cls, place, changes", GOOD_CHANGES, ids=[c.__name__ for c, *_ in GOOD_CHANGES])
def test_a_node_update_the_driver_refuses_keeps_what_it_held(driver, cls, place, changes):
    exe, node, rec, held = _seeded(cls, place)
    driver.fail = True
    with pytest.raises(pcg.CudaError):
        exe.set_params(node, **changes)
    assert len(driver.calls) == 1 and rec.keep[place] is held
    driver.fail = False
    exe.set_params(node, **changes)
    assert rec.keep[place] is not held


@pytest.mark.parametrize("changes, words", [
    (dict(nope=1), "has no field"), (dict(args=[1]), "takes 6 arguments"),
    (dict(grid="x"), "grid"), (dict(priority=1), "no per-node attribute call"),
])
def test_kernel_set_params_refuses_unknown_or_bad_fields(kexec, driver, changes, words):
    g, node, exe, rec = kexec
    before = rec.args.raw()
    with pytest.raises((pcg.ArgumentError, TypeError), match=words):
        exe.set_params(node, **changes)
    assert driver.calls == [] and rec.args.raw() == before


# whole-graph update -----------------------------------------------------------------

def test_a_refused_whole_graph_update_keeps_the_records(kexec, driver, monkeypatch):
    g, node, exe, rec = kexec
    monkeypatch.setattr(fast, "exec_update", lambda *_: (3, 1, 0))  # refused
    other = fake_graph()
    with pytest.raises(pcg.GraphExecUpdateError):
        exe.update(other)
    assert exe.exec_node(node) is rec


def _held(exe) -> tuple:
    return exe._pending, exe._taken, exe._ledger.extra, exe._host_ids, dict(exe._nodes)


@pytest.mark.parametrize("refuse", ["result", "raise"])
def test_a_refused_whole_graph_update_puts_back_all_it_set_up(kexec, driver, monkeypatch, refuse):
    """A refusal (or an exception from the call) leaves the exec's records, pending update
    graph, copies and host ids as they were, and the refused graph without the exec."""
    g, node, exe, rec = kexec
    monkeypatch.setattr(fast, "exec_update", lambda *_: 0)
    first, second = fake_graph(), fake_graph()
    exe.update(first)  # accepted: ``first`` waits to be paired
    exe.update(second)  # ``first`` is let go, never paired
    before = _held(exe)
    assert before[0] is second and exe in second.table.execs and exe not in first.table.execs

    def refused(*_):
        if refuse == "raise":
            raise RuntimeError("the call failed")
        return (3, 1, 0)

    monkeypatch.setattr(fast, "exec_update", refused)
    other = fake_graph()
    with pytest.raises((pcg.GraphExecUpdateError, RuntimeError)):
        exe.update(other)
    after = _held(exe)
    assert all(a is b for a, b in zip(after[:4], before[:4])) and after[4] == before[4]
    assert exe not in other.table.execs and exe in second.table.execs


@pytest.mark.parametrize("graph", [None, "g", 5, pcg.Stream.wrap(0x5000)], ids=repr)
def test_update_needs_a_graph(kexec, graph):
    g, node, exe, rec = kexec
    with pytest.raises(pcg.ArgumentError, match="update: graph must be a pycudagraph.Graph"):
        exe.update(graph)
    assert exe.exec_node(node) is rec


# on the GPU -------------------------------------------------------------------------

GPU_FAILED_UPDATES = '''
import numpy as np
import pycudagraph as pcg

k = pcg.Module.from_file("helpers.cu")["axpy"]   # axpy(float* y, const float* x, float a, int n)
n = 1024
x = pcg.DeviceBuffer.from_array(np.ones(n, np.float32))
y = pcg.DeviceBuffer.from_array(np.zeros(n, np.float32))
s = pcg.Stream()
g = pcg.Graph()
node = g.add_kernel(k, n // 256, 256, (y, x, 2.0, n))
exe = g.instantiate()

def run_once():
    y.zero()
    exe.launch(s)
    s.synchronize()
    return y.to_numpy()

assert (run_once() == 2.0).all()
refused = 0
for bad in ([y, x, "3.0", n], [y, x, 3.0, 2**40], [y, x, 3.0], [y, True, 3.0, n],
            [y, x, None, n], [y, -1, 3.0, n]):
    try:
        exe.set_params(node, args=bad)
    except pcg.ArgumentError:
        refused += 1
for i, bad in ((2, "3.0"), ("n", 2**40), (0, 1.5), ("x", np.zeros(4))):
    try:
        exe.set_arg(node, i, bad)
    except pcg.ArgumentError:
        refused += 1
for grid in (0, (1, "2"), 2**40):
    try:
        exe.set_params(node, args=[y, x, 3.0, n], grid=grid)
    except pcg.ArgumentError:
        refused += 1
other = pcg.DeviceBuffer(4 * n)
other.free()
try:
    exe.rebind(x, other)
except pcg.ClosedError:
    refused += 1
assert refused == 14, refused
assert (run_once() == 2.0).all(), "a refused update changed the exec"
exe.set_arg(node, "a", 5.0)
assert (run_once() == 5.0).all()
print("OK", refused)
'''


@pytest.mark.gpu
def test_failed_updates_leave_the_exec_launching_its_old_arguments():
    out = run_snippet(GPU_FAILED_UPDATES)
    assert out.kind == "ok" and "OK 14" in out.output, str(out)
