"""Batch memory-op nodes on the CPU: wait/write/flush/barrier operations checked and
encoded into CUDA_BATCH_MEM_OP_NODE_PARAMS, and the driver add / get / set / exec-set
calls recorded in place of cuda.bindings. On the GPU (marker ``gpu``): one branch waits for
a value the other writes."""

from __future__ import annotations

import pytest
from cuda.bindings import driver as dr

import pycudagraph as pcg
from tests.support.fakes import fake_graph, fake_node

_OK = dr.CUresult.CUDA_SUCCESS
ADDR = 0x7F00_0000_0100
T = dr.CUstreamBatchMemOpType


def test_ops_are_described():
    w = pcg.wait_value(ADDR, 3, "eq", flush=True)
    assert (w.kind, w.address, w.value, w.bits, w.condition) == ("wait", ADDR, 3, 32, "eq")
    assert w.flags == int(dr.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ) | int(
        dr.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_FLUSH)
    x = pcg.write_value(ADDR, 1 << 40, bits=64, barrier=False)
    assert (x.kind, x.bits, x.flags) == ("write", 64, 1)
    assert pcg.flush_remote_writes().kind == "flush" and pcg.memory_barrier().kind == "barrier"


@pytest.mark.parametrize("call,text", [
    (lambda: pcg.wait_value(ADDR, 1, "gt"), "condition must be one of"),
    (lambda: pcg.wait_value(ADDR + 2, 1), "not 4-byte aligned"),
    (lambda: pcg.write_value(ADDR + 4, 1, bits=64), "not 8-byte aligned"),
    (lambda: pcg.write_value(ADDR, 1 << 32), r"value must be an int in \[0, 2\*\*32\)"),
    (lambda: pcg.write_value(ADDR, -1), "value must be an int"),
    (lambda: pcg.write_value(ADDR, 1, bits=16), "bits must be 32 or 64"),
    (lambda: pcg.wait_value(object(), 1), "wait_value"),
])
def test_ops_are_checked(call, text):
    with pytest.raises(pcg.ArgumentError, match=text):
        call()


@pytest.fixture
def drv(monkeypatch, cpu_device):
    seen, stored = [], {}

    def ctx():
        return _OK, dr.CUcontext(0xC0C0)
    ctx.__name__ = "cuCtxGetCurrent"

    def add(graph, deps, n, p):
        seen.append(("add", int(graph), [int(d) for d in deps], n))
        stored[0x4D00_0000] = p
        return _OK, dr.CUgraphNode(0x4D00_0000)
    add.__name__ = "cuGraphAddBatchMemOpNode"

    def get(node):  # as the driver's answer reads through cuda-bindings: paramArray empty,
        # the array reachable only through the struct's pointer field
        return _OK, dr.CUDA_BATCH_MEM_OP_NODE_PARAMS(stored[int(node)].getPtr())
    get.__name__ = "cuGraphBatchMemOpNodeGetParams"

    def set_(node, p):
        seen.append(("set", int(node)))
        stored[int(node)] = p
        return (_OK,)
    set_.__name__ = "cuGraphBatchMemOpNodeSetParams"

    def eset(exe, node, p):
        seen.append(("exec", int(exe), int(node), int(p.count)))
        return (_OK,)
    eset.__name__ = "cuGraphExecBatchMemOpNodeSetParams"
    for name, fn in (("cuCtxGetCurrent", ctx), ("cuGraphAddBatchMemOpNode", add),
                     ("cuGraphBatchMemOpNodeGetParams", get),
                     ("cuGraphBatchMemOpNodeSetParams", set_),
                     ("cuGraphExecBatchMemOpNodeSetParams", eset)):
        monkeypatch.setattr(dr, name, fn)
    return seen


