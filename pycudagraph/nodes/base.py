"""The node base class and node type names.

A node is a handle into its graph and keeps that graph alive. Nodes compare equal and
hash by their CUDA handle, whichever call returned them (a builder, ``g.nodes``,
``node.dependencies``, ``clone.find``); ``int(node)`` is that handle.

Every node class has two named constructors: ``build(table, deps, ...)`` for a node built
here (it makes the one add call through the graph's
:class:`~pycudagraph.nodes.table.NodeTable` and hands what the node keeps alive to
``table.register``), and ``read(table, h)`` for a node read back from the driver
(captured, listed, cloned). On an exec's first per-node call for it, :meth:`Node.exec_record`
makes the exec's :class:`~pycudagraph.nodes.exec_node.ExecNode` record of it; its exec-side
setter is ``exec_set(record, **changes)``.
"""

from __future__ import annotations

import enum

from .._cuda import call, fast, rt, versions
from .edges import port_name
from ..errors import ArgumentError, ClosedError, PyCudaGraphError
from .exec_node import ExecNode
from .facets import site_pairs
from .generic import set_node_params as _set_node_params

_node_live = fast.node_live

__all__ = ["NodeType", "Node", "RAW_TYPES", "REMOVED", "operand_dict"]


def operand_dict(changes) -> dict:
    """``changes`` checked to be a dict of field name -> value (:meth:`Node.exec_operands`)."""
    if not isinstance(changes, dict) or not all(isinstance(k, str) for k in changes):
        raise ArgumentError(f"exec_operands: changes must be a dict of field name -> value, "
                            f"got {changes!r}")
    return changes


