"""The :class:`Graph`: node builders, instantiate and the graph's lifetime.

A graph keeps alive every Python object its nodes point at (buffers, arrays, callables,
kernels, events, child graphs) in its :class:`~pycudagraph.nodes.table.NodeTable`, keyed by
node. An exec made from the graph takes its own copy of that, so changing or dropping the
graph never frees what an exec can still launch.

The ``add_*`` builders are one line each: the node class makes the add call through the
graph's table (:mod:`pycudagraph.nodes`). Topology (edges, listing, removal) is in
:mod:`pycudagraph.graph.topology`; clone, text and introspection in their own modules.
"""

from __future__ import annotations

from .._cuda import call, context, fast, rt
from .._cuda.fast import GraphBase
from .._lifetime import Ledger
from ..compile.args import ArgPack
from ..errors import ArgumentError
from ..nodes import (BatchMemOpNode, ChildGraphNode, ConditionalHandle, EmptyNode,
                     EventRecordNode, EventWaitNode, ExtSemaphoreSignalNode,
                     ExtSemaphoreWaitNode, HostNode, IfElseNode, IfNode, KernelNode,
                     MemAllocNode, MemcpyNode, MemFreeNode, MemsetNode, Node, NodeTable,
                     SwitchNode, WhileNode)
from ..nodes.generic import add_node
from ..runtime.user_objects import GraphUserObjects
from ..runtime.values import raw_int
from .clone import GraphClone
from .exec import GraphExec
from .exec_reuse import graph_release
from .features import GraphFeatures
from .foreign import wrap_graph
from .introspect import GraphIntrospection
from .topology import GraphTopology

__all__ = ["Graph"]

#: ``add_kernel_node(table, deps, kernel, grid, block, args, shared_mem) -> KernelNode``: what
#: ``KernelNode.build`` does (``cuGraphAddKernelNode``), made in C where the compiled route is
#: built (``fast.node_maker``: the pack and node objects made and recorded there); anything it
#: does not do itself, and the whole call on the ctypes route, is ``KernelNode.build``'s.
add_kernel_node = fast.node_maker(
    (NodeTable, "h", "nodes", "closed", "dead", "ledger"), (Ledger, "held", "shared"),
    (KernelNode, "_table", "_h", "_raw", "_pack"), ArgPack, KernelNode.build)


