"""The public API as a fuzz sees it (CPU only): one object of each public class built on fakes,
every public callable found by introspection, a good value for each parameter name, and the
wrong values to give instead.

Used by ``tests/graph/test_public_api_fuzz.py``. Every object here stands on fake handles:
calls that get past the checks reach a stand-in driver that refuses (``fast``'s ctypes table)
or the real runtime, which without a GPU answers "no driver" (a CudaNotAvailableError). Never
run these against a real GPU: fake handles would reach it.
"""

from __future__ import annotations

import inspect
import tempfile
import types

import numpy as np
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda.context import thread_state
from pycudagraph.capture.bucketed import BucketedGraphs

from tests.support.fakes import (fake_buffer, fake_exec, fake_graph, fake_if_node, fake_kernel,
                                 fake_kernel_node, fake_node)

#: Exceptions no public entry point may let out for any input: Python's internals.
INTERNAL = (AttributeError, KeyError, IndexError, OverflowError, ZeroDivisionError, NameError,
            UnboundLocalError, AssertionError, RecursionError, SystemError, StopIteration,
            UnicodeError, LookupError, ArithmeticError, BufferError)


def fake_event() -> pcg.Event:
    ev = pcg.Event.__new__(pcg.Event)
    ev._raw, ev._h, ev._addr, ev._dev, ev.timing = rt.cudaEvent_t(0x9000), 0x9000, 0x9000, 0, True
    ev._fin = None
    return ev


def fake_pinned(nbytes: int = 64) -> pcg.PinnedBuffer:
    buf = pcg.PinnedBuffer.__new__(pcg.PinnedBuffer)
    holder = np.zeros(nbytes, np.uint8)
    buf.ptr = buf._addr = holder.ctypes.data
    buf.nbytes, buf._views, buf._fin = nbytes, [], (lambda: None)
    _HOST_MEMORY.append(holder)  # the fake pinned memory stays while the process runs
    return buf


_HOST_MEMORY: list = []


class Step:
    """A BucketedGraphs step that does nothing."""

    def load(self, *inputs):
        pass

    def run(self, stream):
        pass

    def read(self, n):
        return n