def test_node_params_round_trip(drv):
    g = fake_graph()
    a = fake_node(g)
    node = g.add_batch_mem_op([pcg.write_value(ADDR, 7), pcg.wait_value(ADDR + 8, 1 << 33, "and", bits=64),
                               pcg.memory_barrier()], deps=[a])
    assert isinstance(node, pcg.BatchMemOpNode) and node.type == "batch_mem_op"
    assert drv[-1] == ("add", g.table.h, [a._h], 1)
    ops = node.params
    assert [(o.kind, o.address, o.value, o.bits) for o in ops] == [
        ("write", ADDR, 7, 32), ("wait", ADDR + 8, 1 << 33, 64), ("barrier", 0, 0, 0)]
    assert ops[1].condition == "and"
    node.set_params(pcg.flush_remote_writes())
    assert drv[-1] == ("set", node._h) and [o.kind for o in node.params] == ["flush"]
    exe = pcg.GraphExec.wrap(0x4E00_0000, graph=g)
    exe.set_params(node, ops=[pcg.write_value(ADDR, 1), pcg.write_value(ADDR, 2)])
    assert drv[-1] == ("exec", 0x4E00_0000, node._h, 2)
    with pytest.raises(pcg.ArgumentError, match="needs ops="):
        exe.set_params(node)


def test_node_arguments_checked_before_any_call(drv):
    g = fake_graph()
    with pytest.raises(pcg.ArgumentError, match="needs at least one operation"):
        g.add_batch_mem_op([])
    with pytest.raises(pcg.ArgumentError, match="expected MemOp"):
        g.add_batch_mem_op([ADDR])
    assert drv == []


def test_a_batch_node_made_elsewhere_is_typed_through_the_driver(monkeypatch, cpu_device):
    """The runtime's cudaGraphNodeType has no 12 (CU_GRAPH_NODE_TYPE_BATCH_MEM_OP): the
    binding's cudaGraphNodeGetType ends in cudaGraphNodeType(12), a ValueError. A batch
    node pycudagraph did not add (a clone, Graph.wrap, a capture of cuStreamWaitValue32)
    is read with the driver's cuGraphNodeGetType instead."""
    from cuda.bindings import runtime as rt
    asked = []

    def rt_type(node):
        asked.append("rt")
        return rt.cudaError_t.cudaSuccess, rt.cudaGraphNodeType(12)  # as the binding does
    rt_type.__name__ = "cudaGraphNodeGetType"

    def dr_type(node):
        asked.append(("dr", int(node)))
        return _OK, dr.CUgraphNodeType.CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
    dr_type.__name__ = "cuGraphNodeGetType"
    monkeypatch.setattr(rt, "cudaGraphNodeGetType", rt_type)
    monkeypatch.setattr(dr, "cuGraphNodeGetType", dr_type)
    g = fake_graph()
    node = g.table.node(0x4E00_0000)
    assert type(node) is pcg.BatchMemOpNode and node.type == "batch_mem_op"
    assert asked == ["rt", ("dr", 0x4E00_0000)] or asked == ["rt"]  # "rt" alone: enum has 12
    assert g.table.node(0x4E00_0000) is node


# On the GPU (in a subprocess: a wait that is never met would hang) --------------------

_BATCH = r"""
import numpy as np, pycudagraph as pcg
flag, out = pcg.DeviceBuffer(8), pcg.DeviceBuffer(4 * 256)
flag.copy_from(np.zeros(2, np.uint32))
g = pcg.Graph()
wait = g.add_batch_mem_op(pcg.wait_value(flag, 1, "geq"))    # branch 1 waits ...
g.add_memset(out, 5, 256, element_size=4, deps=[wait])       # ... then writes out
write = g.add_batch_mem_op(pcg.write_value(flag, 1))         # branch 2 releases it
assert [o.kind for o in wait.params] == ["wait"] and write.params[0].value == 1
s = pcg.Stream()
exe = g.instantiate()
exe.launch(s)
s.synchronize()
res = np.empty(256, np.uint32); out.copy_to(res)
assert (res == 5).all()
exe.set_params(wait, ops=pcg.wait_value(flag, 2, "eq"))
exe.set_params(write, ops=pcg.write_value(flag, 2))
exe.launch(s)
s.synchronize()
f = np.empty(2, np.uint32); flag.copy_to(f)
assert f[0] == 2
print("BATCH OK")
"""


@pytest.mark.gpu
def test_batch_mem_op_branch_waits_for_a_value_another_writes():
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _BATCH], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "BATCH OK" in proc.stdout, proc.stdout + proc.stderr
