"""The node table of a graph: what a node class is handed to build a node, and reads later.

A :class:`~pycudagraph.Graph` owns one :class:`NodeTable` (``graph.table``): the raw graph
handle (checked: a closed or destroyed graph raises :class:`~pycudagraph.errors.ClosedError`),
the node objects by handle, what each node keeps alive, and the body and child graphs of
its nodes. A node class builds through it, ``KernelNode.build(table, deps, ...)`` calling
``table.raw``, :meth:`NodeTable.dep_list` and :meth:`NodeTable.register`, and a node reads
through it later (:meth:`NodeTable.node`, :meth:`NodeTable.kept`), so the node layer never
imports the graph layer nor reads a graph's private state.

What a node keeps alive is its ledger entry, keyed by the node's identity (``id(node)`` ->
``(node, *objects)``): an exec takes the entries when it is made (:meth:`exec_keep`: the
ledger's dict itself, which the ledger copies before its next change) and finds there what
each of its nodes had then, whatever the graph does later.
"""

from __future__ import annotations

import weakref

from .._cuda import fast
from .._lifetime import Ledger
from ..errors import ArgumentError, ClosedError, PyCudaGraphError
from ..runtime.values import seq_arg, short_repr
from .base import Node

_register_node = fast.register_node

__all__ = ["NodeTable", "ExecRefs", "node_arg", "dep_nodes", "node_list"]

_ref = weakref.ref


class ExecRefs:
    """The execs that need one raw graph (:attr:`NodeTable.execs`), held weakly: a set of
    ``weakref.ref(exe)``. Unlike a ``WeakSet``, whose ``add`` is Python code, adding one
    where it counts (right before an instantiate or update, when a frame costs 1-2 us with
    the CPU caches cold) is ``execs.add_ref(weakref.ref(exe))``: C calls only, the ref made
    once per exec and reused. ``add``, ``discard``, ``in``, iterating and ``len`` take and
    see the execs themselves, the live ones only; a gone exec's ref is dropped when met.
    """

    __slots__ = ("refs", "add_ref")

    def __init__(self):
        self.refs: set = set()
        self.add_ref = self.refs.add  # the set's own method: calling it makes no frame

    def add(self, exe) -> None:
        self.refs.add(_ref(exe))

    def discard(self, exe) -> None:
        self.refs.discard(_ref(exe))

    def __contains__(self, exe) -> bool:
        return _ref(exe) in self.refs

    def live(self) -> list:
        """The live execs (refs of gone ones dropped)."""
        out = []
        for r in list(self.refs):  # one C step: another thread may add meanwhile
            exe = r()
            if exe is None:
                self.refs.discard(r)
            else:
                out.append(exe)
        return out

    def __iter__(self):
        return iter(self.live())

    def __len__(self) -> int:
        return len(self.live())

    def __repr__(self) -> str:
        return f"ExecRefs({self.live()!r})"


