"""The :class:`Graph`: node builders, edges, introspection, clone, DOT and instantiate.

A graph keeps alive every Python object its nodes point at (buffers, arrays,
callables, kernels, events, child graphs) in its :class:`~pycudagraph._lifetime.Ledger`,
keyed by node. An exec made from the graph takes its own snapshot of that, so changing
or dropping the graph never frees what an exec can still launch.

The ``add_*`` builders are one line each: the node class makes the add call
(:mod:`pycudagraph.nodes`).
"""

from __future__ import annotations

import weakref

from .._cuda import call, context, rt, versions
from .._lifetime import Ledger, release
from .clone import GraphClone
from .dot import GraphText
from ..nodes.edges import edge_data, port_hint, port_name
from ..errors import ArgumentError, ClosedError, CudaError
from .foreign import wrap_graph
from ..nodes.copy3d import GraphCopy3D
from .ext_semaphore import GraphExtSemaphores
from .mem_ops import GraphMemOps
from ..nodes.generic import GraphGeneric
from .introspect import GraphIntrospection
from ..runtime.user_objects import GraphUserObjects
from .exec_node import forget_removed, graph_gone
from ..nodes import (ChildGraphNode, ConditionalHandle, EmptyNode, EventRecordNode,
                    EventWaitNode, HostNode, IfElseNode, IfNode, KernelNode, MemAllocNode,
                    MemcpyNode, MemFreeNode, MemsetNode, Node, SwitchNode,
                    WhileNode, node_class)
from .node_checks import dep_handles, new_edge, node_arg, old_edge
from ..nodes.base import REMOVED

__all__ = ["Graph"]


