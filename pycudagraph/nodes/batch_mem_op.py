"""Batch memory-operation nodes (driver ``cuGraphAddBatchMemOpNode``): stream wait-value,
write-value, flush and barrier operations inside a graph.

A wait-value operation holds the branch it is in until a 32- or 64-bit word in memory
meets a condition (``>=``, ``==``, ``&`` non-zero, ``~(a | b)`` non-zero); a write-value
operation stores a word. One graph branch can so wait for a value another branch, the
host or another process writes. The runtime API has no twin: these are driver calls.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from .._cuda import call, context, dr
from ..errors import ArgumentError
from ..runtime.pointers import device_pointer
from ..runtime.values import bool_arg, seq_arg
from .base import Node, NodeType
from .facets import Site

__all__ = ["MemOp", "BatchMemOpNode", "wait_value", "write_value", "flush_remote_writes",
           "memory_barrier"]

_T = dr.CUstreamBatchMemOpType
_W = dr.CUstreamWaitValue_flags
_CONDS = {"geq": _W.CU_STREAM_WAIT_VALUE_GEQ, "eq": _W.CU_STREAM_WAIT_VALUE_EQ,
          "and": _W.CU_STREAM_WAIT_VALUE_AND, "nor": _W.CU_STREAM_WAIT_VALUE_NOR}
_KINDS = {int(_T.CU_STREAM_MEM_OP_WAIT_VALUE_32): ("wait", 32),
          int(_T.CU_STREAM_MEM_OP_WAIT_VALUE_64): ("wait", 64),
          int(_T.CU_STREAM_MEM_OP_WRITE_VALUE_32): ("write", 32),
          int(_T.CU_STREAM_MEM_OP_WRITE_VALUE_64): ("write", 64),
          int(_T.CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES): ("flush", 0),
          int(_T.CU_STREAM_MEM_OP_BARRIER): ("barrier", 0)}
_COND_NAMES = {int(v): k for k, v in _CONDS.items()}


@dataclass(frozen=True)
class MemOp:
    """One operation of a batch memory-op node (made by :func:`wait_value`,
    :func:`write_value`, :func:`flush_remote_writes`, :func:`memory_barrier`)."""

    kind: str  # "wait", "write", "flush", "barrier"
    address: int = 0
    value: int = 0
    bits: int = 32
    condition: str = ""  # waits: "geq", "eq", "and", "nor"
    flags: int = 0
    target: object = None  # the buffer/array the address came from (kept alive)


def _word(target, value, bits, where) -> tuple[int, int]:
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in (32, 64):
        raise ArgumentError(f"{where}: bits must be 32 or 64, got {bits!r}")
    try:
        addr = device_pointer(target)
    except TypeError as exc:
        raise ArgumentError(f"{where}: {exc}") from None
    if addr % (bits // 8):
        raise ArgumentError(f"{where}: address 0x{addr:x} is not {bits // 8}-byte aligned")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
        raise ArgumentError(f"{where}: value must be an int in [0, 2**{bits}), got {value!r}")
    return addr, value


def wait_value(target, value: int, condition: str = "geq", bits: int = 32,
               flush: bool = False) -> MemOp:
    """Wait until the word at ``target`` meets ``condition`` against ``value``
    (``CU_STREAM_MEM_OP_WAIT_VALUE_32/64``; ``flush``: ``CU_STREAM_WAIT_VALUE_FLUSH``)."""
    if not isinstance(condition, str) or condition not in _CONDS:
        raise ArgumentError(f"wait_value: condition must be one of {sorted(_CONDS)}, got {condition!r}")
    addr, value = _word(target, value, bits, "wait_value")
    flush = bool_arg(flush, "wait_value: flush")
    flags = int(_CONDS[condition]) | (int(_W.CU_STREAM_WAIT_VALUE_FLUSH) if flush else 0)
    return MemOp("wait", addr, value, bits, condition, flags, target)


def write_value(target, value: int, bits: int = 32, barrier: bool = True) -> MemOp:
    """Write ``value`` to the word at ``target`` (``CU_STREAM_MEM_OP_WRITE_VALUE_32/64``;
    ``barrier=False``: ``CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER``)."""
    addr, value = _word(target, value, bits, "write_value")
    flags = 0 if bool_arg(barrier, "write_value: barrier") else int(dr.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
    return MemOp("write", addr, value, bits, "", flags, target)


def flush_remote_writes() -> MemOp:
    """``CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES``."""
    return MemOp("flush", bits=0)


def memory_barrier() -> MemOp:
    """``CU_STREAM_MEM_OP_BARRIER`` (GPU-scope)."""
    return MemOp("barrier", bits=0)


def _raw_op(op: MemOp):
    o = dr.CUstreamBatchMemOpParams()
    if op.kind in ("wait", "write"):
        sub = o.waitValue if op.kind == "wait" else o.writeValue
        name = f"CU_STREAM_MEM_OP_{op.kind.upper()}_VALUE_{op.bits}"
        sub.operation = getattr(_T, name)
        sub.address = dr.CUdeviceptr(op.address)
        if op.bits == 64:
            sub.value64 = dr.cuuint64_t(op.value)
        else:
            sub.value = dr.cuuint32_t(op.value)
        sub.flags = op.flags
    elif op.kind == "flush":
        o.flushRemoteWrites.operation = _T.CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES
    else:
        o.memoryBarrier.operation = _T.CU_STREAM_MEM_OP_BARRIER
    return o


def batch_params(ops):
    """A ``CUDA_BATCH_MEM_OP_NODE_PARAMS`` for ``ops`` (checked) in the current context."""
    ops = [ops] if isinstance(ops, MemOp) else list(seq_arg(ops, "batch mem-op node: ops"))
    if not ops:
        raise ArgumentError("batch mem-op node: needs at least one operation")
    for op in ops:
        if not isinstance(op, MemOp):
            raise ArgumentError(f"batch mem-op node: expected MemOp (wait_value, write_value, ...), "
                                f"got {type(op).__name__}")
    p = dr.CUDA_BATCH_MEM_OP_NODE_PARAMS()
    context.ensure_device()
    p.ctx = call(dr.cuCtxGetCurrent)
    p.count = len(ops)
    p.paramArray = [_raw_op(op) for op in ops]
    p.flags = 0
    return p, tuple(op.target for op in ops if op.target is not None)


# CUDA_BATCH_MEM_OP_NODE_PARAMS is {CUcontext ctx; unsigned count; CUstreamBatchMemOpParams
# *paramArray; unsigned flags}: the array pointer sits at byte 16. Each union is 48 bytes
# (its largest member is ``cuuint64_t pad[6]``).
_ARRAY_OFFSET, _OP_SIZE = 16, 48


def _returned_ops(p) -> list:
    """The operations of a params struct CUDA filled in. cuda-bindings (13.3 seen on an H100)
    returns ``paramArray`` empty for it, so the ops are read where the driver's pointer
    points (memory the node owns until its params change)."""
    count = int(p.count)
    ops = list(p.paramArray)
    if len(ops) >= count:
        return ops[:count]
    array = ctypes.c_uint64.from_address(p.getPtr() + _ARRAY_OFFSET).value
    if not array:
        return []
    return [dr.CUstreamBatchMemOpParams(array + _OP_SIZE * i) for i in range(count)]


class BatchMemOpNode(Node):
    """A batch of stream memory operations (driver ``cuGraphAddBatchMemOpNode``)."""

    type = NodeType.BATCH_MEM_OP
    __slots__ = ()

    @classmethod
    def build(cls, table, deps, ops) -> "BatchMemOpNode":
        p, keep = batch_params(ops)
        raw_deps, n = table.dep_list(deps)  # a closed graph raises ClosedError here
        raw = call(dr.cuGraphAddBatchMemOpNode, dr.CUgraph(table.h),
                   [dr.CUgraphNode(int(d)) for d in raw_deps], n, p)
        return table.register(cls(table, int(raw)), keep, p)

    @property
    def params(self) -> list[MemOp]:
        """The operations, read with ``cuGraphBatchMemOpNodeGetParams``."""
        context.ensure_device()
        p = call(dr.cuGraphBatchMemOpNodeGetParams, dr.CUgraphNode(self._h))
        out = []
        for o in _returned_ops(p):
            kind, bits = _KINDS.get(int(o.operation), (str(o.operation), 0))
            if kind in ("wait", "write"):
                sub = o.waitValue if kind == "wait" else o.writeValue
                value = int(sub.value64) if bits == 64 else int(sub.value)
                cond = _COND_NAMES.get(int(sub.flags) & 3, "") if kind == "wait" else ""
                out.append(MemOp(kind, int(sub.address), value, bits, cond, int(sub.flags)))
            else:
                out.append(MemOp(kind, bits=0))
        return out

    def set_params(self, ops) -> None:
        """Replace the operations in the graph (``cuGraphBatchMemOpNodeSetParams``)."""
        self.check_live()
        p, keep = batch_params(ops)
        call(dr.cuGraphBatchMemOpNodeSetParams, dr.CUgraphNode(self._h), p)
        self._table.register(self, keep, p)

    def exec_set(self, rec, ops=None) -> None:
        """``cuGraphExecBatchMemOpNodeSetParams``; ``ops`` is required."""
        if ops is None:
            raise ArgumentError("set_params: a batch_mem_op node needs ops=")
        p, keep = batch_params(ops)
        call(dr.cuGraphExecBatchMemOpNodeSetParams, dr.CUgraphExec(rec.exec_h),
             dr.CUgraphNode(rec.node_h), p)
        rec.hold("batch_mem_op", keep, p)

    def describe(self) -> str:
        """One line: the node type. No CUDA call."""
        return "batch_mem_op"

    def fields(self) -> dict:
        """``ops``: the operations (``cuGraphBatchMemOpNodeGetParams``)."""
        return {"ops": tuple(self.params)}

    def sites(self) -> list:
        """The word each wait or write operation reads or writes (``"op 0"`` ...), with its
        size (``cuGraphBatchMemOpNodeGetParams``)."""
        return [Site(f"op {i}", 0, op.address, op.bits // 8)
                for i, op in enumerate(self.params) if op.kind in ("wait", "write")]
