"""Exec reuse: instantiate by updating a released exec of the same topology.

Instantiating a 1,000-node graph (``cudaGraphInstantiate``) costs about 1.7 ms on an H200;
updating an exec of the same topology with that graph's parameters (``cudaGraphExecUpdate``)
about 0.7 ms. So an exec that :meth:`Graph.instantiate <pycudagraph.Graph.instantiate>` made is
not destroyed when it is released (``exe.close()``, or collected): its handle is *parked*
here, and a later instantiate of a graph with the same signature makes one
``cuGraphExecUpdate`` (the driver twin of ``cudaGraphExecUpdate``) on it instead of
``cuGraphInstantiateWithFlags``. The exec returned is a fresh :class:`GraphExec` either way; a
trace shows the update where the instantiate was. A refused update destroys the parked exec
(``cudaGraphExecDestroy``) and instantiates as before.

CUDA names an exec's nodes, in ``cudaGraphExec*NodeSetParams`` and
``cudaGraphNodeSetEnabled``, by the nodes of the graph it was instantiated from, so an exec is
parked together with that raw graph (its *origin*): it is taken over when its
:class:`Graph` is destroyed (closed or collected) after the exec was released, if no node
of it was removed meanwhile (``cudaGraphGetNodes`` then matches what it was), and a reused
exec addresses the new graph's nodes through the origin's nodes in creation order.

What is parked holds no Python object: the exec and origin handles, the signature, and
(until the origin is taken) the origin's node handles and a weak reference to its table.
Nothing parked is launched; whatever its nodes pointed at may be freed, since the update
rewrites every node's parameters before any launch. Not parked: execs of graphs with
memory alloc/free nodes, conditional nodes or child graphs, execs made with
``device_launch=True`` or an upload stream, execs with a node disabled, execs whose graph
changed after instantiate, adopted execs. The cache is bounded (:func:`exec_reuse`), least
recently parked first out, keyed by device, thread-safe, and emptied at exit.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref

from .._cuda import call, rt, versions
from .._cuda.context import thread_state
from .._lifetime import release
from ..errors import ArgumentError
from ..nodes.base import NodeType

__all__ = ["exec_reuse", "signature", "stats", "clear", "ReuseBox", "ENV"]

#: Set to 0 to start with exec reuse off (``pcg.exec_reuse(True)`` turns it on).
ENV = "PYCUDAGRAPH_EXEC_REUSE"

_EXCLUDED = frozenset({NodeType.MEM_ALLOC, NodeType.MEM_FREE, NodeType.CONDITIONAL,
                       NodeType.CHILD_GRAPH})
_ENABLE_KINDS = frozenset({NodeType.KERNEL, NodeType.MEMCPY, NodeType.MEMSET})
_DEVICE_LAUNCH = int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagDeviceLaunch)


class _Settings:
    __slots__ = ("on", "per_signature", "max_execs", "max_nodes")

    def __init__(self):
        self.on = os.environ.get(ENV, "").strip() not in ("0", "false", "off", "no")
        self.per_signature = 4
        self.max_execs = 16
        self.max_nodes = 100_000


settings = _Settings()
_lock = threading.RLock()  # re-entrant: a finalizer may run inside a locked section
_lru: dict = {}  # id(parked) -> _Parked, least recently parked first
_by_key: dict = {}  # signature -> [_Parked ready for reuse], oldest first
_waiting: dict = {}  # origin raw graph handle -> _Parked whose origin is not taken yet
_owned: set = set()  # weak references to the tables of graphs pycudagraph destroys
_kind_ok: dict = {}  # node class -> whether its kind may be reused
_nodes_total = 0
#: How many parked execs are ready for reuse (read by ``GraphExec.instantiate``: 0 costs
#: nothing more there).
ready = 0


class _Parked:
    """A parked exec: raw handles and the signature only."""

    __slots__ = ("exec_h", "origin_h", "key", "raw", "tref", "handles")

    def __init__(self, exec_h: int, origin_h: int, key: tuple, raw: int = 0, tref=None,
                 handles: tuple = ()):
        self.exec_h, self.origin_h, self.key = exec_h, origin_h, key
        self.raw, self.tref, self.handles = raw, tref, handles


class ReuseBox(list):
    """The finalizer's box of an exec that may be parked (``box[0]``: its handle, 0 until
    the instantiate call fills it); also the exec's ledger owner, so its update code finds
    it. Holds the exec's graph and records while the exec holds them, nothing after."""

    __slots__ = ("graph", "flags", "device", "stamp", "records", "origin_h", "origin", "key",
                 "unknown")

    def __init__(self, graph, flags: int):
        super().__init__((0,))
        self.graph, self.flags, self.device = graph, flags, thread_state.device
        self.stamp = self.records = self.origin = self.key = None
        self.origin_h = 0
        self.unknown = False  # records were dropped: which nodes were disabled is unknown

    def follow(self, taken: list, records) -> "ReuseBox":
        """The exec's graph dicts as taken (``taken[0]``: unchanged while the graph is) and its
        record dict (nodes it may have disabled)."""
        self.stamp = taken[0] if taken else None
        self.records = records
        return self

    def reused(self, parked: _Parked) -> "ReuseBox":
        """This exec is ``parked``'s handle, which addresses nodes through its origin."""
        self[0], self.origin_h, self.key = parked.exec_h, parked.origin_h, parked.key
        return self