#: A module's image: PTX text with one kernel k(float* y, int n) (read here, never loaded).
PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1) { ret; }
"""


def zoo() -> dict:
    """One fresh object of each public class, on fakes (no CUDA call)."""
    g = fake_graph()
    node = fake_kernel_node(g)
    kernel = fake_kernel("float* y, float a, int n")
    z = {
        "graph": g, "graph2": fake_graph(), "exec": fake_exec(g), "kernel": kernel,
        "stream": pcg.Stream.wrap(0x5000), "event": fake_event(), "buffer": fake_buffer(64),
        "pinned": fake_pinned(64), "kernel_node": node,
        "module": pcg.Module.from_ptx(PTX, name="k.ptx"),
        "program": pcg.Program('extern "C" __global__ void k() {}'),
        "trace": pcg.trace(),
        "bucketed": BucketedGraphs([8, 16], lambda n: Step(), stream=pcg.Stream.wrap(0x5000)),
        "capture": pcg.capture(pcg.Stream.wrap(0x5000)),
        "handle": pcg.ConditionalHandle(g, 1),
    }
    for cls in (pcg.EmptyNode, pcg.MemcpyNode, pcg.MemsetNode, pcg.HostNode, pcg.ChildGraphNode,
                pcg.EventRecordNode, pcg.EventWaitNode, pcg.MemAllocNode, pcg.MemFreeNode,
                pcg.CapturedKernelNode, pcg.BatchMemOpNode, pcg.ExtSemaphoreSignalNode):
        z[cls.__name__] = fake_node(g, cls)
    z["IfNode"] = fake_if_node(g)
    return z


#: Zoo entries whose methods are fuzzed, and what they stand for.
FUZZED = ["graph", "exec", "kernel", "stream", "event", "buffer", "pinned", "kernel_node",
          "module", "program", "trace", "bucketed", "capture", "handle", "EmptyNode",
          "MemcpyNode", "MemsetNode", "HostNode", "ChildGraphNode", "EventRecordNode",
          "EventWaitNode", "MemAllocNode", "MemFreeNode", "CapturedKernelNode", "BatchMemOpNode",
          "ExtSemaphoreSignalNode", "IfNode"]

#: Methods left out: those that take nothing to fuzz and end the object (close, free), and
#: the node-class protocol the graph and exec layers call with their own internal objects
#: (a NodeTable, an ExecNode record), which no user passes, and the graph-file record
#: protocol that files/ (and the page of a file, inspect/file_page.py) calls with its own
#: saver and loader objects and checked records (bad records are refused by the file
#: checks, fuzzed in tests/graph/test_graph_files_format.py).
SKIP = {"close", "free", "synchronize", "build", "build_3d", "build_function", "read",
        "exec_record", "exec_set", "exec_set_3d", "copy_for", "write_site",
        "check_fields", "check_record", "checked_kernel", "file_declare", "from_record",
        "record_graphs", "record_graph_names", "record_needs", "record_view", "to_record",
        "usual_kernel", "bulk_record"}
#: Public names that are not entry points to fuzz: enums (Python's own lookups) and the
#: records results come in (made by pycudagraph, read by the user).
NOT_CALLED = {"NodeType", "Profile", "ApplyReport", "GraphDiff", "NodeChange", "Finding",
              "CaptureInfo", "BucketStats", "KernelParams"}


def _zoo_types() -> dict:
    before = thread_state.device
    thread_state.device = 0  # as the cpu_device fixture does: fakes pack for "device 0"
    try:
        z = zoo()
    finally:
        thread_state.device = before
    return {key: type(z[key]) for key in FUZZED}


def targets() -> list[tuple[str, str]]:
    """(zoo key or ``"pcg"``, callable name) of every public callable."""
    out = []
    for name in pcg.__all__:
        obj = getattr(pcg, name)
        if name in NOT_CALLED or (isinstance(obj, type) and issubclass(obj, BaseException)):
            continue
        if callable(obj):
            out.append(("pcg", name))
    for key, cls in _zoo_types().items():
        for name in dir(cls):
            if name.startswith("_") or name in SKIP:
                continue
            attr = inspect.getattr_static(cls, name)
            if (isinstance(attr, (staticmethod, classmethod, types.MethodDescriptorType))
                    or inspect.isfunction(attr)):  # a method descriptor: made in C
                out.append((key, name))
    return sorted(set(out))


def resolve(z: dict, key: str, name: str):
    """The callable a target names, on the zoo ``z``."""
    return getattr(pcg if key == "pcg" else z[key], name)


def good_value(z: dict, param: str):
    """A plausible value for a parameter called ``param`` (None when there is no guess)."""
    table = {
        "node": z["kernel_node"], "a": z["EmptyNode"], "b": z["MemcpyNode"],
        "nodes": [z["EmptyNode"]], "graph": z["graph2"], "stream": z["stream"],
        "upload_stream": None, "kernel": z["kernel"], "event": z["event"], "end": z["event"],
        "nbytes": 64, "grid": 1, "block": 32, "args": (), "dst": z["buffer"],
        "src": fake_buffer(64), "value": 0, "count": 4, "fn": print, "make": lambda n: Step(),
        "path": tempfile.gettempdir() + "/pycudagraph-fuzz-out", "source": "", "name": "k",
        "handle": 0x7000_0000, "index_or_name": 0, "old": 0x1000, "new": 0x2000,
        "flag": True, "width": 8, "height": 1, "depth": 1, "size": 8, "buckets": [8],
        "cubin": b"", "obj": z["buffer"], "array": np.zeros(4, np.float32),
        "host_array": np.zeros(4, np.float32), "mode": "global", "ordinal": 0,
        "device": 0, "params": None, "ptr_or_alloc_node": z["MemAllocNode"], "ops": [],
        "semaphores": [], "other": z["kernel_node"], "attr": "priority", "arch": "sm_90",
        "signature": None, "key": 0, "i": 0, "index": 0, "default": None,
        "shape": None, "dtype": np.float32, "format": None, "owner": None, "deps": (),
        "old_node": z["EmptyNode"], "clone": None, "original": z["EmptyNode"],
    }
    return table.get(param)


#: Values of the wrong type or out of range, given to one parameter at a time.
WRONG_VALUES = [None, True, False, -1, 0, 2**64, -(2**70), 1.5, float("nan"), float("inf"),
                "", "x", "0x1000", b"\x00" * 8, [], [None], (), ("z", 1), {}, {"a": 1},
                {1, 2}, object(), 1j, np.float32(1.5), np.int64(-1), np.uint64(2**63),
                np.bool_(True), np.zeros(3), np.array(["a"]), np.zeros((2, 2)).T,
                type, print, Ellipsis]
