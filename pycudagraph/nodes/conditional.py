"""Conditional nodes: if, if/else, while and switch, driven by a value device code sets.

A :class:`ConditionalHandle` (``cudaGraphConditionalHandleCreate``) is a 64-bit value a
kernel receives as a ``cudaGraphConditionalHandle`` argument; the kernel calls
``cudaGraphSetConditional(handle, value)`` (``pcg.Program`` declares it). The
conditional node (``cudaGraphAddNode`` with a ``cudaConditionalNodeParams``) reads that
value when it runs:

============== ========================== ===================================== =======
class          ``Graph`` builder          runs                                  CUDA
============== ========================== ===================================== =======
IfNode         ``add_if(h)``              ``body`` once if the value is not 0     12.3
IfElseNode     ``add_if_else(h)``         ``bodies[0]`` if not 0, else          12.8
                                          ``bodies[1]``
WhileNode      ``add_while(h)``           ``body`` while the value is not 0     12.3
                                          (checked before each pass)
SwitchNode     ``add_switch(h, n)``       ``bodies[value]``; nothing if value   12.8
                                          >= n
============== ========================== ===================================== =======

Bodies are :class:`~pycudagraph.Graph` objects owned by their node: add any nodes to
them, conditional nodes too. A handle made with ``default=v`` is reset to ``v`` at the
start of every launch; without a default it keeps what device code last set.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from .._cuda import rt, versions
from ..runtime.device import _ordinal
from ..errors import ArgumentError, NotSupportedError, PyCudaGraphError
from .base import Node, NodeType
from .file_records import ConditionalFile
from ..runtime.values import address_arg

__all__ = ["ConditionalHandle", "ConditionalNode", "ConditionalParams", "IfNode", "IfElseNode",
           "WhileNode", "SwitchNode", "KINDS", "body_names"]

_T = rt.cudaGraphConditionalNodeType
_OLD_DRIVER = "the kind and bodies of a conditional node not built here (captured or cloned)"


class ConditionalHandle:
    """A conditional handle (``cudaGraphConditionalHandle``) of one graph.

    Pass it as a kernel argument whose C type is ``cudaGraphConditionalHandle``. It is
    also an ``int`` (``int(h)``, ``h.value``) for raw calls.
    """

    __slots__ = ("_h", "_graph", "default")

    def __init__(self, graph, h: int, default: int | None = None):
        self._h = address_arg(h, "ConditionalHandle: h")
        try:
            self._graph = weakref.ref(graph)
        except TypeError:  # None, an int ...: not a graph
            raise ArgumentError(f"ConditionalHandle: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}") from None
        self.default = default

    @classmethod
    def create(cls, graph, default: int | None = None, device=None) -> "ConditionalHandle":
        """``cudaGraphConditionalHandleCreate(graph, default or 0, flags)``; ``flags`` is
        ``cudaGraphCondAssignDefault`` when a default is given. With ``device``:
        ``cudaGraphConditionalHandleCreate_v2`` naming that device's execution context."""
        if default is not None and (isinstance(default, bool) or not isinstance(default, int)
                                    or not 0 <= default < 2**32):
            raise ArgumentError(f"conditional_handle: default must be None or an unsigned 32-bit "
                                f"int, got {default!r}")
        versions.require("conditional nodes (cudaGraphConditionalHandleCreate)", 12030)
        ordinal = None
        if device is not None:
            try:
                ordinal = _ordinal(device)
            except (TypeError, ValueError) as exc:
                raise ArgumentError(f"conditional_handle: device: {exc}") from None
        raw = versions.conditional_handle_create(graph.handle, default, ordinal)
        return cls(graph, int(raw), default)

    @property
    def handle(self):
        """The raw ``cudaGraphConditionalHandle``. No CUDA call."""
        return rt.cudaGraphConditionalHandle(self._h)

    @property
    def value(self) -> int:
        """The handle as an int. No CUDA call."""
        return self._h

    @property
    def graph(self):
        """The graph the handle was made for (``None`` once that graph is gone). No CUDA call."""
        return self._graph()

    def __index__(self) -> int:
        return self._h

    __int__ = __index__

    def __repr__(self) -> str:
        default = "" if self.default is None else f" default={self.default}"
        return f"<ConditionalHandle 0x{self._h:x}{default}>"