# ----------------------------------------------------------------------------------
# Settings

def exec_reuse(on: bool | None = None, *, per_signature: int | None = None,
               max_execs: int | None = None, max_nodes: int | None = None) -> bool:
    """Turn exec reuse on or off, set its bounds; returns whether it was on.

    With reuse on (the default; ``PYCUDAGRAPH_EXEC_REUSE=0`` starts with it off), an exec
    released (closed or collected) is kept with its origin graph, and an instantiate of a
    graph with the same topology makes one ``cuGraphExecUpdate`` (``cudaGraphExecUpdate``)
    on it instead of ``cuGraphInstantiateWithFlags``. Turning it off destroys what is kept
    (``cudaGraphExecDestroy``, ``cudaGraphDestroy``).

    Parameters
    ----------
    on : bool, optional
        None leaves it as it is.
    per_signature : int, optional
        Execs kept per topology (default 4).
    max_execs : int, optional
        Execs kept in all (default 16).
    max_nodes : int, optional
        Nodes of all kept execs together (default 100,000): bounds the device memory they hold.
    """
    was = settings.on
    for name, value in (("per_signature", per_signature), ("max_execs", max_execs),
                        ("max_nodes", max_nodes)):
        if value is not None:
            if type(value) is not int or value < 0:
                raise ArgumentError(f"exec_reuse: {name} must be an int >= 0, got {value!r}")
            setattr(settings, name, value)
    if on is not None:
        if type(on) is not bool:
            raise ArgumentError(f"exec_reuse: on must be a bool or None, got {on!r}")
        settings.on = on
    if not settings.on:
        clear()
    else:
        with _lock:
            _trim(None)
    return was


def stats() -> dict:
    """How many execs are kept: ``{"ready": n, "waiting": n, "nodes": n}`` (waiting: their
    origin graph is still in use). No CUDA call."""
    with _lock:
        return {"ready": ready, "waiting": len(_waiting), "nodes": _nodes_total}


def clear() -> None:
    """Destroy every kept exec and origin graph (``cudaGraphExecDestroy``, ``cudaGraphDestroy``)."""
    with _lock:
        gone = list(_lru.values())
        for p in gone:
            _remove(p)
    for p in gone:
        _destroy(p)


# ----------------------------------------------------------------------------------
# The signature

