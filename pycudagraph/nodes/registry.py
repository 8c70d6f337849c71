"""The one registry of node classes: ``cudaGraphNodeType`` -> the class that reads it back.

Adding a node type adds one line here (see ``docs/ARCHITECTURE.md``).
"""

from __future__ import annotations

from .._cuda import rt, versions
from .base import RAW_TYPES, Node, NodeType
from .batch_mem_op import BatchMemOpNode
from .conditional import ConditionalNode
from .event_nodes import EventRecordNode, EventWaitNode
from .host_node import HostNode
from .captured_kernel import CapturedKernelNode
from .memory_nodes import MemAllocNode, MemcpyNode, MemFreeNode, MemsetNode
from .semaphore_nodes import ExtSemaphoreSignalNode, ExtSemaphoreWaitNode
from .structure import ChildGraphNode, EmptyNode

__all__ = ["REGISTRY", "node_class", "read_node"]

#: NodeType -> class: the one registry of node classes.
REGISTRY: dict = {
    NodeType.KERNEL: CapturedKernelNode,  # built ones are KernelNode; read back: captured
    NodeType.MEMCPY: MemcpyNode,
    NodeType.MEMSET: MemsetNode,
    NodeType.HOST: HostNode,
    NodeType.CHILD_GRAPH: ChildGraphNode,
    NodeType.EMPTY: EmptyNode,
    NodeType.EVENT_RECORD: EventRecordNode,
    NodeType.EVENT_WAIT: EventWaitNode,
    NodeType.MEM_ALLOC: MemAllocNode,
    NodeType.MEM_FREE: MemFreeNode,
    NodeType.EXT_SEMAPHORE_SIGNAL: ExtSemaphoreSignalNode,
    NodeType.EXT_SEMAPHORE_WAIT: ExtSemaphoreWaitNode,
    NodeType.BATCH_MEM_OP: BatchMemOpNode,
    NodeType.CONDITIONAL: ConditionalNode,  # its read picks IfNode, IfElseNode, WhileNode, SwitchNode
}


def node_class(raw_type) -> type:
    """The Node subclass for a ``cudaGraphNodeType``; a plain typed ``Node`` for types without one."""
    t = RAW_TYPES.get(int(raw_type), NodeType.OTHER)
    cls = REGISTRY.get(t)
    if cls is None:
        cls = type(f"{t.name.title().replace('_', '')}Node", (Node,), {"type": t, "__slots__": ()})
        REGISTRY[t] = cls
    return cls


def read_node(table, h: int):
    """The node object for handle ``h`` of ``table``'s graph, read back from the driver
    (``cudaGraphNodeGetType``, then the class's ``read``)."""
    return node_class(versions.node_type(rt.cudaGraphNode_t(h))).read(table, h)