class Graph(GraphClone, GraphText, GraphIntrospection, GraphUserObjects, GraphGeneric, GraphCopy3D,
            GraphExtSemaphores, GraphMemOps):
    """A CUDA graph built node by node (``cudaGraphCreate``, destroyed by ``cudaGraphDestroy``).

    Every ``add_*`` builder takes ``deps=``, the nodes the new node waits for, and
    returns the new :class:`~pycudagraph.nodes.Node`.
    """

    def __init__(self):
        context.ensure_device()
        raw = call(rt.cudaGraphCreate, 0)
        self._setup(raw, owner=None)
        self._fin = release(self, rt.cudaGraphDestroy, raw)

    def _setup(self, raw, owner) -> None:
        self._raw_handle = raw
        self._h = int(raw)
        self._owner = owner  # what keeps a non-owned graph's memory valid (a node, an exec)
        self._fin = None
        self._nodes: dict[int, Node] = {}
        self._ledger = Ledger(owner=self)
        self._execs = weakref.WeakSet()
        self._children = weakref.WeakSet()  # child/body graph wrappers valid while we are
        self._closed = False  # close() was called: graph-level calls refuse
        self._dead = ""  # why the raw graph is gone (destroyed, owner removed); "" while valid

    @property
    def _raw(self):
        """The ``cudaGraph_t`` for a raw call; raises :class:`ClosedError` once closed."""
        if self._closed or self._dead:
            self._refuse()
        return self._raw_handle

    def _refuse(self) -> None:
        """Raise the :class:`ClosedError` saying what happened to this graph."""
        if self._dead:
            raise ClosedError(f"Graph 0x{self._h:x}", self._dead)
        raise ClosedError(f"Graph 0x{self._h:x}", "was closed",
                          "its execs keep running; build or change a new Graph instead")

    def _kill(self, reason: str) -> None:
        """The raw graph is gone: its nodes and child graphs refuse from now on."""
        self._dead = reason
        graph_gone(self)  # execs that took its nodes as update twins forget them
        self._nodes.clear()
        self._ledger.clear()
        for child in list(self._children):
            child._kill(f"belongs to a node of Graph 0x{self._h:x}, which {reason}")

    @classmethod
    def _wrap(cls, raw, owner=None, owned: bool = False) -> "Graph":
        """A Graph object for a ``cudaGraph_t`` made elsewhere (capture, child node)."""
        self = cls.__new__(cls)
        self._setup(raw, owner)
        if owned:
            self._fin = release(self, rt.cudaGraphDestroy, raw)
        return self

    @classmethod
    def wrap(cls, handle, owner=None) -> "Graph":
        """Adopt a ``cudaGraph_t`` made elsewhere, not owning it (:mod:`pycudagraph.graph.foreign`).
        No CUDA call."""
        return wrap_graph(cls, handle, owner)

    def _wrap_child(self, raw, owner) -> "Graph":
        """A non-owned Graph for a child or body graph that ``owner`` (a node) keeps valid."""
        child = Graph._wrap(raw, owner=owner)
        self._children.add(child)
        return child

    @property
    def handle(self):
        """The raw ``cudaGraph_t``; :class:`ClosedError` once closed. No CUDA call."""
        return self._raw

    # Nodes and the ledger -----------------------------------------------------------

    def _dep_list(self, deps) -> tuple[list, int]:
        """Raw dependency list for cuda.bindings calls, checking the nodes belong here
        (:func:`pycudagraph.graph.node_checks.dep_handles`: nodes of this graph, no repeats) and
        are alive (a removed node, or one of a destroyed graph, raises ClosedError)."""
        nodes = self._dep_nodes(deps)
        return [d.handle for d in nodes], len(nodes)

    def _dep_nodes(self, deps) -> tuple:
        """``deps`` (None, a node or a sequence) as a checked tuple of this graph's live nodes."""
        if self._closed or self._dead:
            self._refuse()
        nodes = tuple(dep_handles(self, deps))
        for d in nodes:
            d.handle  # noqa: B018 - a removed node raises ClosedError here
        return nodes

    def _register(self, node: Node, *keep) -> Node:
        """Record a node and the objects it keeps alive (replacing what it kept before)."""
        self._nodes[node._h] = node
        self._ledger.hold(node._h, *keep)
        return node

    def _node(self, raw) -> Node:
        """The Node object for a raw handle (made once, then reused)."""
        h = int(raw)
        node = self._nodes.get(h)
        if node is None:
            handle = raw if not isinstance(raw, int) else rt.cudaGraphNode_t(h)
            node = node_class(versions.node_type(handle))._read(self, h)
            self._nodes[h] = node
        return node

    # Builders --------------------------------------------------------------------

    def add_kernel(self, kernel, grid, block, args=(), shared_mem: int = 0, deps=(), *,
                   priority: int | None = None, cluster=None, cooperative: bool | None = None,
                   access_policy=None, mem_sync_domain: str | None = None,
                   device_updatable: bool | None = None) -> KernelNode:
        """Add a kernel launch node (``cuGraphAddKernelNode``, i.e. ``cudaGraphAddKernelNode``).

        Parameters
        ----------
        kernel : Kernel
        grid, block : int or tuple of up to 3 ints
        args : sequence
            One value per kernel parameter (packed from the kernel's signature).
        shared_mem : int
            Dynamic shared memory in bytes.
        deps : sequence of Node
        priority, cluster, cooperative, access_policy, mem_sync_domain, device_updatable
            Kernel-node attributes, set with ``cudaGraphKernelNodeSetAttribute`` when not
            ``None`` (:mod:`pycudagraph.nodes.attributes`; ``node.attributes`` reads them).
        """
        if (priority is None and cluster is None and cooperative is None and access_policy is None
                and mem_sync_domain is None and device_updatable is None):  # the common case
            return KernelNode._add(self, deps, kernel, grid, block, args, shared_mem)
        return KernelNode._add(self, deps, kernel, grid, block, args, shared_mem,
                               priority=priority, cluster=cluster, cooperative=cooperative,
                               access_policy=access_policy, mem_sync_domain=mem_sync_domain,
                               device_updatable=device_updatable)

    def add_memcpy(self, dst, src, nbytes: int | None = None, deps=()) -> MemcpyNode:
        """Add a 1D copy node; direction from the pointers (``cudaGraphAddMemcpyNode1D``).

        ``dst``/``src`` may be DeviceBuffer, PinnedBuffer, numpy arrays, device arrays
        or raw pointers. ``nbytes`` defaults to the source's size.
        """
        return MemcpyNode._add(self, deps, dst, src, nbytes)

    def add_memset(self, dst, value, count: int, element_size: int = 1, height: int = 1,
                   pitch: int | None = None, deps=()) -> MemsetNode:
        """Add a memset node of ``count`` elements of 1, 2 or 4 bytes (``cudaGraphAddMemsetNode``).

        ``height`` > 1 makes it 2D, with rows ``pitch`` bytes apart. A ``float`` value
        is stored as float32 (element_size 4) or half (element_size 2).
        """
        return MemsetNode._add(self, deps, dst, value, count, element_size, height, pitch)

    def add_host(self, fn, args=(), deps=()) -> HostNode:
        """Add a node running ``fn(*args)`` on a CUDA host thread (``cudaGraphAddHostNode``).

        ``fn`` must not call CUDA. If it raises, the exception is kept and raised as
        :class:`HostCallbackError` by the next launch or synchronize.
        """
        return HostNode._add(self, deps, fn, args)

    def add_child_graph(self, graph: "Graph", deps=()) -> ChildGraphNode:
        """Add a node running a copy of ``graph`` (``cudaGraphAddChildGraphNode``)."""
        return ChildGraphNode._add(self, deps, graph)

    def add_empty(self, deps=()) -> EmptyNode:
        """Add a node that does nothing, to join dependencies (``cudaGraphAddEmptyNode``)."""
        return EmptyNode._add(self, deps)

    def add_event_record(self, event, deps=()) -> EventRecordNode:
        """Add a node recording ``event`` (``cudaGraphAddEventRecordNode``)."""
        return EventRecordNode._add(self, deps, event)

    def add_event_wait(self, event, deps=()) -> EventWaitNode:
        """Add a node waiting for ``event`` (``cudaGraphAddEventWaitNode``)."""
        return EventWaitNode._add(self, deps, event)

    def add_mem_alloc(self, nbytes: int, deps=()) -> MemAllocNode:
        """Add a graph-owned allocation of ``nbytes`` on this device (``cudaGraphAddMemAllocNode``).

        The address is ``node.ptr``. Free it with :meth:`add_mem_free` in this graph,
        or instantiate with ``auto_free_on_launch=True``, or free it after launch.
        """
        return MemAllocNode._add(self, deps, nbytes)

    def add_mem_free(self, ptr_or_alloc_node, deps=()) -> MemFreeNode:
        """Add a node freeing graph-allocated memory (``cudaGraphAddMemFreeNode``).

        Takes the :class:`MemAllocNode` or its address.
        """
        return MemFreeNode._add(self, deps, ptr_or_alloc_node)

    # Conditional nodes (pycudagraph.nodes.conditional) ----------------------------

    def conditional_handle(self, default: int | None = None, device=None) -> ConditionalHandle:
        """A handle for one conditional node of this graph or its bodies
        (``cudaGraphConditionalHandleCreate``); ``default`` is set at every launch.

        ``device`` (a :class:`Device` or ordinal; cuda-bindings 13.x) names the device whose
        execution context runs the handle's conditional node, instead of the current one:
        ``cudaGraphConditionalHandleCreate_v2`` with ``cudaDeviceGetExecutionCtx(device)``.
        """
        return ConditionalHandle._create(self, default, device)

    def add_if(self, handle: ConditionalHandle, deps=()) -> IfNode:
        """Add an if node: ``node.body`` runs when the handle is not 0 (``cudaGraphAddNode``)."""
        return IfNode._add(self, deps, handle)

    def add_if_else(self, handle: ConditionalHandle, deps=()) -> IfElseNode:
        """Add an if/else node: ``node.bodies`` = (then, else) (``cudaGraphAddNode``, CUDA 12.8)."""
        return IfElseNode._add(self, deps, handle)

    def add_while(self, handle: ConditionalHandle, deps=()) -> WhileNode:
        """Add a while node: ``node.body`` runs while the handle is not 0 (``cudaGraphAddNode``)."""
        return WhileNode._add(self, deps, handle)

    def add_switch(self, handle: ConditionalHandle, count: int, deps=()) -> SwitchNode:
        """Add a switch node: ``node.bodies[value]`` runs (``cudaGraphAddNode``, CUDA 12.8)."""
        return SwitchNode._add(self, deps, handle, count)

    # Edges -------------------------------------------------------------------------

    def add_dependency(self, a: Node, b: Node, port: str | None = None) -> None:
        """Make ``b`` wait for ``a`` (``cudaGraphAddDependencies``).

        ``port`` (CUDA 12.3, between two kernel nodes): ``"programmatic"`` or
        ``"launch_completion"`` lets ``b`` start early (``cudaGraphEdgeData``;
        :mod:`pycudagraph.nodes.edges`).

        Refused before CUDA (:class:`ArgumentError` naming both nodes): a node of another
        graph, a self-edge, an edge that exists already (whatever its port), an edge that
        would close a cycle.
        """
        if self._closed or self._dead:
            self._refuse()
        data = edge_data(port)  # a bad port is refused before the edge queries
        new_edge(self, a, b)
        if data is not None and not (isinstance(a, KernelNode) and isinstance(b, KernelNode)):
            raise ArgumentError(f"a {port} edge joins two kernel nodes, not {a.type} -> {b.type}")
        versions.graph_add_dependencies(self._raw, [a.handle], [b.handle], data)

    def remove_dependency(self, a: Node, b: Node, port: str | None = None) -> None:
        """Remove the edge ``a -> b`` (``cudaGraphRemoveDependencies``); it must exist, and
        ``port`` must name the edge's port."""
        if self._closed or self._dead:
            self._refuse()
        old_edge(self, a, b)
        try:
            versions.graph_remove_dependencies(self._raw, [a.handle], [b.handle], edge_data(port))
        except CudaError as exc:
            raise port_hint(exc, self, a, b, port)

    def remove_node(self, node: Node) -> None:
        """Remove a node and its edges (``cudaGraphDestroyNode``).

        The node object refuses every later use with :class:`ClosedError` ("was removed
        from its graph"); execs made before keep running their copy of it, but it can
        no longer be updated through this node.
        """
        node_arg(self, node, "node", "remove_node")
        self._dep_list((node,))
        call(rt.cudaGraphDestroyNode, node.handle)
        self._nodes.pop(node._h, None)
        node._raw = REMOVED
        forget_removed(self, node)  # before its bodies are destroyed below
        for child in list(self._children):
            if child._owner is node:
                child._kill(f"belongs to {type(node).__name__} 0x{node._h:x}, which was "
                            "removed from its graph")
        self._ledger.drop(node._h)

    # Introspection ---------------------------------------------------------------

    @property
    def nodes(self) -> list[Node]:
        """All nodes, in creation order (``cudaGraphGetNodes``)."""
        return [self._node(h) for h in versions.graph_nodes(self._raw)]

    @property
    def root_nodes(self) -> list[Node]:
        """Nodes with no dependencies (``cudaGraphGetRootNodes``)."""
        return [self._node(h) for h in versions.graph_root_nodes(self._raw)]

    @property
    def edges(self) -> list[tuple[Node, Node]]:
        """``(from, to)`` pairs (``cudaGraphGetEdges``)."""
        frm, to = versions.graph_get_edges(self._raw)
        return [(self._node(a), self._node(b)) for a, b in zip(frm, to)]

    @property
    def edge_data(self) -> dict:
        """``{(from, to): port}`` for every edge: ``"default"``, ``"programmatic"`` or
        ``"launch_completion"`` (``cudaGraphGetEdges`` with edge data, CUDA 12.3)."""
        frm, to, data = versions.graph_get_edges_with_data(self._raw)
        return {(self._node(a), self._node(b)): port_name(d) for a, b, d in zip(frm, to, data)}

    def __len__(self) -> int:
        return len(versions.graph_nodes(self._raw))

    def _encloses(self, graph: "Graph") -> bool:
        """Whether ``graph`` is this graph or, at any depth, a graph one of its nodes owns
        (a conditional node's body, a child graph)."""
        g = graph
        while g is not None:
            if g is self:
                return True
            owner = g._owner
            g = owner.graph if isinstance(owner, Node) else None
        return False

    def _holds(self, node: Node) -> bool:
        """Whether ``node`` is in this graph or in a graph it encloses."""
        return self._encloses(node.graph) or node._h in self._nodes

    def _inner_graphs(self) -> list:
        """The body and child graphs of this graph's nodes that have wrappers
        (:meth:`_wrap_child` made them, so they are in ``_children``), those of removed
        nodes left out. Walking these, not every node, keeps instantiate free of per-node
        Python work for graphs without conditional or child-graph nodes."""
        nodes = self._nodes
        return [c for c in list(self._children)
                if isinstance(o := c._owner, Node) and nodes.get(o._h) is o]

    def _all_nodes(self):
        """The node objects of this graph and, recursively, of its conditional nodes' bodies
        and child graphs."""
        yield from list(self._nodes.values())
        for inner in self._inner_graphs():
            yield from inner._all_nodes()

    def _held_now(self) -> list:
        """Copies of what the ledgers of this graph and of its inner graphs hold now, keyed by
        node handle (dict copies, made at C speed): an exec's per-node updates later find
        there the argument pack each kernel node had when the exec took the graph."""
        out = [dict(self._ledger.held)]
        for inner in self._inner_graphs():
            out += inner._held_now()
        return out

    def keepalive(self) -> tuple:
        """Everything this graph's nodes point at, bodies of conditional nodes and child
        graphs included (what an exec or parent must hold). No CUDA call."""
        inner = tuple(c.keepalive() for c in self._inner_graphs())
        return (self._ledger.snapshot() + ((self._owner,) if self._owner is not None else ())
                + inner)

    # Clone -------------------------------------------------------------------------

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
        from .exec import GraphExec
        return GraphExec._instantiate(self, upload_stream, auto_free_on_launch,
                                      device_launch, use_node_priority)

    def close(self) -> None:
        """Destroy the graph (``cudaGraphDestroy``) once no exec needs its nodes; idempotent.

        Every later graph-level call (``add_*``, edges, ``nodes``, ``clone``,
        ``instantiate``, ``handle``) raises :class:`ClosedError`. Execs made from it keep
        working; while any is alive the raw graph is kept (their per-node updates address
        its nodes) and destroyed after the last one. Once it is destroyed its nodes and
        child graphs raise :class:`ClosedError` too. Its bodies and child graphs close with it.
        """
        self._closed = True
        for child in list(self._children):
            child.close()
        if self._fin is not None and not self._dead and not len(self._execs):
            self._fin()
            self._kill("was closed")

    def __repr__(self) -> str:
        state = " closed" if self._closed else (" destroyed" if self._dead else "")
        return f"<pycudagraph.Graph 0x{self._h:x}{state}>"