def signature(graph, flags: int, device=None) -> tuple | None:
    """The reuse key of ``graph`` instantiated with ``flags``: ``(device, flags, nodes,
    edges, node classes in order)``, or None where it is not reused (a node kind excluded,
    an empty graph, or nodes pycudagraph has not read yet). From the graph's node table and
    two counts (``cudaGraphGetNodes``, ``cudaGraphGetEdges`` asked for their counts only)."""
    table = graph.table
    kinds = tuple(map(type, table.nodes.values()))
    for cls in frozenset(kinds):
        ok = _kind_ok.get(cls)
        if ok is None:
            ok = _kind_ok[cls] = getattr(cls, "type", NodeType.OTHER) not in _EXCLUDED
        if not ok:
            return None
    n = len(kinds)
    raw = table.raw_handle
    if not n or _node_count(raw) != n:  # nodes not read yet (captured): not known here
        return None
    return (thread_state.device if device is None else device, flags, n, _edge_count(raw),
            kinds)


def _node_count(raw) -> int:
    return int(call(rt.cudaGraphGetNodes, raw, 0)[-1])


def _edge_count(raw) -> int:
    fn = rt.cudaGraphGetEdges
    if versions.BINDINGS_MAJOR < 13:  # the plain 12.x form refuses edges with data
        fn = getattr(rt, "cudaGraphGetEdges_v2", fn)
    return int(call(fn, raw, 0)[-1])


def _node_handles(raw) -> tuple:
    return tuple(int(h) for h in versions.graph_nodes(raw))


def _enabled(exec_h: int, node_h: int) -> bool:
    return bool(call(rt.cudaGraphNodeGetEnabled, rt.cudaGraphExec_t(exec_h),
                     rt.cudaGraphNode_t(node_h)))


# ----------------------------------------------------------------------------------
# Park, take, destroy

def new_box(graph, flags: int) -> ReuseBox | None:
    """The finalizer box of an exec of ``graph`` about to be instantiated with ``flags``, if
    it may be parked when released; None where reuse is off or ``device_launch`` is set."""
    if not settings.on or flags & _DEVICE_LAUNCH:
        return None
    return ReuseBox(graph, flags)


def release_exec(box: ReuseBox) -> None:
    """The finalizer of an exec that may be parked: park it, else ``cudaGraphExecDestroy``
    (and ``cudaGraphDestroy`` of its origin where that was taken). Never raises."""
    h = box[0]
    if not h:
        return
    box[0] = 0
    try:
        done = settings.on and _park(box, h)
    except Exception:
        done = False
    origin = box.origin_h
    box.graph = box.stamp = box.records = box.origin = None
    if not done:
        _destroy(_Parked(h, origin, ()))


def _park(box: ReuseBox, h: int) -> bool:
    if box.unknown:
        return False
    if box.origin_h:  # a reused exec: its origin is ours, and its topology the key's
        if not _all_enabled(box, h):
            return False
        return _insert(_Parked(h, box.origin_h, box.key))
    graph = box.graph
    table = graph.table
    tref = weakref.ref(table)
    if table.dead or tref not in _owned or box.stamp is not table.ledger.held:
        return False  # not ours to take, or changed since the exec took it
    key = signature(graph, box.flags, box.device)
    if key is None or table.h in _waiting:
        return False
    handles = _node_handles(table.raw_handle)
    if len(handles) != key[2] or not _all_enabled(box, h):
        return False
    return _insert(_Parked(h, 0, key, table.h, tref, handles))


def _all_enabled(box: ReuseBox, h: int) -> bool:
    """No node the exec has a record of is disabled (``cudaGraphNodeGetEnabled``)."""
    records = box.records
    if not records:
        return True
    for rec in set(records.values()):
        if rec.node.type in _ENABLE_KINDS and not _enabled(h, rec.node_h):
            return False
    return True


def take(graph, flags: int) -> _Parked | None:
    """A parked exec whose signature is ``graph``'s (removed from the cache), or None."""
    if not ready or not settings.on:
        return None
    key = signature(graph, flags)
    if key is None:
        return None
    with _lock:
        parked = _by_key.get(key)
        if not parked:
            return None
        p = parked[-1]  # the most recently parked
        _remove(p)
    return p


def discard(p: _Parked) -> None:
    """``p`` was refused (or not wanted): ``cudaGraphExecDestroy`` and ``cudaGraphDestroy``."""
    _destroy(p)