class _Removed:
    """The ``_raw`` of a node removed from its graph (``Graph.remove_node``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<removed node>"


REMOVED = _Removed()

#: Slots a node copy (:meth:`Node.copy_for`) does not take from the original.
_OWN_SLOTS = ("_table", "_h", "_raw", "__weakref__")


class NodeType(str, enum.Enum):
    """Node type names (``cudaGraphNodeType``) as strings: ``node.type == "kernel"``."""

    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    HOST = "host"
    CHILD_GRAPH = "child_graph"
    EMPTY = "empty"
    EVENT_WAIT = "event_wait"
    EVENT_RECORD = "event_record"
    EXT_SEMAPHORE_SIGNAL = "ext_semaphore_signal"
    EXT_SEMAPHORE_WAIT = "ext_semaphore_wait"
    MEM_ALLOC = "mem_alloc"
    MEM_FREE = "mem_free"
    BATCH_MEM_OP = "batch_mem_op"
    CONDITIONAL = "conditional"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


#: ``cudaGraphNodeType`` value -> NodeType.
RAW_TYPES = {0: NodeType.KERNEL, 1: NodeType.MEMCPY, 2: NodeType.MEMSET, 3: NodeType.HOST,
             4: NodeType.CHILD_GRAPH, 5: NodeType.EMPTY, 6: NodeType.EVENT_WAIT,
             7: NodeType.EVENT_RECORD, 8: NodeType.EXT_SEMAPHORE_SIGNAL,
             9: NodeType.EXT_SEMAPHORE_WAIT, 10: NodeType.MEM_ALLOC, 11: NodeType.MEM_FREE,
             12: NodeType.BATCH_MEM_OP, 13: NodeType.CONDITIONAL}


class Node:
    """A node of a graph.

    Attributes
    ----------
    graph : Graph or None
        The graph the node belongs to. The graph keeps its nodes, not the other way round:
        once a graph is dropped it is destroyed and its nodes raise ``ClosedError``
        (``graph`` is then None). Inner graphs (bodies, child graphs) stay while the node
        owning them does.
    type : NodeType
    """

    type = NodeType.OTHER
    __slots__ = ("_table", "_h", "_raw", "__weakref__")

    def __init__(self, table, h: int):
        self._table = table
        self._h = h
        self._raw = None

    @classmethod
    def read(cls, table, h: int) -> "Node":
        """The node object for a node read back from the driver (captured, listed, cloned);
        each class reads what it needs with its own ``GetParams`` call. No CUDA call here."""
        return cls(table, h)

    @property
    def graph(self):
        """The :class:`~pycudagraph.Graph` the node belongs to, or None once it is gone (a node
        does not keep its graph alive). No CUDA call."""
        return self._table.graph

    def __int__(self) -> int:
        """The raw ``cudaGraphNode_t`` as an int. No CUDA call."""
        return self._h

    @property
    def handle(self):
        """The raw ``cudaGraphNode_t`` (cuda.bindings object).

        Raises :class:`ClosedError` for a node removed from its graph, or whose graph was
        destroyed, so no raw call is made with a dangling handle. No CUDA call.
        """
        raw = self._raw
        if raw is None or raw is REMOVED or self._table.dead:
            self.check_live()
            raw = self._raw = rt.cudaGraphNode_t(self._h)
        return raw

    @property
    def live(self) -> bool:
        """Neither removed from its graph nor in a destroyed graph (``fast.node_live``, the
        rule the compiled argument updates judge by). No CUDA call."""
        return _node_live(self)

    @property
    def removed(self) -> bool:
        """Whether the node was removed from its graph (``Graph.remove_node``). No CUDA call."""
        return self._raw is REMOVED

    def check_live(self) -> None:
        """Raise :class:`ClosedError` if the node was removed or its graph destroyed
        (:attr:`live` is false). No CUDA call."""
        if _node_live(self):
            return
        if self._raw is REMOVED:
            raise ClosedError(f"{type(self).__name__} 0x{self._h:x}", "was removed from its graph")
        table = self._table
        if table.dead:
            raise ClosedError(f"{type(self).__name__} 0x{self._h:x}",
                              f"belongs to Graph 0x{table.h:x}, which {table.dead}")

    def mark_removed(self) -> None:
        """The node was destroyed in its graph (``cudaGraphDestroyNode``): refuse from now on."""
        self._raw = REMOVED

    @property
    def dependencies(self) -> list["Node"]:
        """Nodes this one waits for (``cudaGraphNodeGetDependencies``)."""
        return [self._table.node(h) for h in versions.node_dependencies(self.handle)]

    @property
    def dependents(self) -> list["Node"]:
        """Nodes waiting for this one (``cudaGraphNodeGetDependentNodes``)."""
        return [self._table.node(h) for h in versions.node_dependents(self.handle)]

    @property
    def dependency_ports(self) -> dict:
        """``{dependency: port}`` with each incoming edge's data (``"default"``,
        ``"programmatic"``, ...): ``cudaGraphNodeGetDependencies`` with edge data
        (``cudaGraphNodeGetDependencies_v2`` on cuda-bindings 12.x)."""
        return {self._table.node(h): port_name(d)
                for h, d in versions.node_edges_with_data(self.handle)}

    @property
    def dependent_ports(self) -> dict:
        """``{dependent: port}`` with each outgoing edge's data
        (``cudaGraphNodeGetDependentNodes``; ``cudaGraphNodeGetDependentNodes_v2`` on 12.x)."""
        return {self._table.node(h): port_name(d)
                for h, d in versions.node_edges_with_data(self.handle, dependents=True)}

    @property
    def params(self):
        """A readable view of the node's parameters: ``None`` here. No CUDA call here; each
        node type reads its own (its ``cudaGraph*NodeGetParams``)."""
        return None

    @property
    def local_id(self) -> int:
        """The node's ID in its graph, as ``cudaGraphDebugDotPrint`` shows it
        (``cudaGraphNodeGetLocalId``, CUDA 13.1+; NotSupportedError before)."""
        return int(call(versions.gated("cudaGraphNodeGetLocalId", 13010), self.handle))

    @property
    def tools_id(self) -> int:
        """The ID profilers and tools use for the node (``cudaGraphNodeGetToolsId``, CUDA 13.1+)."""
        return int(call(versions.gated("cudaGraphNodeGetToolsId", 13010), self.handle))

    @property
    def containing_graph(self):
        """The graph the driver says holds the node (``cudaGraphNodeGetContainingGraph``,
        CUDA 13.1+): :attr:`graph`, checked against the driver's answer."""
        raw = call(versions.gated("cudaGraphNodeGetContainingGraph", 13010), self.handle)
        if int(raw) != self._table.h:
            raise ClosedError(f"{type(self).__name__} 0x{self._h:x}",
                              f"is held by graph 0x{int(raw):x}, not by {self.graph!r}")
        return self.graph

    @property
    def node_params(self):
        """The raw ``cudaGraphNodeParams`` (``cudaGraphNodeGetParams``, CUDA 13.2+)."""
        return versions.node_get_params(self.handle)

    def set_node_params(self, params, keep=()) -> None:
        """Change the node in its graph from a raw ``cudaGraphNodeParams``
        (``cudaGraphNodeSetParams``, CUDA 12.2+); ``keep``: objects it points at."""
        _set_node_params(self, params, keep)
        self._table.keep_also(self, params, *keep)

    def describe(self) -> str:
        """One line for DOT labels and error messages. No CUDA call here (each node type
        reads what it shows with its own ``GetParams`` call)."""
        return str(self.type)

    def copy_for(self, table, h: int) -> "Node":
        """This node's copy in another graph (a clone's node ``h``): the same class and
        Python-side parameters (argument pack, callable, event). No CUDA call."""
        cls = type(self)
        node = cls.__new__(cls)
        Node.__init__(node, table, h)
        for base in cls.__mro__:
            for slot in getattr(base, "__slots__", ()):
                if slot not in _OWN_SLOTS and hasattr(self, slot):
                    setattr(node, slot, getattr(self, slot))
        return node

    def inner_graphs(self) -> tuple:
        """The graphs this node owns (a conditional node's bodies, a child graph's copy)
        whose wrappers exist; ``()`` for other nodes. No CUDA call."""
        return ()

    # Facets (:mod:`pycudagraph.nodes.facets`): what features read instead of the type ----

    #: The fields an exec may change (what :meth:`exec_set` accepts).
    exec_fields: frozenset = frozenset()
    #: Whether an exec can turn the node off and on (``cudaGraphNodeSetEnabled``: kernel,
    #: memcpy and memset nodes).
    can_disable: bool = False
    #: Whether CUDA allows the node in the body of a conditional node
    #: (``cudaConditionalNodeParams``: kernel, empty, memset, memcpy, child-graph and
    #: conditional nodes, recursively).
    in_conditional_body: bool = False

    def fields(self) -> dict:
        """The node's named parameters as plain values (:mod:`pycudagraph.nodes.facets`);
        each node type reads its own (its ``cudaGraph*NodeGetParams``). None here: No CUDA
        call."""
        return {}

    def sites(self) -> list:
        """Every address the node bakes in, as :class:`~pycudagraph.nodes.facets.Site`
        objects; none here (No CUDA call). Each node type reads its own
        (``cudaGraph*NodeGetParams``)."""
        return []

    def subgraphs(self) -> tuple:
        """The graphs this node holds (a child graph, conditional bodies), read from the
        driver where needed; ``()`` here (No CUDA call). :meth:`NodeTable.walk` descends
        into them."""
        return ()

    # What features ask a node instead of its type (each class answers for itself) -------

    #: Whether the node runs its subgraphs any number of times per launch, or not at all
    #: (a conditional node's bodies), rather than once each time it runs.
    repeats_bodies: bool = False
    #: Why CUDA refuses to clone a graph holding this node ("" when it does not).
    clone_refusal: str = ""
    #: The raw call :meth:`exec_set` makes, as reports name it.
    exec_call: str = "set_params"
    #: Whether the node does nothing when it runs (an empty node joining dependencies).
    idle: bool = False
    #: Whether an edge with a port (``"programmatic"`` ...) may join the node (kernels).
    port_edges: bool = False

    def shape(self) -> str:
        """What must match for two nodes to pair in an exec update: the type here (a
        conditional node adds its kind and body count). No CUDA call here."""
        return str(self.type)

    def label(self) -> str:
        """A short name for the node: its one-line :meth:`describe` here (a kernel node
        gives its kernel's name); its type where even that cannot be read. Each node type
        reads what it shows with its own ``GetParams`` call (``cudaGraphMemcpyNodeGetParams``
        ...)."""
        try:
            return self.describe()
        except PyCudaGraphError:
            return str(self.type)

    def listing(self) -> str:
        """What ``print(graph)`` shows of the node: its one-line :meth:`describe` here (a
        kernel node shows its launch), read with the node type's ``GetParams`` call
        (``cudaGraphMemcpyNodeGetParams`` ...)."""
        return self.describe()

    def subgraph_names(self) -> list:
        """The names of the node's :meth:`subgraphs`, in order, as tree paths and the page
        show them: ``"body 0"`` ... here, as :meth:`subgraphs` reads them (a conditional
        node read back: ``cudaGraphNodeGetParams``)."""
        return [f"body {i}" for i in range(len(self.subgraphs()))]

    def exec_operands(self, changes: dict) -> dict:
        """``changes`` (field -> new value, from :meth:`fields`) as this node's
        :meth:`exec_set` takes them; unchanged here. No CUDA call here."""
        return operand_dict(changes)

    def work(self):
        """What a profiler's activity record of this node shows: ``(kind, bytes)`` for a
        copy or memset, ``("kernel", {names})`` for a kernel (the bytes None, the names empty,
        where they cannot be read; never raises); None for a node that records no device
        work (here: No CUDA call). Reads the node's parameters (``cudaGraphMemcpyNodeGetParams``
        ...)."""
        return None

    def write_site(self, rec: ExecNode, site, address: int) -> None:
        """Write ``address`` where ``site`` is in the exec of ``rec`` (this node's record),
        with the node type's ``cudaGraphExec*NodeSetParams`` call; this base refuses with
        :class:`~pycudagraph.errors.ArgumentError` (No CUDA call). A failed write changes
        nothing."""
        raise ArgumentError(f"{self.type} nodes have no address an exec can change "
                            f"({getattr(site, 'place', site)!r})")

    def write_sites(self, rec: ExecNode, pairs) -> None:
        """Write each ``(site, address)`` of ``pairs`` as :meth:`write_site` does, with the
        node type's ``cudaGraphExec*NodeSetParams`` call (a kernel node writes them all with
        one ``cuGraphExecKernelNodeSetParams``); if one fails, those already written are put
        back (to ``site.address``) and the error is raised."""
        done = []
        try:
            for site, address in site_pairs(pairs, f"{type(self).__name__}.write_sites"):
                self.write_site(rec, site, address)
                done.append(site)
        except BaseException:
            for site in reversed(done):
                try:
                    self.write_site(rec, site, site.address)
                except Exception:  # noqa: BLE001 - the first error is the one to raise
                    pass
            raise

    def exec_sites(self, rec: ExecNode) -> list:
        """:meth:`sites` as the exec of ``rec`` holds them: the graph's here (a kernel node
        reads the exec's own copy of its arguments). No CUDA call here."""
        return self.sites()

    #: Why the node may use addresses its :meth:`sites` do not show ("" when they show all):
    #: a host node runs code that may use any address it was given.
    hidden_addresses: str = ""

    def exec_record(self, exec_raw, source: tuple, retire) -> ExecNode:
        """The record an exec keeps of this node (:mod:`pycudagraph.nodes.exec_node`).

        ``source`` is what the node kept alive when the exec took its graph; ``retire`` is
        the exec's function for objects a later change replaces. No CUDA call here.
        """
        return ExecNode(self, exec_raw, source, retire)

    def exec_set(self, rec: ExecNode, **changes) -> None:
        """Change this node's parameters in the exec of ``rec``: each node type makes its
        ``cudaGraphExec*NodeSetParams`` call (``cudaGraphExecKernelNodeSetParams`` ...); this
        base refuses with :class:`~pycudagraph.errors.ArgumentError`. No CUDA call here."""
        raise ArgumentError(f"set_params does not support {self.type} nodes")

    def __eq__(self, other) -> bool:
        return isinstance(other, Node) and other._h == self._h

    def __hash__(self) -> int:
        return hash(self._h)

    def __repr__(self) -> str:
        if self._raw is REMOVED or self._table.dead:
            return f"<{type(self).__name__} 0x{self._h:x} removed>"
        try:
            what = self.describe()
        except PyCudaGraphError as exc:  # a repr never raises: say why the node is unread
            what = f"(parameters not readable: {type(exc).__name__})"
        return f"<{type(self).__name__} 0x{self._h:x} {what}>"


# the compiled kernel-node add judges a dependency by the node's handle and removed mark
fast.node_slots(Node, Node.__dict__["_h"], Node.__dict__["_raw"], REMOVED)