class Graph(GraphBase, GraphTopology, GraphClone, GraphFeatures, GraphIntrospection,
            GraphUserObjects):
    """A CUDA graph built node by node (``cudaGraphCreate``, destroyed by ``cudaGraphDestroy``).

    Every ``add_*`` builder takes ``deps=``, the nodes the new node waits for, and
    returns the new :class:`~pycudagraph.nodes.Node`.

    Attributes
    ----------
    table : NodeTable
        The graph's nodes and what they keep alive: what node classes build through and
        execs copy (:mod:`pycudagraph.nodes.table`). Not needed for ordinary use.
    """

    # ``table`` is the base's (fast.GraphBase: a C type where the extension is built), with
    # ``add_kernel``, which hands a call with an attribute keyword to _add_kernel_checked
    __slots__ = ("__dict__", "__weakref__")

    #: The exec class :meth:`instantiate` makes: a subclass of GraphExec on a graph that
    #: needs one (a capture with ``collectives=`` sets it on its graph).
    exec_type = GraphExec

    def __init__(self):
        context.ensure_device()
        raw = call(rt.cudaGraphCreate, 0)
        self._setup(raw, owner=None)
        self._fin = graph_release(self, raw)

    def _setup(self, raw, owner) -> None:
        self.table = NodeTable(self, raw, owner, _inner_graph)
        self._fin = None
        self._origin = None  # the graph this one is a clone of

    @classmethod
    def _wrap(cls, raw, owner=None, owned: bool = False, origin=None) -> "Graph":
        """A Graph object for a ``cudaGraph_t`` made elsewhere (capture, child node, a
        clone of ``origin``)."""
        self = cls.__new__(cls)
        self._setup(raw, owner)
        self._origin = origin
        if owned:
            self._fin = graph_release(self, raw)
        return self

    @classmethod
    def wrap(cls, handle, owner=None) -> "Graph":
        """Adopt a ``cudaGraph_t`` made elsewhere, not owning it (:mod:`pycudagraph.graph.foreign`).
        No CUDA call."""
        return wrap_graph(cls, handle, owner)

    @classmethod
    def adopt_captured(cls, raw, graph=None) -> "Graph":
        """The Graph that owns a captured ``cudaGraph_t``: ``graph`` (a wrapper handed out
        while the capture was open: its nodes stay valid) turned owner, or a new one; it
        destroys the graph with ``cudaGraphDestroy``. No CUDA call here."""
        h = raw_int(raw, "adopt_captured")
        if graph is not None and not isinstance(graph, cls):
            raise ArgumentError(f"adopt_captured: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        if graph is not None and graph.table.h == h:
            graph.table.owner = None
            graph._fin = graph_release(graph, raw)
            return graph
        return cls._wrap(raw, owned=True)

    @property
    def handle(self):
        """The raw ``cudaGraph_t``; :class:`ClosedError` once closed. No CUDA call."""
        return self.table.raw

    def __int__(self) -> int:
        """The raw ``cudaGraph_t`` as an int (what ``pcg.trace()`` names it by), closed or
        not. No CUDA call."""
        return self.table.h

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the raw graph is gone). No CUDA call."""
        return self.table.closed or bool(self.table.dead)

    @property
    def execs(self) -> list:
        """The live execs made from this graph, or updated with it and not yet paired.
        No CUDA call."""
        return list(self.table.execs)

    def keepalive(self) -> tuple:
        """Everything this graph's nodes point at, bodies of conditional nodes and child
        graphs included (what an exec or parent must hold). No CUDA call."""
        return self.table.keepalive()

    # Builders --------------------------------------------------------------------

    def _add_kernel_checked(self, kernel, grid, block, args=(), shared_mem: int = 0, deps=(),
                            *, priority: int | None = None, cluster=None,
                            cooperative: bool | None = None, access_policy=None,
                            mem_sync_domain: str | None = None,
                            device_updatable: bool | None = None) -> KernelNode:
        """:meth:`add_kernel` (``cuGraphAddKernelNode``, i.e. ``cudaGraphAddKernelNode``) for
        what the base's method does not take: attribute keywords, a call it does not parse.
        The parameters are :meth:`add_kernel`'s (the base's docstring,
        :class:`pycudagraph._cuda.hot_base.GraphBase`)."""
        if (priority is None and cluster is None and cooperative is None and access_policy is None
                and mem_sync_domain is None and device_updatable is None):  # the common case
            return add_kernel_node(self.table, deps, kernel, grid, block, args, shared_mem)
        return KernelNode.build(self.table, deps, kernel, grid, block, args, shared_mem,
                               priority=priority, cluster=cluster, cooperative=cooperative,
                               access_policy=access_policy, mem_sync_domain=mem_sync_domain,
                               device_updatable=device_updatable)

    def add_memcpy(self, dst, src, nbytes: int | None = None, deps=()) -> MemcpyNode:
        """Add a 1D copy node; direction from the pointers (``cudaGraphAddMemcpyNode1D``).

        ``dst``/``src`` may be DeviceBuffer, PinnedBuffer, numpy arrays, device arrays
        or raw pointers. ``nbytes`` defaults to the source's size.
        """
        return MemcpyNode.build(self.table, deps, dst, src, nbytes)

    def add_memset(self, dst, value, count: int, element_size: int = 1, height: int = 1,
                   pitch: int | None = None, deps=()) -> MemsetNode:
        """Add a memset node of ``count`` elements of 1, 2 or 4 bytes (``cudaGraphAddMemsetNode``).

        ``height`` > 1 makes it 2D, with rows ``pitch`` bytes apart. A ``float`` value
        is stored as float32 (element_size 4) or half (element_size 2).
        """
        return MemsetNode.build(self.table, deps, dst, value, count, element_size, height, pitch)

    def add_host(self, fn, args=(), deps=()) -> HostNode:
        """Add a node running ``fn(*args)`` on a CUDA host thread (``cudaGraphAddHostNode``).

        ``fn`` must not call CUDA. If it raises, the exception is kept and raised as
        :class:`HostCallbackError` by the next launch or synchronize.
        """
        return HostNode.build(self.table, deps, fn, args)

    def add_child_graph(self, graph: "Graph", deps=()) -> ChildGraphNode:
        """Add a node running a copy of ``graph`` (``cudaGraphAddChildGraphNode``)."""
        return ChildGraphNode.build(self.table, deps, graph)

    def add_empty(self, deps=()) -> EmptyNode:
        """Add a node that does nothing, to join dependencies (``cudaGraphAddEmptyNode``)."""
        return EmptyNode.build(self.table, deps)

    def add_event_record(self, event, deps=()) -> EventRecordNode:
        """Add a node recording ``event`` (``cudaGraphAddEventRecordNode``)."""
        return EventRecordNode.build(self.table, deps, event)

    def add_event_wait(self, event, deps=()) -> EventWaitNode:
        """Add a node waiting for ``event`` (``cudaGraphAddEventWaitNode``)."""
        return EventWaitNode.build(self.table, deps, event)

    def add_mem_alloc(self, nbytes: int, deps=()) -> MemAllocNode:
        """Add a graph-owned allocation of ``nbytes`` on this device (``cudaGraphAddMemAllocNode``).

        The address is ``node.ptr``. Free it with :meth:`add_mem_free` in this graph,
        or instantiate with ``auto_free_on_launch=True``, or free it after launch.
        """
        return MemAllocNode.build(self.table, deps, nbytes)

    def add_mem_free(self, ptr_or_alloc_node, deps=()) -> MemFreeNode:
        """Add a node freeing graph-allocated memory (``cudaGraphAddMemFreeNode``).

        Takes the :class:`MemAllocNode` or its address.
        """
        return MemFreeNode.build(self.table, deps, ptr_or_alloc_node)

    # Conditional nodes (pycudagraph.nodes.conditional) ----------------------------

    def conditional_handle(self, default: int | None = None, device=None) -> ConditionalHandle:
        """A handle for one conditional node of this graph or its bodies
        (``cudaGraphConditionalHandleCreate``); ``default`` is set at every launch.

        ``device`` (a :class:`Device` or ordinal; cuda-bindings 13.x) names the device whose
        execution context runs the handle's conditional node, instead of the current one:
        ``cudaGraphConditionalHandleCreate_v2`` with ``cudaDeviceGetExecutionCtx(device)``.
        """
        return ConditionalHandle.create(self, default, device)

    def add_if(self, handle: ConditionalHandle, deps=()) -> IfNode:
        """Add an if node: ``node.body`` runs when the handle is not 0 (``cudaGraphAddNode``)."""
        return IfNode.build(self.table, deps, handle)

    def add_if_else(self, handle: ConditionalHandle, deps=()) -> IfElseNode:
        """Add an if/else node: ``node.bodies`` = (then, else) (``cudaGraphAddNode``, CUDA 12.8)."""
        return IfElseNode.build(self.table, deps, handle)

    def add_while(self, handle: ConditionalHandle, deps=()) -> WhileNode:
        """Add a while node: ``node.body`` runs while the handle is not 0 (``cudaGraphAddNode``)."""
        return WhileNode.build(self.table, deps, handle)

    def add_switch(self, handle: ConditionalHandle, count: int, deps=()) -> SwitchNode:
        """Add a switch node: ``node.bodies[value]`` runs (``cudaGraphAddNode``, CUDA 12.8)."""
        return SwitchNode.build(self.table, deps, handle, count)

    def add_node(self, params, deps=(), keep=(), port: str | None = None) -> Node:
        """Add a node of any type from a raw ``cudaGraphNodeParams`` (``cudaGraphAddNode``,
        CUDA 12.2+; ``cudaGraphAddNode_v2`` with edge data on cuda-bindings 12.x).

        Parameters
        ----------
        params : cuda.bindings.runtime.cudaGraphNodeParams
            Its ``type`` and the matching member filled in.
        deps : sequence of Node
        keep : sequence
            Objects the parameters point at, kept alive with the node.
        port : str, optional
            Edge data for every dependency edge (``"programmatic"``, ...; CUDA 12.3+).

        Returns
        -------
        Node
            The node class of its type (read back with ``cudaGraphNodeGetType``).
        """
        node = self.table.node(add_node(self.table, deps, params, port))
        return self.table.register(node, params, *keep)

    def add_memcpy_3d(self, dst, src, width: int, height: int = 1, depth: int = 1, deps=(),
                      **layout) -> MemcpyNode:
        """A 2D/3D copy node (``cudaGraphAddMemcpyNode`` with ``cudaMemcpy3DParms``);
        ``layout``: ``dst_pitch``, ``src_pitch``, ``dst_rows``, ``src_rows``, ``dst_pos``,
        ``src_pos`` (:func:`~pycudagraph.nodes.copy_params.copy3d_params`)."""
        return MemcpyNode.build_3d(self.table, deps, dst, src, width, height, depth, **layout)

    def set_memcpy_3d(self, node: MemcpyNode, dst, src, width: int, height: int = 1,
                      depth: int = 1, **layout) -> None:
        """Change a copy node in this graph to a 2D/3D copy (``cudaGraphMemcpyNodeSetParams``)."""
        if getattr(node, "set_params_3d", None) is None or \
                not self.table.encloses(node.graph.table):  # a copy node of this graph
            raise ArgumentError(f"set_memcpy_3d: {node!r} is not a copy node of this graph")
        node.set_params_3d(dst, src, width, height, depth, **layout)

    def add_ext_semaphore_signal(self, semaphores, values=None, deps=()):
        """A node signalling external semaphores (``cudaGraphAddExternalSemaphoresSignalNode``).

        Parameters
        ----------
        semaphores : ExternalSemaphore or sequence of them
        values : int or sequence of int, optional
            The value each timeline semaphore is set to (default 0).
        deps : sequence of Node

        Returns
        -------
        ExtSemaphoreSignalNode
        """
        return ExtSemaphoreSignalNode.build(self.table, deps, semaphores, values)

    def add_ext_semaphore_wait(self, semaphores, values=None, deps=()):
        """A node waiting on external semaphores (``cudaGraphAddExternalSemaphoresWaitNode``).

        Parameters
        ----------
        semaphores : ExternalSemaphore or sequence of them
        values : int or sequence of int, optional
            The value each timeline semaphore must reach (default 0).
        deps : sequence of Node

        Returns
        -------
        ExtSemaphoreWaitNode
        """
        return ExtSemaphoreWaitNode.build(self.table, deps, semaphores, values)

    def add_batch_mem_op(self, ops, deps=()) -> BatchMemOpNode:
        """A node running stream memory operations in order (driver
        ``cuGraphAddBatchMemOpNode``).

        Parameters
        ----------
        ops : MemOp or sequence of MemOp
            From :func:`~pycudagraph.wait_value`, :func:`~pycudagraph.write_value`,
            :func:`~pycudagraph.flush_remote_writes`, :func:`~pycudagraph.memory_barrier`.
        deps : sequence of Node

        Returns
        -------
        BatchMemOpNode
        """
        return BatchMemOpNode.build(self.table, deps, ops)

    # Instantiate -------------------------------------------------------------------

    def instantiate(self, upload_stream=None, auto_free_on_launch: bool = False,
                    device_launch: bool = False, use_node_priority: bool = False):
        """Make an executable graph.

        Without ``upload_stream``: ``cuGraphInstantiateWithFlags(&exec, graph, flags)``, the
        driver form of ``cudaGraphInstantiateWithFlags`` and of ``cudaGraphInstantiate``
        (which takes the same graph and flags since CUDA 12.0). With ``upload_stream``, or to
        say why the driver refused (its result code and failing node):
        ``cudaGraphInstantiateWithParams``.

        Parameters
        ----------
        upload_stream : Stream, optional
            Also upload the exec to the device on this stream (``cudaGraphInstantiateFlagUpload``).
        auto_free_on_launch : bool
            ``cudaGraphInstantiateFlagAutoFreeOnLaunch``: free unfreed graph allocations
            before each relaunch.
        device_launch : bool
            ``cudaGraphInstantiateFlagDeviceLaunch``: launchable from device code.
        use_node_priority : bool
            ``cudaGraphInstantiateFlagUseNodePriority``: honour kernel node priorities.
        """
        return self.exec_type.instantiate(self, upload_stream, auto_free_on_launch,
                                          device_launch, use_node_priority)

    def close(self) -> None:
        """Destroy the graph (``cudaGraphDestroy``) once no exec needs its nodes; idempotent.

        Every later graph-level call (``add_*``, edges, ``nodes``, ``clone``,
        ``instantiate``, ``handle``) raises :class:`ClosedError`. Execs made from it keep
        working; while any is alive the raw graph is kept (their per-node updates address
        its nodes) and destroyed after the last one. Once it is destroyed its nodes and
        child graphs raise :class:`ClosedError` too. Its bodies and child graphs close with it.
        """
        table = self.table
        table.closed = True
        for child in list(table.children):
            child.close()
        if self._fin is not None and not table.dead and not len(table.execs):
            table.kill("was closed")
            self._fin()

    def __repr__(self) -> str:
        state = " closed" if self.table.closed else (" destroyed" if self.table.dead else "")
        return f"<pycudagraph.Graph 0x{self.table.h:x}{state}>"


def _inner_graph(raw, owner) -> Graph:
    """A non-owned Graph for a child or body graph that ``owner`` (a node) keeps valid."""
    return Graph._wrap(raw, owner=owner)