def graph_release(graph, raw):
    """The finalizer of a graph pycudagraph owns (:func:`destroy_graph` of its raw graph)."""
    tref = weakref.ref(graph.table)
    _owned.add(tref)
    return release(graph, destroy_graph, (raw, tref))


def destroy_graph(handle: tuple) -> None:
    """``cudaGraphDestroy`` of an owned graph's raw graph, unless a parked exec waits for
    it as its origin and no node of it was removed since: then that exec is ready for
    reuse, the raw graph its origin."""
    raw, tref = handle
    _owned.discard(tref)
    p = None
    if _waiting:
        h = int(raw)
        with _lock:
            p = _waiting.get(h)
            if p is not None and p.tref is tref:
                _remove(p)
            else:
                p = None
    if p is not None:
        try:
            ok = settings.on and _node_handles(raw)[:len(p.handles)] == p.handles
        except Exception:
            ok = False
        if ok:  # kept, or destroyed with its new origin by the bounds
            p.origin_h, p.raw, p.tref, p.handles = int(raw), 0, None, ()
            _insert(p)
            return
        _destroy(_Parked(p.exec_h, 0, ()))
    rt.cudaGraphDestroy(raw)


def mark_unknown(extra: list) -> None:
    """The exec whose ledger ``extra`` this is drops its records: which of its nodes are
    disabled is no longer known, so it is not parked."""
    box = extra[2] if len(extra) > 2 else None
    if type(box) is ReuseBox:
        box.unknown = True


def origin_graph(extra: list, cls):
    """The origin graph (a :class:`Graph` of class ``cls`` wrapping it, made once) through
    which the exec whose ledger ``extra`` this is addresses its nodes; None for an exec
    that addresses them through its own graph."""
    box = extra[2] if len(extra) > 2 else None
    if type(box) is not ReuseBox or not box.origin_h:
        return None
    if box.origin is None:
        box.origin = cls.wrap(box.origin_h)
    return box.origin


# ----------------------------------------------------------------------------------
# The cache (callers hold _lock)

def _insert(p: _Parked) -> bool:
    """Keep ``p``, then trim to the bounds; whether ``p`` is still kept."""
    global ready, _nodes_total
    with _lock:
        _lru[id(p)] = p
        if p.origin_h:
            _by_key.setdefault(p.key, []).append(p)
            ready += 1
        else:
            _waiting[p.raw] = p
        _nodes_total += p.key[2]
        _trim(p.key)
        return id(p) in _lru


def _remove(p: _Parked) -> None:
    global ready, _nodes_total
    if _lru.pop(id(p), None) is None:
        return
    _nodes_total -= p.key[2]
    if p.origin_h:
        same = _by_key.get(p.key)
        if same is not None:
            same.remove(p)
            if not same:
                del _by_key[p.key]
        ready -= 1
    elif _waiting.get(p.raw) is p:
        del _waiting[p.raw]


def _trim(key) -> None:
    evicted = []
    same = _by_key.get(key) if key is not None else None
    while same and len(same) > settings.per_signature:
        evicted.append(same[0])
        _remove(same[0])
        same = _by_key.get(key)
    while _lru and (len(_lru) > settings.max_execs or _nodes_total > settings.max_nodes):
        p = next(iter(_lru.values()))
        evicted.append(p)
        _remove(p)
    for p in evicted:
        _destroy(p)


def _destroy(p: _Parked) -> None:
    """``cudaGraphExecDestroy`` of the exec, then ``cudaGraphDestroy`` of an origin that was
    taken. Never raises."""
    try:
        rt.cudaGraphExecDestroy(rt.cudaGraphExec_t(p.exec_h))
    except Exception:
        pass
    if p.origin_h:
        try:
            rt.cudaGraphDestroy(rt.cudaGraph_t(p.origin_h))
        except Exception:
            pass


@atexit.register
def _at_exit() -> None:
    """Nothing more is parked; what is kept is destroyed while CUDA is still up."""
    settings.on = False
    try:
        clear()
    except Exception:
        pass
