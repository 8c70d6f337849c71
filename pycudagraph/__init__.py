"""pycudagraph: a thin, Pythonic and complete binding to the CUDA Graph runtime API.

Every object exposes ``.handle`` (the raw ``cuda.bindings`` handle) and every method
names the raw call it makes. Importing the package makes no CUDA call.
"""

from .runtime import nvtx as _nvtx
from .capture.bucketed import BucketedGraphs, BucketStats
from .capture.capture import capture, capture_status, recapture
from .inspect.diff import diff
from .capture.control import CaptureInfo, capture_info, capture_mode, update_capture_dependencies
from .runtime.device import Device, DeviceMismatchError, device, device_count
from .compile.reconcile import SignatureWarning
from .compile.kernel import Kernel
from .compile.program import Module, Program
from .errors import (ArgumentError, CaptureError, ClosedError, CompileError, CudaError,
                     CudaNotAvailableError, GraphExecUpdateError, GraphFileError,
                     HostCallbackError,
                     NotSupportedError, PyCudaGraphError)
from .graph.graph import Graph
from .graph.exec import GraphExec
from .graph.exec_reuse import exec_reuse
from .files.load import load
from .files.host_registry import register_host_fn
from .profile.profile import Profile
from .runtime.graph_mem import graph_mem_info, graph_mem_reset_high, graph_mem_trim
from .runtime.memory import DeviceBuffer, PinnedBuffer, device_pointer, host_pointer
from .nodes import (AccessPolicyWindow, BatchMemOpNode, CapturedKernelNode, ChildGraphNode,
                    ConditionalHandle,
                    ConditionalNode, EmptyNode, EventRecordNode, EventWaitNode,
                    ExternalSemaphore, ExtSemaphoreSignalNode, ExtSemaphoreWaitNode, HostNode,
                    IfElseNode, IfNode, KernelNode, MemAllocNode, MemcpyNode, MemFreeNode, MemOp,
                    MemsetNode, Node, NodeType, SwitchNode, WhileNode, flush_remote_writes,
                    memory_barrier, wait_value, write_value)
from .runtime.stream import Event, Stream
from .runtime.trace import trace
from .runtime.user_objects import UserObject
from .frameworks.graphed import GraphedCallable, graphed
from .frameworks.graphed_load import load_graphed
from .frameworks.pools import CapturePool
from .frameworks.regions import SleepableRegion, sleepable
from .debug import doctor, find_fault, find_race
from .inspect import ranges as _ranges  # noqa: F401 - registers its capture-end notes

__version__ = "0.1.0"

_nvtx.install()  # no-op unless PYCUDAGRAPH_NVTX=1

__all__ = [
    "Program", "Module", "Kernel",
    "Stream", "Event", "DeviceBuffer", "PinnedBuffer", "device_pointer", "host_pointer",
    "Device", "device", "device_count",
    "Graph", "GraphExec", "exec_reuse", "Profile", "capture", "capture_status",
    "graph_mem_info", "graph_mem_trim", "graph_mem_reset_high", "UserObject",
    "CaptureInfo", "capture_info", "capture_mode", "recapture", "update_capture_dependencies",
    "trace", "BucketedGraphs", "BucketStats", "load", "register_host_fn", "diff",
    "graphed", "GraphedCallable", "load_graphed", "CapturePool", "sleepable", "SleepableRegion",
    "find_fault", "find_race", "doctor",
    "Node", "NodeType", "KernelNode", "CapturedKernelNode", "MemcpyNode", "MemsetNode", "HostNode",
    "ChildGraphNode", "EmptyNode", "EventRecordNode", "EventWaitNode", "MemAllocNode",
    "MemFreeNode", "ConditionalNode", "IfNode", "IfElseNode", "WhileNode", "SwitchNode",
    "ConditionalHandle", "AccessPolicyWindow", "ExternalSemaphore", "ExtSemaphoreSignalNode",
    "ExtSemaphoreWaitNode", "BatchMemOpNode", "MemOp", "wait_value", "write_value",
    "flush_remote_writes", "memory_barrier",
    "PyCudaGraphError", "CudaError", "CudaNotAvailableError", "NotSupportedError",
    "CompileError", "ArgumentError", "CaptureError", "GraphExecUpdateError", "HostCallbackError",
    "ClosedError", "DeviceMismatchError", "SignatureWarning", "GraphFileError",
]