class NodeTable:
    """The nodes of one graph and what they keep alive.

    Attributes
    ----------
    graph : Graph or None
        The graph this table belongs to (``graph_ref()``). A graph that owns its raw graph
        is held weakly, so dropping it destroys it at once; None after that.
    h : int
        The raw graph handle as an int.
    nodes : dict
        Node handle -> node object, one object per node (read back, or made from a graph
        file's records, on first use).
    deferred : DeferredKernelNodes or None
        The records of kernel nodes added without their objects (a loaded graph's), which
        :meth:`node` makes them from.
    execs : ExecRefs
        The execs that need this raw graph, held weakly: made from it, or updated with it
        and not yet paired. ``Graph.close`` destroys the raw graph after the last one.
    owner : object or None
        What keeps a graph pycudagraph does not own valid (the node owning a body graph, an
        adopted graph's maker).
    closed, dead : bool, str
        ``close()`` was called; why the raw graph is gone ("" while it is valid).
    """

    __slots__ = ("graph_ref", "keep_graph", "h", "raw_handle", "nodes", "ledger", "children",
                 "owner", "closed", "dead", "make_child", "execs", "deferred", "__weakref__")

    def __init__(self, graph, raw, owner, make_child):
        self.graph_ref = _ref(graph)
        # A wrapper that owns no raw graph (an inner graph's, an adopted one) is kept by its
        # table, so its nodes keep it; an owning one is not (:meth:`owned`).
        self.keep_graph = graph
        self.raw_handle = raw
        self.h = int(raw)
        self.owner = owner
        self.nodes: dict = {}
        self.ledger = Ledger(owner=graph)
        # body / child graph wrappers valid while we are: a WeakSet from the first one on
        # (until then a tuple, whose truth costs no Python frame at instantiate and update)
        self.children = ()
        self.closed = False
        self.dead = ""
        self.make_child = make_child  # (raw, owner node) -> the Graph wrapper of an inner graph
        self.execs = ExecRefs()  # execs that need the raw graph (made from it, or
        # updated with it and not yet paired): close() destroys it after the last one
        self.deferred = None  # kernel nodes added with no object yet (a loaded graph's)

    # The raw graph ---------------------------------------------------------------------

    @property
    def graph(self):
        """The Graph this table belongs to; None once an owning graph is gone."""
        return self.graph_ref()

    def owned(self) -> None:
        """The graph destroys its raw graph when it goes: the table, and so its nodes, hold
        it only weakly from now on. A dropped graph then goes at once, not when the cyclic
        collector finds the graph and its table, and its finalizer empties the table
        (:meth:`kill`): what the nodes kept alive goes with it."""
        self.keep_graph = None

    @property
    def raw(self):
        """The ``cudaGraph_t`` for a raw call; :class:`ClosedError` once closed or destroyed."""
        if self.closed or self.dead:
            self.refuse()
        return self.raw_handle

    @property
    def usable(self) -> bool:
        """Neither closed nor destroyed."""
        return not (self.closed or self.dead)

    def refuse(self) -> None:
        """Raise the :class:`ClosedError` saying what happened to this graph."""
        if self.dead:
            raise ClosedError(f"Graph 0x{self.h:x}", self.dead)
        raise ClosedError(f"Graph 0x{self.h:x}", "was closed",
                          "its execs keep running; build or change a new Graph instead")

    def kill(self, reason: str) -> None:
        """The raw graph is gone: its nodes and inner graphs refuse from now on. A
        wrapper that owns no raw graph is no longer kept by its table (nothing is left
        that needs it), so it goes with its last reference, not at a collection."""
        self.dead = reason
        self.keep_graph = None
        self.deferred = None
        self.nodes.clear()
        self.ledger.clear()
        for child in list(self.children):
            child.table.kill(f"belongs to a node of Graph 0x{self.h:x}, which {reason}")

    # Building ------------------------------------------------------------------------

    def dep_nodes(self, deps) -> tuple:
        """``deps`` (None, a node or a sequence) as a checked tuple of this graph's live nodes."""
        if self.closed or self.dead:
            self.refuse()
        nodes = tuple(dep_nodes(self, deps))
        for d in nodes:
            d.check_live()
        return nodes

    def dep_list(self, deps) -> tuple[list, int]:
        """Raw dependency list for a ``cudaGraphAdd*Node`` call, and its length."""
        nodes = self.dep_nodes(deps)
        return [d.handle for d in nodes], len(nodes)

    def register(self, node, *keep):
        """Record ``node`` (made by an add call) and the objects it keeps alive, replacing
        what it kept before; returns ``node``. The bookkeeping is ``fast.register_node``'s,
        the one implementation the compiled kernel-node add records with too."""
        return _register_node(self, node, *keep)

    def keep_also(self, node, *objs) -> None:
        """``node`` keeps ``objs`` alive too (an attribute's window, generic parameters)."""
        held = self.ledger.writable()
        held[id(node)] = (held.get(id(node)) or (node,)) + objs

    def kept(self, node) -> tuple:
        """What ``node`` keeps alive (its parameters' Python objects), ``()`` for none."""
        entry = self.ledger.held.get(id(node))
        return entry[1:] if entry is not None and entry[0] is node else ()

    def built(self, node) -> bool:
        """Whether ``node`` was made by an add call of this graph (it has a ledger entry)."""
        entry = self.ledger.held.get(id(node))
        return entry is not None and entry[0] is node

    def child(self, raw, owner):
        """The Graph wrapper of a body or child graph that node ``owner`` keeps valid."""
        child = self.make_child(raw, owner)
        if type(self.children) is tuple:
            self.children = weakref.WeakSet()
        self.children.add(child)
        return child

    def forget(self, node) -> None:
        """``node`` was removed from the graph; its inner graphs die with it."""
        self.nodes.pop(int(node), None)
        if self.deferred is not None:
            self.deferred.forget(int(node))
        for child in list(self.children):
            if child.table.owner is node:
                child.table.kill(f"belongs to {type(node).__name__} 0x{int(node):x}, which "
                                 "was removed from its graph")
        self.ledger.drop(id(node))

    # Reading -------------------------------------------------------------------------

    def node(self, raw):
        """The node object for a raw handle (made once, then reused): a kernel node added
        without its object made from its record (:attr:`deferred`), any other read back
        from the driver."""
        h = int(raw)
        node = self.nodes.get(h)
        if node is None:
            if self.deferred is not None:
                node = self.deferred.make(self, h)
                if node is not None:
                    return node
            from .registry import read_node
            node = self.nodes[h] = read_node(self, h)
        return node

    def settle(self) -> None:
        """Make the object of every kernel node added without one (:attr:`deferred`), so
        :attr:`nodes` holds every node this table knows of. No CUDA call."""
        later = self.deferred
        if later is not None:
            for h in later.handles():
                later.make(self, h)

    def as_added(self, node):
        """What ``node`` kept when it was added, for a node whose object was made later from
        its record (:attr:`deferred`): ``(its packed launch then,)``, which an exec made
        before the object was finds it by; None for any other node. No CUDA call."""
        later = self.deferred
        if later is None:
            return None
        h = int(node)
        pack = later.pack(h)  # None: not one of the records (a node added since, say)
        if pack is None or later.make(self, h) is not node:
            return None
        return (pack,)

    def canonical(self, node) -> bool:
        """Whether ``node`` is this table's object for its handle."""
        return self.nodes.get(int(node)) is node

    def inner_tables(self) -> list:
        """The tables of the body and child graphs of this graph's live nodes that have
        wrappers. Walking these, not every node, keeps instantiate free of per-node work."""
        if not self.children:
            return []
        nodes = self.nodes
        out = []
        for c in list(self.children):
            t = c.table
            o = t.owner
            if o is not None and nodes.get(int(o)) is o:
                out.append(t)
        return out

    def walk(self, depth: int = 0, owner=None):
        """The one walk over a graph: ``(node, depth, owner)`` for every node of this graph
        in creation order (``cudaGraphGetNodes``), each followed by the nodes of the graphs
        it holds (:meth:`Node.subgraphs <pycudagraph.nodes.base.Node.subgraphs>`: a child
        graph, conditional bodies), one level deeper, with that node as their ``owner``.
        A node whose inner graphs cannot be read (a captured conditional node on an older
        driver) is yielded and not descended into; its ``sites()`` say why."""
        for node in self.graph.nodes:
            yield node, depth, owner
            try:
                inner = node.subgraphs()
            except PyCudaGraphError:
                continue
            for g in inner:
                yield from g.table.walk(depth + 1, node)

    def encloses(self, table) -> bool:
        """Whether ``table`` is this one or, at any depth, the table of an inner graph."""
        while table is not None:
            if table is self:
                return True
            owner = table.owner
            table = owner.graph.table if isinstance(owner, Node) else None
        return False

    def exec_keep(self, share: bool = True) -> tuple:
        """``(entries, extras)`` in one walk of the inner graphs (none for a graph without
        any): the ledger dicts of this graph and of its inner graphs, and what each keeps as
        a whole (captured work, an adopted graph's owner). What an exec made from, or
        updated with, this graph keeps. ``share``: the dicts themselves (``Ledger.share``:
        O(1), the ledgers copy them before their next change), for a caller that never
        changes them; else copies."""
        ledger = self.ledger
        taken = [ledger.share() if share else dict(ledger.held)]
        extras = tuple(ledger.extra) + ((self.owner,) if self.owner is not None else ())
        if self.children:  # most graphs have no inner graphs: no call for them
            for inner in self.inner_tables():
                inner_taken, inner_extras = inner.exec_keep(share)
                taken += inner_taken
                extras += (inner_extras,)
        return taken, extras

    def keepalive(self) -> tuple:
        """Everything this graph's nodes point at, inner graphs included (copies: the
        caller may keep and change them)."""
        return self.exec_keep(share=False)