def _check_handle(graph, handle, where: str) -> None:
    """The handle's graph must be ``graph`` or one that contains it (a body's parents)."""
    if not isinstance(handle, ConditionalHandle):
        raise ArgumentError(f"{where}: handle: a conditional node needs a ConditionalHandle "
                            f"(g.conditional_handle()), got {type(handle).__name__}")
    home = handle.graph
    if home is None or not home.table.encloses(graph.table):
        raise ArgumentError(f"{where}: handle {handle!r} was made for another graph; make it "
                            "with conditional_handle() on this graph or on a graph containing it")


@dataclass(frozen=True)
class ConditionalParams:
    """What a conditional node runs: its kind, handle and body graphs."""

    kind: str
    handle: ConditionalHandle | None
    bodies: tuple


class ConditionalNode(Node, ConditionalFile):
    """A conditional node. Nodes built here are :class:`IfNode`, :class:`IfElseNode`,
    :class:`WhileNode` or :class:`SwitchNode`; a conditional node read back from the driver
    is one of those where the driver can say which (``cudaGraphNodeGetParams``, CUDA
    13.2), else this base class, whose bodies cannot be read."""

    type = NodeType.CONDITIONAL
    kind = "conditional"
    in_conditional_body = True
    _raw_type = None
    _version = 12030
    __slots__ = ("_handle", "_bodies")

    def __init__(self, table, h: int, handle=None):
        super().__init__(table, h)
        self._handle = handle
        self._bodies = None

    @classmethod
    def build(cls, table, deps, handle, size: int = 1) -> "ConditionalNode":
        """``cudaGraphAddNode`` with ``cudaGraphNodeParams.conditional`` = (handle, type, size);
        CUDA creates the ``size`` body graphs and returns them in ``phGraph_out``."""
        _check_handle(table.graph, handle, f"add_{cls.kind}")
        versions.require(f"{cls.kind} conditional nodes", cls._version)
        p = rt.cudaGraphNodeParams()
        p.type = rt.cudaGraphNodeType.cudaGraphNodeTypeConditional
        p.conditional.handle = handle.handle
        p.conditional.type = cls._raw_type
        p.conditional.size = size
        raw_deps, _ = table.dep_list(deps)
        raw = versions.graph_add_node(table.raw, raw_deps, p)
        node = cls(table, int(raw), handle)
        node._bodies = tuple(table.child(b, owner=node)
                             for b in list(p.conditional.phGraph_out)[:size])
        return table.register(node, handle)

    @classmethod
    def read(cls, table, h: int) -> "ConditionalNode":
        """A node read back: its kind and bodies from ``cudaGraphNodeGetParams`` (driver
        13.2 or newer); on older drivers a :class:`ConditionalNode` of unknown kind."""
        try:
            p = versions.node_get_params(rt.cudaGraphNode_t(h)).conditional
        except NotSupportedError:
            return ConditionalNode(table, h)
        size = int(p.size)
        kind = {int(_T.cudaGraphCondTypeWhile): WhileNode,
                int(_T.cudaGraphCondTypeSwitch): SwitchNode}.get(
                    int(p.type), IfElseNode if size == 2 else IfNode)
        node = kind(table, h, ConditionalHandle(table.graph, int(p.handle)))
        node._bodies = tuple(table.child(b, owner=node) for b in list(p.phGraph_out)[:size])
        return node

    @property
    def condition(self) -> ConditionalHandle | None:
        """The :class:`ConditionalHandle` the node reads (``None`` when unknown). No CUDA call."""
        return self._handle

    @property
    def bodies(self) -> tuple:
        """The body graphs, in order (each a :class:`~pycudagraph.Graph` owned by this node).

        No CUDA call for a node built here. A node read back from the driver (captured, or
        a clone's copy) has its bodies read with ``cudaGraphNodeGetParams``, which needs a
        CUDA 13.2 driver.
        """
        bodies = self._bodies
        if bodies is not None and all(b.table.owner is self for b in bodies):
            return bodies
        # a clone's copy of one of our nodes, or a node read back on a driver before 13.2
        fresh = ConditionalNode.read(self._table, self._h)
        if fresh._bodies is None:
            raise NotSupportedError(_OLD_DRIVER, "13.2 (cudaGraphNodeGetParams)",
                                    f"a CUDA {versions.format_version(versions.driver_version())} driver")
        self._bodies, self._handle = fresh.inner_graphs(), fresh.condition
        for b in self._bodies:  # the wrappers now belong to this node object
            b.table.owner = self
        return self._bodies

    @property
    def params(self) -> ConditionalParams:
        """Kind, handle and body graphs; the bodies as :attr:`bodies` reads them
        (No CUDA call for a node built here; ``cudaGraphNodeGetParams`` for one read back)."""
        return ConditionalParams(self.kind, self._handle, self.bodies)

    def inner_graphs(self) -> tuple:
        """The body graphs whose wrappers exist. No CUDA call."""
        bodies = self._bodies
        return tuple(b for b in bodies if b.table.owner is self) if bodies else ()

    def exec_set(self, rec, **changes) -> None:
        """Refused with :class:`TypeError`: nothing to change in an exec. No CUDA call."""
        raise ArgumentError("a conditional node has nothing to change in an exec; change the nodes "
                        "of its body graphs with exe.set_params / exe.set_arg")

    def describe(self) -> str:
        """One line: kind, handle and the bodies' node counts (``cudaGraphGetNodes``)."""
        self.check_live()  # then its bodies are alive: read even when closed
        try:
            sizes = ", ".join(str(len(versions.graph_nodes(b.table.raw_handle)))
                              for b in self.bodies)
        except NotSupportedError:
            return "conditional (kind and bodies unknown: cudaGraphNodeGetParams needs CUDA 13.2)"
        h = f" on 0x{self._handle.value:x}" if self._handle is not None else ""
        return f"{self.kind}{h} (body nodes: {sizes})"

    # Facets (:mod:`pycudagraph.nodes.facets`) ---------------------------------------

    repeats_bodies = True
    clone_refusal = "CUDA does not clone graphs with conditional nodes"

    def fields(self) -> dict:
        """``kind`` and ``handle`` (the :class:`ConditionalHandle`, None when unknown); the
        bodies are its :meth:`subgraphs`. No CUDA call."""
        return {"kind": self.kind, "handle": self._handle}

    def subgraphs(self) -> tuple:
        """The body graphs, as :attr:`bodies` reads them (``cudaGraphNodeGetParams`` for a
        node read back); :class:`NotSupportedError` where the driver cannot say."""
        return self.bodies

    def sites(self) -> list:
        """None of its own (its bodies' nodes have theirs); a
        :class:`~pycudagraph.errors.PyCudaGraphError` when its bodies cannot be read, so
        what they bake in cannot be listed (``cudaGraphNodeGetParams``, CUDA 13.2)."""
        try:
            self.bodies
        except NotSupportedError as exc:
            raise PyCudaGraphError(f"the bodies of {self!r} cannot be read, so the addresses "
                                   f"they bake in cannot be listed: {exc}") from None
        return []

    def shape(self) -> str:
        """Kind and body count (``"if (1 bodies)"``), or ``"conditional (bodies unknown)"``
        where the driver cannot say (``cudaGraphNodeGetParams`` for a node read back)."""
        try:
            return f"{self.kind} ({len(self.bodies)} bodies)"
        except NotSupportedError:
            return "conditional (bodies unknown)"

    def subgraph_names(self) -> list:
        """``then`` / ``else`` / ``body`` / ``case i`` by kind, ``body i`` otherwise (as
        :attr:`bodies` reads them: No CUDA call for a node built here,
        ``cudaGraphNodeGetParams`` for one read back)."""
        return body_names(self.kind, len(self.bodies))

    @classmethod
    def record_graph_names(cls, n) -> list:
        """The names of a conditional record's bodies, as :meth:`subgraph_names` gives them
        for the node the record makes. No CUDA call."""
        return body_names(n["kind"], len(n["bodies"]))


