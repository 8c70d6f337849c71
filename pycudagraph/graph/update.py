"""An exec's records of its nodes, its whole-graph update (``cudaGraphExecUpdate``) and the
pairing of the update's nodes with its own.

Mixed into :class:`~pycudagraph.GraphExec`. After an update the nodes of the new graph are
paired with the exec's own in creation order (as CUDA pairs nodes built by the API), lazily,
at the next per-node update; bodies of conditional nodes are paired the same way. Each
pair is one record of the exec (:class:`~pycudagraph.nodes.exec_node.ExecNode`) reached by
either node; the new graph's node is a weak twin, so its key dies with it.
"""

from __future__ import annotations

from weakref import ref

from .._cuda import error_for, fast, rt, versions
from .._lifetime import Release, release
from ..errors import ArgumentError, GraphExecUpdateError, PyCudaGraphError
from ..nodes.table import node_arg
from ..nodes.captured_args import CapturedArgs
from . import exec_reuse, reuse_box

__all__ = ["ExecUpdate", "UPDATE_REASONS", "RETIRE_CHECK"]

#: ``cudaGraphExecUpdateResult`` -> why CUDA refused an update, in words.
UPDATE_REASONS = {
    1: "the update failed for a reason CUDA does not classify",
    2: "topology changed (nodes or edges added or removed)",
    3: "node type changed",
    4: "function changed (a kernel node launches a different kernel)",
    5: "parameters changed in a way that cannot be updated",
    6: "this kind of node cannot be updated",
    7: "function changed in a way that cannot be updated",
    8: "node attributes changed",
}

#: What an exec's updates replaced is let go, if no launch can read it, every this many.
RETIRE_CHECK = 256


class Retirer:
    """``retire(old)``: an exec's :meth:`GraphExec._retire` for its records, holding the exec
    weakly. The records are also in the exec's reuse box, which the exec's finalizer holds
    until the exec goes, and in the exec's ledger: a record holding the exec (a bound
    method) would keep the exec, and all it points at, alive for ever, or until the cyclic
    collector runs. With the exec gone there is nothing to keep ``old`` for. One weak
    reference read per call (a set_arg that replaced a kept object): no bound method made."""

    __slots__ = ("exe", "fn")

    def __init__(self, exe_ref, fn):
        self.exe, self.fn = exe_ref, fn  # (weakref.ref(exe), the unbound _retire)

    def __call__(self, old) -> None:
        exe = self.exe()
        if exe is not None:
            self.fn(exe, old)


