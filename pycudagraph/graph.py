"""The :class:`Graph`: node builders, edges, introspection, clone, DOT and instantiate.

A graph keeps alive every Python object its nodes point at (buffers, arrays,
callables, kernels, events, child graphs) in its :class:`~pycudagraph._lifetime.Ledger`,
keyed by node. An exec made from the graph takes its own snapshot of that, so changing
or dropping the graph never frees what an exec can still launch.

The ``add_*`` builders are one line each: the node class makes the add call
(:mod:`pycudagraph.nodes`).
"""

from __future__ import annotations

import ctypes
import weakref

from ._cuda import call, device, rt, versions
from ._lifetime import Ledger, release
from .errors import ClosedError
from .nodes import (ChildGraphNode, EmptyNode, EventRecordNode, EventWaitNode, HostNode,
                    KernelNode, MemAllocNode, MemcpyNode, MemFreeNode, MemsetNode, Node,
                    node_class)
from .nodes.base import REMOVED

__all__ = ["Graph"]


class Graph:
    """A CUDA graph built node by node (``cudaGraphCreate``, destroyed by ``cudaGraphDestroy``).

    Every ``add_*`` builder takes ``deps=``, the nodes the new node waits for, and
    returns the new :class:`~pycudagraph.nodes.Node`.
    """

    def __init__(self):
        device.ensure_device()
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

    def _wrap_child(self, raw, owner) -> "Graph":
        """A non-owned Graph for a child or body graph that ``owner`` (a node) keeps valid."""
        child = Graph._wrap(raw, owner=owner)
        self._children.add(child)
        return child

    @property
    def handle(self):
        """The raw ``cudaGraph_t`` (cuda.bindings object); :class:`ClosedError` once closed."""
        return self._raw

    # Nodes and the ledger -----------------------------------------------------------

    def _dep_list(self, deps) -> tuple[list, int]:
        """Raw dependency list for cuda.bindings calls, checking the nodes belong here."""
        if self._closed or self._dead:
            self._refuse()
        if isinstance(deps, Node):
            deps = (deps,)
        raw = []
        for d in deps:
            if not isinstance(d, Node):
                raise TypeError(f"deps must be nodes, got {type(d).__name__}")
            h = d.handle  # a removed node, or one of a destroyed graph, raises here
            if d.graph is not self and d._h not in self._nodes:
                raise ValueError(f"{d!r} belongs to another graph")
            raw.append(h)
        return raw, len(raw)

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
            node = node_class(call(rt.cudaGraphNodeGetType, handle))._read(self, h)
            self._nodes[h] = node
        return node

    # Builders --------------------------------------------------------------------

    def add_kernel(self, kernel, grid, block, args=(), shared_mem: int = 0, deps=()) -> KernelNode:
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
        """
        return KernelNode._add(self, deps, kernel, grid, block, args, shared_mem)

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

    # Edges -------------------------------------------------------------------------

    def add_dependency(self, a: Node, b: Node) -> None:
        """Make ``b`` wait for ``a`` (``cudaGraphAddDependencies``)."""
        self._dep_list((a, b))
        versions.graph_add_dependencies(self._raw, [a.handle], [b.handle])

    def remove_dependency(self, a: Node, b: Node) -> None:
        """Remove the edge ``a -> b`` (``cudaGraphRemoveDependencies``)."""
        self._dep_list((a, b))
        versions.graph_remove_dependencies(self._raw, [a.handle], [b.handle])

    def remove_node(self, node: Node) -> None:
        """Remove a node and its edges (``cudaGraphDestroyNode``).

        The node object refuses every later use with :class:`ClosedError` ("was removed
        from its graph"); execs made before keep running their copy of it, but it can
        no longer be updated through this node.
        """
        self._dep_list((node,))
        call(rt.cudaGraphDestroyNode, node.handle)
        self._nodes.pop(node._h, None)
        node._raw = REMOVED
        for exe in list(self._execs):
            exe._forget(node._h)
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

    def __len__(self) -> int:
        return len(versions.graph_nodes(self._raw))

    def keepalive(self) -> tuple:
        """Everything this graph's nodes point at (what an exec or parent must hold)."""
        return self._ledger.snapshot() + ((self._owner,) if self._owner is not None else ())

    # Clone -------------------------------------------------------------------------

    def clone(self) -> "Graph":
        """A copy of the graph (``cudaGraphClone``); ``clone.find(node)`` maps nodes."""
        raw = call(rt.cudaGraphClone, self._raw)
        new = Graph._wrap(raw, owned=True)
        new._origin = self
        new._ledger.hold("clone of", self.keepalive())
        for node in list(self._nodes.values()):  # so clone.nodes carries what we know
            new.find(node)
        return new

    def find(self, node: Node) -> Node:
        """The node of this clone that copies ``node`` of the original (``cudaGraphNodeFindInClone``)."""
        raw = call(rt.cudaGraphNodeFindInClone, node.handle, self._raw)
        h = int(raw)
        found = self._nodes.get(h)
        if found is None:
            found = _copy_node(node, self, h)
            self._nodes[h] = found
        return found

    # Text --------------------------------------------------------------------------

    def to_dot(self, name: str = "pycudagraph") -> str:
        """A readable Graphviz DOT text: node type, kernel name, grid/block, bytes, edges."""
        from .dot import graph_to_dot
        return graph_to_dot(self, name)

    def debug_dot_print(self, path, verbose: bool = False) -> None:
        """Write CUDA's own DOT description to ``path`` (``cudaGraphDebugDotPrint``)."""
        flags = (rt.cudaGraphDebugDotFlags.cudaGraphDebugDotFlagsVerbose if verbose else 0)
        call(rt.cudaGraphDebugDotPrint, self._raw, str(path).encode(), int(flags))

    def render(self, path, format: str | None = None) -> str:
        """Render :meth:`to_dot` to SVG/PNG with Graphviz's ``dot`` program; returns the path."""
        from .dot import render
        return render(self.to_dot(), path, format)

    def _repr_svg_(self):
        from .dot import svg_or_none
        return svg_or_none(self.to_dot())

    # Instantiate -------------------------------------------------------------------

    def instantiate(self, upload_stream=None, auto_free_on_launch: bool = False,
                    device_launch: bool = False, use_node_priority: bool = False):
        """Make an executable graph (``cudaGraphInstantiateWithParams``).

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
        from .graph_exec import GraphExec
        return GraphExec._instantiate(self, upload_stream, auto_free_on_launch,
                                      device_launch, use_node_priority)

    def close(self) -> None:
        """Destroy the graph (``cudaGraphDestroy``) once no exec needs its nodes; idempotent.

        Every later graph-level call (``add_*``, edges, ``nodes``, ``clone``,
        ``instantiate``, ``handle``) raises :class:`ClosedError`. Execs made from it keep
        working; while any is alive the raw graph is kept (their per-node updates address
        its nodes) and destroyed after the last one. Once it is destroyed its nodes and
        child graphs raise :class:`ClosedError` too.
        """
        self._closed = True
        if self._fin is not None and not self._dead and not len(self._execs):
            self._fin()
            self._kill("was closed")

    def __repr__(self) -> str:
        state = " closed" if self._closed else (" destroyed" if self._dead else "")
        return f"<pycudagraph.Graph 0x{self._h:x}{state}>"


_OWN_SLOTS = ("graph", "_h", "_raw", "_cvp", "__weakref__")


def _copy_node(original: Node, graph: Graph, h: int) -> Node:
    """The clone's node object, carrying the original's Python-side parameters."""
    cls = type(original)
    node = cls.__new__(cls)
    Node.__init__(node, graph, h)
    for base in cls.__mro__:
        for slot in getattr(base, "__slots__", ()):
            if slot not in _OWN_SLOTS and hasattr(original, slot):
                setattr(node, slot, getattr(original, slot))
    if isinstance(node, KernelNode):
        node._cvp = ctypes.c_void_p(h)
    return node