class IfNode(ConditionalNode):
    """Runs :attr:`body` once when the handle's value is not 0 (``cudaGraphCondTypeIf``, size 1)."""

    kind = "if"
    _raw_type = _T.cudaGraphCondTypeIf
    __slots__ = ()

    @property
    def body(self):
        """The body graph (:attr:`bodies`: No CUDA call for a node built here;
        ``cudaGraphNodeGetParams`` for a node read back)."""
        return self.bodies[0]


class IfElseNode(ConditionalNode):
    """Runs ``bodies[0]`` when the value is not 0, else ``bodies[1]``
    (``cudaGraphCondTypeIf`` with size 2, CUDA 12.8)."""

    kind = "if_else"
    _raw_type = _T.cudaGraphCondTypeIf
    _version = 12080
    __slots__ = ()

    @classmethod
    def build(cls, table, deps, handle, size: int = 2) -> "IfElseNode":
        """``cudaGraphAddNode`` of an if/else node: two bodies."""
        return super().build(table, deps, handle, 2)

    @property
    def then_body(self):
        """The body run when the value is not 0 (:attr:`bodies`: No CUDA call for a node built
        here; ``cudaGraphNodeGetParams`` for a node read back)."""
        return self.bodies[0]

    @property
    def else_body(self):
        """The body run when the value is 0 (:attr:`bodies`: No CUDA call for a node built
        here; ``cudaGraphNodeGetParams`` for a node read back)."""
        return self.bodies[1]