class ExecUpdate:
    """The records of :class:`~pycudagraph.GraphExec`'s nodes and its whole-graph update."""

    __slots__ = ()

    def exec_node(self, node):
        """The exec's record of ``node`` (:class:`~pycudagraph.nodes.exec_node.ExecNode`: its
        handle here, its argument storage, what the exec keeps alive for it), ``node``
        being a node of the exec's graph or of one of its bodies, or its update twin. Made
        on first use by the node's class (No CUDA call for a node built here;
        ``cuGraphKernelNodeGetParams`` for a kernel node read back). A closed exec
        or a removed / destroyed node raises :class:`ClosedError`."""
        rec = self._nodes.get(id(node))
        if rec is not None and rec.stands_for(node):
            node.check_live()
            if rec.node is not node and not rec.node.live:
                raise PyCudaGraphError(f"{node!r} is not a node of the graph this exec was made "
                                       f"from: the node it stood for, {rec.node!r}, is gone")
            return rec
        node_arg(None, node, "node", "set_params")
        if self._h is None:
            self._refuse()
        node.check_live()
        if self._pending is not None:  # pair the last update's nodes first
            closing = self._pair_update()
            rec = self._nodes.get(id(node))
            if closing is not None:  # an update graph closed while it waited: destroyed now
                closing.close()
            if rec is not None and rec.stands_for(node):
                return rec
            return self.exec_node(node)
        rec = reuse_box.alias(self._ledger.extra, node)  # a reused exec's own node, updated
        if rec is not None:
            return rec
        source = self._source(node)
        if source is None:
            raise PyCudaGraphError(f"{node!r} is not a node of the graph this exec was made "
                                   "from (nodes added since are not in the exec)")
        rec = node.exec_record(self.handle, source, self._retire_fn())
        self._nodes[id(node)] = rec
        return rec

    def _source(self, node):
        """What ``node`` kept alive when the exec took its graph, or None when it is not
        one of the exec's nodes. A node read back from the driver keeps nothing: it is the
        exec's when its graph is (or is inside) the exec's graph."""
        graph = self.graph
        table = node.graph.table
        if graph is None or not graph.table.encloses(table):
            return None
        key = id(node)
        for taken in self._taken:
            entry = taken.get(key)
            if entry is not None and entry[0] is node:
                return entry[1:]
        if table.canonical(node):
            if not table.built(node):
                return ()
            return table.as_added(node)  # made from a loaded graph's record after the exec
        return None

    def _retire_fn(self) -> "Retirer":
        """What this exec's records call with what an update replaced (``rec.retire(old)``):
        :meth:`_retire`, through a :class:`Retirer` that holds the exec weakly."""
        r = self._retirer
        if r is None:
            r = self._retirer = Retirer(ref(self), self._retire.__func__)
        return r

    def update(self, graph) -> None:
        """Take all node parameters from ``graph``, which has the same topology
        (``cuGraphExecUpdate``, the driver twin of ``cudaGraphExecUpdate``).

        Nodes are paired in creation order, as CUDA pairs nodes built by the API (done
        lazily, at the next per-node update). Afterwards the nodes of ``graph`` are
        accepted by :meth:`set_arg` and :meth:`set_params` as aliases of the paired nodes.
        A refused update changes nothing.

        Raises
        ------
        GraphExecUpdateError
            Naming the reason (topology changed, function changed, ...) and the node.
        """
        if not isinstance(graph, type(self.graph)) or self.graph is None:
            raise ArgumentError(f"update: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        if self._h is None:  # closed: ClosedError (no cudaGraphExec_t object made to say so)
            self._refuse()
        table = graph.table
        if table.closed or table.dead:  # a closed graph: ClosedError, as graph.handle says it
            table.refuse()
        refused = self._swap_in(graph, self._h)  # the bookkeeping, then the driver call
        if refused:
            err, result, error_node = refused
            reason = UPDATE_REASONS.get(result, f"result code {result}")
            node = graph.find_node(error_node) if error_node else None
            hint = reason + (f"; node: {node.describe()}" if node is not None else "")
            exc = error_for("cuGraphExecUpdate", err, hint, cls=GraphExecUpdateError)
            exc.reason, exc.node = reason, node
            raise exc

    def apply(self, graph, fallback: str = "reinstantiate", strategy: str = "auto"):
        """Make the exec run ``graph``'s work with the fewest calls: per-node set-params
        calls (``cuGraphExecKernelNodeSetParams``, ``cudaGraphExecMemcpyNodeSetParams1D`` ...)
        for what changed, or one ``cuGraphExecUpdate`` when that is cheaper; when CUDA
        refuses, ``cudaGraphInstantiateWithFlags`` and the handle is swapped in place. See
        :func:`pycudagraph.apply.apply.apply`; returns its
        :class:`~pycudagraph.apply.apply.ApplyReport`."""
        from ..apply.apply import apply
        return apply(self, graph, fallback, strategy, self._adopt)

    def _adopt(self, raw, graph) -> None:
        """The exec now runs ``graph``'s work: the bookkeeping of :meth:`apply`.

        ``raw`` None: the same handle, its parameters taken from ``graph`` (by
        ``cuGraphExecUpdate`` or per-node calls); ``graph``'s nodes are paired with the
        exec's at the next per-node call. ``raw`` a ``cudaGraphExec_t`` instantiated from
        ``graph``: it replaces the exec's handle (the old one is destroyed,
        ``cudaGraphExecDestroy``, if the exec owned it; a launch in flight finishes) and
        ``graph`` becomes :attr:`graph`. Either way the exec's records are dropped and
        what its old parameters kept is retired (kept until a synchronize: a launch in
        flight may still read it); what ``graph`` keeps is kept.
        """
        self._swap_in(graph)  # the old keeping list retired there, whole
        if raw is not None:
            self._fin()
            self._raw, self._h, self._addr = raw, int(raw), int(raw)
            self._fin = release(self, rt.cudaGraphExecDestroy, raw)
            previous, self.graph, self._pending = self.graph, graph, None
            if previous is not None and previous is not graph:
                self._let_go(previous)
            self._ledger.extra = self._ledger.extra[:2]  # a new handle: no more kept

    def _swap_in(self, graph, exec_h: int | None = None):
        """The same-handle part of :meth:`update` and :meth:`_adopt`, in one frame (it runs
        right before a large driver call, when a frame costs 1-2 us with the CPU caches
        cold): ``graph``'s raw graph kept while the exec needs it (``graph``'s execs), a
        reused exec never parked again (what its nodes launch changes), the exec's records
        and its old graph copies retired, ``graph`` pending (paired at the next per-node
        call), what ``graph`` keeps taken (its ledger dicts, shared, and what it keeps as a
        whole; the exec's own owner stays), a pending graph it supersedes let go.

        With ``exec_h`` the driver call of :meth:`update` follows here,
        ``cuGraphExecUpdate(exec_h, graph)``: if the driver refuses (or the call raises)
        all is as it was (what was retired stays alive until then too) and the refusal,
        ``(CUresult, result, error node)``, is returned; else 0 (always 0 without
        ``exec_h``: the bookkeeping alone cannot be refused)."""
        table = graph.table
        taken, extras = table.exec_keep()
        execs = table.execs
        execs.add_ref(ref(self))  # its raw graph stays while its nodes address ours
        mine = self._ledger
        extra = mine.extra
        if len(extra) > 2 and type(extra[2]) is reuse_box.ReuseBox:  # inline: no frame
            extra[2].unknown = True  # what its nodes launch changes: never parked
        nodes = None
        if self._nodes:
            reuse_box.mark_unknown(extra)  # disabled nodes: no longer known
            nodes = dict(self._nodes)
            for rec in set(nodes.values()):  # the exec's copies now come from ``graph``
                self._retire((rec.args, rec.keep))
            self._nodes.clear()
        retired = mine.retired  # the old list retired as it is (its owner, if any, stays in
        retired.append(extra)  # the new one): _retire's append, without its frame
        if len(retired) % RETIRE_CHECK == 0:
            self._retire_check()
        pending, was_taken, host_ids = self._pending, self._taken, self._host_ids
        self._pending = graph
        self._taken = taken
        mine.extra = [taken, extras, *extra[2:]]
        self._host_ids = None
        if exec_h is not None:
            refused = -1
            try:
                refused = fast.exec_update(exec_h, table.h, self, graph)
            finally:
                if refused:  # refused (or raised): as it was
                    self._pending, self._taken, mine.extra = pending, was_taken, extra
                    self._host_ids = host_ids
                    if nodes:
                        self._nodes.update(nodes)
                    if graph is not self.graph and graph is not pending:
                        execs.discard(self)  # the exec needs none of it
            if refused:
                return refused
        if pending is not None and pending is not graph and pending is not self.graph:
            self._let_go(pending)  # superseded before its nodes were paired
        return 0

    def _pair_update(self):
        """Pair the last update's nodes with the exec's (creation order, as CUDA pairs
        them): each pair gets one record, reached by either node. Returns the update graph
        when it was closed while it waited (the caller destroys it once it has the record it
        came for: its nodes then refuse), else None."""
        graph, self._pending = self._pending, None
        if graph is None:
            return None
        origin = reuse_box.origin_graph(self._ledger.extra, type(graph))
        if origin is None:
            self._pair(self.graph, graph, self._taken)
        else:  # a reused exec: its nodes are its origin graph's
            self._pair_copies(origin, graph, self._taken)
        if graph is not self.graph:  # keep what its nodes point at, not its node objects
            self._ledger.extra[0] = [tuple(e[1:] for e in d.values()) for d in self._taken]
            self._taken = []
        if graph is not self.graph:
            self._let_go(graph)  # paired: its raw graph is no longer needed here

    def _let_go(self, graph) -> None:
        """This exec no longer needs ``graph``'s raw graph: a closed graph is destroyed
        now if no other exec needs it (``cudaGraphDestroy``)."""
        graph.table.execs.discard(self)
        if graph.table.closed:
            graph.close()

    def _pair(self, old_graph, graph, taken) -> None:
        """Records for ``old_graph``'s nodes with ``graph``'s as twins, in creation order
        (``cudaGraphGetNodes``), bodies of conditional nodes too; each record starts from
        what the twin kept when the update took ``graph``."""
        old_table, table = old_graph.table, graph.table
        old_nodes = versions.graph_nodes(old_table.raw_handle)  # kept while we live
        new_nodes = versions.graph_nodes(table.raw_handle)
        for old_raw, new_raw in zip(old_nodes, new_nodes):
            old, new = old_table.node(old_raw), table.node(new_raw)
            source = _entry(taken, new, table)
            rec = old.exec_record(self.handle, source, self._retire_fn())
            self._nodes[id(old)] = rec
            if new is not old:
                if type(rec.args) is CapturedArgs:  # a kernel node's bytes, read back
                    rec.args = CapturedArgs.of(new)  # the bytes the update took, not the old ones
                rec.pair(new, self._nodes)
            for old_body, body in zip(old.inner_graphs(), new.inner_graphs()):
                self._pair(old_body, body, taken)


    def _pair_copies(self, origin, graph, taken) -> None:
        """Records for the nodes of ``origin`` (the graph a reused exec was instantiated
        from, whose node objects are copies of ``graph``'s: same class, same Python-side
        parameters) with ``graph``'s as twins, in creation order (``cudaGraphGetNodes``)."""
        otable, table = origin.table, graph.table
        pairs = zip(versions.graph_nodes(otable.raw_handle), versions.graph_nodes(table.raw_handle))
        mine = [] if graph is self.graph else versions.graph_nodes(self.graph.table.raw_handle)
        aliases = {}  # the exec's own graph's nodes, as after an update of any exec
        for i, (old_raw, new_raw) in enumerate(pairs):
            new, h = table.node(new_raw), int(old_raw)
            old = otable.nodes.get(h)
            if old is None or type(old) is not type(new):
                old = otable.register(new.copy_for(otable, h))
            rec = old.exec_record(self.handle, _entry(taken, new, table), self._retire_fn())
            self._nodes[id(old)] = rec
            if type(rec.args) is CapturedArgs:  # the bytes the update took
                rec.args = CapturedArgs.of(new)
            rec.pair(new, self._nodes)
            if mine:
                node = self.graph.table.node(mine[i])
                aliases[id(node)] = (node, rec)
        reuse_box.set_aliases(self._ledger.extra, aliases)

    def _from_parked(self, graph, flags: int) -> bool:
        """Make this exec from a parked one of ``graph``'s topology
        (:mod:`pycudagraph.graph.exec_reuse`): ``cuGraphExecUpdate`` of it with ``graph``.
        False, with nothing set up, where none is parked or the update was refused (the
        parked exec is then destroyed, ``cudaGraphExecDestroy``)."""
        table = graph.table
        if table.closed or table.dead:
            return False
        parked = exec_reuse.take(graph, flags)
        if parked is None:
            return False
        box = reuse_box.ReuseBox(graph, flags)
        self._keep(graph, box)
        self._raw = None
        table.execs.add(self)  # the raw graph stays should another thread close it
        refused = -1
        self._h = self._addr = parked.exec_h  # what a trace of the update names it by
        try:
            refused = fast.exec_update(parked.exec_h, table.h, self, graph)
        finally:
            if refused:
                table.execs.discard(self)
                exec_reuse.destroy(parked)
        if refused:
            return False
        box.follow(self._taken, self._nodes).reused(parked)
        self._fin = Release(self, exec_reuse.release_exec, box)
        exec_reuse.reused(parked.exec_h, parked.origin_h)
        self._pending = graph  # its nodes are paired with the origin's at the first per-node call
        return True


def _entry(taken: list, node, table) -> tuple:
    """What ``node`` (of ``table``) kept in the copies ``taken``: for a node whose object
    was made after they were taken, from a loaded graph's record, what it was added with
    (:meth:`NodeTable.as_added`); ``()`` for a node read back."""
    key = id(node)
    for d in taken:
        entry = d.get(key)
        if entry is not None and entry[0] is node:
            return entry[1:]
    return table.as_added(node) or ()