# ----------------------------------------------------------------------------------
# Nodes given to a graph

def node_arg(table, node, what: str, where: str):
    """Check that ``node`` is a node of ``table``'s graph (or, with ``table=None``, any node).

    A node of another graph raises :class:`ArgumentError`, or :class:`ClosedError` when
    that graph was destroyed or the node removed."""
    if not isinstance(node, Node):
        raise ArgumentError(f"{where}: {what} must be a graph node, got {short_repr(node)} "
                            f"({type(node).__name__})")
    if table is None or table.canonical(node):
        return node
    home = node.graph  # None: its graph is gone
    if home is None or home.table is not table:
        node.check_live()  # a node of a destroyed graph: say so (ClosedError)
        raise ArgumentError(f"{where}: {what} {node!r} belongs to another graph "
                            f"({home!r}), not to {table.graph!r}")
    return node


def dep_nodes(table, deps, where: str = "deps") -> list:
    """The nodes of ``deps`` (None, one node, or a sequence), checked: each a node of
    ``table``'s graph, no repeats."""
    if deps is None:
        return []
    if isinstance(deps, Node):
        deps = (deps,)
    elif not isinstance(deps, (tuple, list)):
        try:
            deps = tuple(deps)
        except TypeError:
            raise ArgumentError(f"{where} must be a node or a sequence of nodes, got "
                                f"{short_repr(deps)} ({type(deps).__name__})") from None
    seen = set()
    for i, d in enumerate(deps):
        node_arg(table, d, f"deps[{i}]", where)
        if int(d) in seen:
            raise ArgumentError(f"{where}: deps lists {d!r} twice (duplicate dependency)")
        seen.add(int(d))
    return list(deps)


def node_list(nodes, where: str) -> list:
    """``nodes`` (one node or a sequence of nodes) as a list, each checked to be a node
    (:class:`ArgumentError` ``"{where}: expected Nodes, got <type>"`` otherwise)."""
    if isinstance(nodes, Node):
        return [nodes]
    out = list(seq_arg(nodes, f"{where}: nodes"))
    for n in out:
        if not isinstance(n, Node):
            raise ArgumentError(f"{where}: expected Nodes, got {type(n).__name__}")
    return out


# nodes keep their table, a table why its graph is gone: what the compiled exec updates judge
# a node live by (Node.check_live's rule)
fast.table_slots(Node.__dict__["_table"], NodeTable, NodeTable.__dict__["dead"])