class WhileNode(ConditionalNode):
    """Runs :attr:`body` while the value is not 0, checked before each pass
    (``cudaGraphCondTypeWhile``). A kernel in the body sets the value for the next check."""

    kind = "while"
    _raw_type = _T.cudaGraphCondTypeWhile
    __slots__ = ()

    @property
    def body(self):
        """The body graph (:attr:`bodies`: No CUDA call for a node built here;
        ``cudaGraphNodeGetParams`` for a node read back)."""
        return self.bodies[0]


class SwitchNode(ConditionalNode):
    """Runs ``bodies[value]``, or nothing when the value is ``>= len(bodies)``
    (``cudaGraphCondTypeSwitch``, CUDA 12.8)."""

    kind = "switch"
    _raw_type = _T.cudaGraphCondTypeSwitch if hasattr(_T, "cudaGraphCondTypeSwitch") else None
    _version = 12080
    __slots__ = ()

    @classmethod
    def build(cls, table, deps, handle, size: int = 1) -> "SwitchNode":
        """``cudaGraphAddNode`` of a switch node with ``size`` bodies."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ArgumentError(f"add_switch: count: a switch node needs a positive number of "
                                f"bodies, got {size!r}")
        if cls._raw_type is None:
            raise NotSupportedError("switch conditional nodes", "12.8 bindings",
                                    "cuda-bindings without cudaGraphCondTypeSwitch")
        return super().build(table, deps, handle, size)


#: kind name -> class
KINDS = {c.kind: c for c in (IfNode, IfElseNode, WhileNode, SwitchNode)}


#: the names of a conditional node's bodies by kind (a switch's: ``case i``)
_BODY_NAMES = {"if": ("then",), "if_else": ("then", "else"), "while": ("body",)}


def body_names(kind: str, count: int) -> list:
    """The names of the ``count`` bodies of a conditional node of ``kind``: ``then`` /
    ``else`` / ``body`` / ``case i`` by kind, ``body i`` otherwise. No CUDA call."""
    if kind == "switch":
        return [f"case {i}" for i in range(count)]
    names = _BODY_NAMES.get(kind, ())
    if len(names) >= count:
        return list(names[:count])
    return [f"body {i}" for i in range(count)]
