"""Graph nodes: one class per CUDA node type, grouped by family, and the one registry.

======================= ================================================================
module                  classes
======================= ================================================================
:mod:`.base`            :class:`Node`, :class:`NodeType`
:mod:`.kernel`          :class:`KernelNode`
:mod:`.memory`          :class:`MemcpyNode`, :class:`MemsetNode`, :class:`MemAllocNode`,
                        :class:`MemFreeNode`
:mod:`.host`            :class:`HostNode`
:mod:`.event`           :class:`EventRecordNode`, :class:`EventWaitNode`
:mod:`.structure`       :class:`ChildGraphNode`, :class:`EmptyNode`
:mod:`.conditional`     :class:`ConditionalNode`: :class:`IfNode`, :class:`IfElseNode`,
                        :class:`WhileNode`, :class:`SwitchNode` (one node type, four kinds:
                        :data:`.conditional.KINDS`); :class:`ConditionalHandle`
:mod:`.ext_semaphore`   :class:`ExtSemaphoreSignalNode`, :class:`ExtSemaphoreWaitNode`,
                        :class:`ExternalSemaphore`
:mod:`.batch_mem_op`    :class:`BatchMemOpNode`, :class:`MemOp` (wait/write value, flush,
                        barrier)
:mod:`.attributes`      kernel-node attributes (:class:`AccessPolicyWindow`)
======================= ================================================================

A new node type is one class in its family's module (``build``, ``read``, ``params``,
``exec_set`` and the facets ``fields``, ``sites``, ``subgraphs``, ``exec_fields``; see
:mod:`.facets`), one line in :data:`~pycudagraph.nodes.registry.REGISTRY`,
a one-line ``Graph.add_x`` and its export (``docs/ARCHITECTURE.md`` walks through one).
Node classes build and read through the graph's :class:`~pycudagraph.nodes.table.NodeTable`
and never import the graph layer.
"""

from __future__ import annotations

from .base import RAW_TYPES, Node, NodeType
from .captured_kernel import CapturedKernelNode
from .exec_node import ExecNode
from .facets import Site
from .registry import REGISTRY, node_class, read_node
from .table import NodeTable
from .attributes import AccessPolicyWindow
from .conditional import (ConditionalHandle, ConditionalNode, IfElseNode, IfNode, SwitchNode,
                          WhileNode)
from .batch_mem_op import (BatchMemOpNode, MemOp, flush_remote_writes, memory_barrier,
                           wait_value, write_value)
from .event_nodes import EventRecordNode, EventWaitNode
from .semaphore_nodes import ExternalSemaphore, ExtSemaphoreSignalNode, ExtSemaphoreWaitNode
from .host_node import HostNode
from .kernel_node import KernelNode, KernelParams, short_kernel_name
from .memory_nodes import (MemAllocNode, MemcpyNode, MemcpyParams, MemFreeNode, MemsetNode,
                     MemsetParams)
from .structure import ChildGraphNode, EmptyNode

__all__ = ["NodeType", "Node", "KernelNode", "KernelParams", "MemcpyNode", "MemcpyParams",
           "MemsetNode", "MemsetParams", "HostNode", "ChildGraphNode", "EmptyNode",
           "EventRecordNode", "EventWaitNode", "MemAllocNode", "MemFreeNode",
           "ConditionalNode", "IfNode", "IfElseNode", "WhileNode", "SwitchNode",
           "ConditionalHandle", "AccessPolicyWindow", "node_class", "REGISTRY",
           "short_kernel_name", "ExternalSemaphore", "ExtSemaphoreSignalNode",
           "ExtSemaphoreWaitNode", "BatchMemOpNode", "MemOp", "wait_value", "write_value",
           "flush_remote_writes", "memory_barrier", "CapturedKernelNode", "ExecNode", "NodeTable", "Site",
           "read_node"]
