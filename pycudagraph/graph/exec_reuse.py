"""Exec reuse: instantiate by updating a released exec of the same topology.

Instantiating a 1,000-node graph (``cudaGraphInstantiate``) costs about 1.7 ms on an H200,
updating an exec of that topology (``cudaGraphExecUpdate``) about 0.7 ms. So an exec that
:meth:`Graph.instantiate <pycudagraph.Graph.instantiate>` made is not destroyed when it is
released (``exe.close()``, or collected) but *parked* here, and a later instantiate of a
graph with the same signature makes one ``cuGraphExecUpdate`` (the driver twin of
``cudaGraphExecUpdate``) on it instead of ``cuGraphInstantiateWithFlags``: a fresh
:class:`GraphExec` either way, the update in the trace. A refused update destroys the
parked exec (``cudaGraphExecDestroy``) and instantiates as before.

CUDA names an exec's nodes (``cudaGraphExec*NodeSetParams``, ``cudaGraphNodeSetEnabled``) by
the nodes of the graph it was instantiated from, so an exec is parked with that raw graph
(its *origin*), taken when its :class:`Graph` is destroyed (closed or collected) if no node
of it was removed meanwhile (``cudaGraphGetNodes`` matches); a reused exec addresses the new
graph's nodes through the origin's, in creation order.

Parked are raw handles, the signature and (until the origin is taken) its node handles
and a weak reference to its table: no Python object (user objects its graph retained stay
with the exec). Nothing parked is launched, so what its nodes pointed at may be freed: the
update rewrites every node's parameters before any launch. Parked are execs of graphs of
kernel and empty nodes only (:mod:`~pycudagraph.graph.reuse_signature` says why); never
parked: ``device_launch=True`` or an upload stream, a disabled node, a graph changed after
instantiate or holding user objects, adopted execs. Reads made while parking (a
finalizer's) are not traced; the update of a reused exec is. Bounded
(:func:`exec_reuse`), least recently parked first out, keyed by device, thread-safe,
emptied at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import weakref

from .._cuda import check, rt
from .._lifetime import release
from ..errors import ArgumentError
from . import reuse_signature as sig
from .reuse_box import ReuseBox
from .reuse_signature import signature

__all__ = ["exec_reuse", "paused", "signature", "stats", "clear", "origin_of", "ReuseBox", "ENV"]

#: Set to 0 to start with exec reuse off (``pcg.exec_reuse(True)`` turns it on).
ENV = "PYCUDAGRAPH_EXEC_REUSE"

_DEVICE_LAUNCH = int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagDeviceLaunch)


class _Settings:
    __slots__ = ("on", "per_signature", "max_execs", "max_nodes")

    def __init__(self):
        self.on = os.environ.get(ENV, "").strip() not in ("0", "false", "off", "no")
        self.per_signature, self.max_execs, self.max_nodes = 2, 8, 20_000


settings = _Settings()
_lock = threading.RLock()  # re-entrant: a finalizer may run inside a locked section
_local = threading.local()
_lru: dict = {}  # id(parked) -> _Parked, least recently parked first
_by_key: dict = {}  # signature -> [_Parked ready for reuse], oldest first
_waiting: dict = {}  # origin raw graph handle -> _Parked whose origin is not taken yet
_owned: set = set()  # weak references to the tables of graphs pycudagraph destroys
_nodes_total, ready = 0, 0  # ready: read by GraphExec.instantiate (0: nothing more to do)
_sizes: dict = {}  # node count -> how many ready execs have it (take's first, free test)
_live: dict = {}  # exec handle of a live reused exec -> its origin raw graph handle


class _Parked:
    """A parked exec: raw handles, the signature, and the kernels its nodes and its origin's
    launch (``(origin's, exec's)``: their code stays loaded while a node names it)."""
    __slots__ = ("exec_h", "origin_h", "key", "raw", "tref", "handles", "kernels")

    def __init__(self, exec_h: int, origin_h: int, key: tuple, raw: int = 0, tref=None,
                 handles: tuple = (), kernels: tuple = ((), ())):
        self.exec_h, self.origin_h, self.key = exec_h, origin_h, key
        self.raw, self.tref, self.handles, self.kernels = raw, tref, handles, kernels


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
        Execs kept per topology (default 2).
    max_execs : int, optional
        Execs kept in all (default 8).
    max_nodes : int, optional
        Nodes of all kept execs together (default 20,000): bounds the device memory they hold.
    """
    bounds = {"per_signature": per_signature, "max_execs": max_execs, "max_nodes": max_nodes}
    for name, value in bounds.items():
        if value is not None and (type(value) is not int or value < 0):
            raise ArgumentError(f"exec_reuse: {name} must be an int >= 0, got {value!r}")
    if on is not None and type(on) is not bool:
        raise ArgumentError(f"exec_reuse: on must be a bool or None, got {on!r}")
    was = settings.on
    for name, value in bounds.items():
        if value is not None:
            setattr(settings, name, value)
    settings.on = was if on is None else on
    if not settings.on:
        clear()
    with _lock:
        _trim(None)
    return was


@contextlib.contextmanager
def paused():
    """No exec is reused in this thread inside the block (an instantiate whose node copies
    CUPTI watches, say); released execs are still kept."""
    _local.paused = getattr(_local, "paused", 0) + 1
    try:
        yield
    finally:
        _local.paused -= 1


def stats() -> dict:
    """``{"ready": n, "waiting": n, "nodes": n}`` kept (waiting: for their origin graph)."""
    with _lock:
        return {"ready": ready, "waiting": len(_waiting), "nodes": _nodes_total}


def clear() -> None:
    """Destroy every kept exec and origin graph (``cudaGraphExecDestroy``, ``cudaGraphDestroy``)."""
    with _lock:
        gone = list(_lru.values())
        for p in gone:
            _remove(p)
    for p in gone:
        destroy(p)


def origin_of(exec_h: int) -> int:
    """The origin raw graph of a live exec made by reuse (its nodes are that graph's, not
    those of the graph it was instantiated with), or 0 for any other exec handle."""
    return _live.get(exec_h, 0)


def reused(exec_h: int, origin_h: int) -> None:
    """Exec ``exec_h`` was made by reuse and lives (:func:`origin_of` says so until released)."""
    _live[exec_h] = origin_h


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
    if box.origin_h:
        _live.pop(h, None)
    try:
        done = settings.on and _park(box, h)
    except Exception:
        done = False
    origin, wrapper = box.origin_h, box.origin
    box.graph = box.stamp = box.records = box.origin = box.aliases = None
    if wrapper is not None:  # the origin's wrapper, this exec's alone: its nodes and the
        try:  # arguments their records copied go now, not when the collector finds them
            wrapper.table.kill("was the origin of an exec now released")
        except Exception:  # noqa: BLE001
            pass
    if not done:
        destroy(_Parked(h, origin, ()))
    box.kernels = ()  # the origin's code may go once its graph is destroyed


def _park(box: ReuseBox, h: int) -> bool:
    graph = box.graph
    table = graph.table
    if box.unknown or table.dead or box.stamp is not table.ledger.held:
        return False  # updated, or its graph changed since the exec took it
    if box.origin_h:  # a reused exec: its origin is ours, and its topology the key's
        return _all_enabled(box, h) and _insert(
            _Parked(h, box.origin_h, box.key, kernels=(box.kernels, _kernels(table))))
    tref = weakref.ref(table)
    if tref not in _owned:
        return False  # not ours to take
    key = signature(graph, box.flags, box.device, sig.quiet)  # a finalizer: not traced
    if key is None or table.h in _waiting:
        return False
    handles = sig.node_handles(table.raw_handle, sig.quiet)
    if len(handles) != key[2] or not _all_enabled(box, h):
        return False
    mine = _kernels(table)
    return _insert(_Parked(h, 0, key, table.h, tref, handles, (mine, mine)))


def _kernels(table) -> tuple:
    """The kernels ``table``'s nodes launch (a captured node's code is its maker's to keep)."""
    found = {}
    for node in table.nodes.values():
        k = getattr(node, "kernel", None)
        if k is not None:
            found[id(k)] = k
    return tuple(found.values())


def _all_enabled(box: ReuseBox, h: int) -> bool:
    """No node the exec has a record of is disabled (``cudaGraphNodeGetEnabled``)."""
    return all(sig.enabled(h, rec.node_h, sig.quiet) for rec in set((box.records or {}).values())
               if rec.node.can_disable)


def take(graph, flags: int) -> _Parked | None:
    """A parked exec whose signature is ``graph``'s (removed from the cache), or None."""
    if not ready or not settings.on or getattr(_local, "paused", 0) or check.capture_watchers:
        return None  # (no update, nor destroy of a refused exec, inside a capture)
    if len(graph.table.nodes) not in _sizes:  # none of its size: no driver call, no walk
        return None
    key = signature(graph, flags)
    if key is None:
        return None
    with _lock:
        parked = _by_key.get(key)
        p = parked[-1] if parked else None  # the most recently parked
        if p is not None:
            _remove(p)
    return p


def graph_release(graph, raw):
    """The finalizer of a graph pycudagraph owns (:func:`destroy_graph` of its raw graph).
    From now on its table holds it weakly (``NodeTable.owned``): no reference cycle keeps a
    dropped graph, so it goes at once."""
    table = graph.table
    table.owned()
    _owned.add(tref := weakref.ref(table))
    return release(graph, destroy_graph, (raw, tref))


def destroy_graph(handle: tuple) -> None:
    """``cudaGraphDestroy`` of an owned graph's raw graph, unless a parked exec waits for
    it as its origin and no node of it was removed since: then that exec is ready for
    reuse, the raw graph its origin. A graph collected (not closed) has its table emptied
    first (``NodeTable.kill``): its nodes refuse from then on, and what they kept alive
    (arguments, capture pools) goes now, not when the collector finds the nodes."""
    raw, tref = handle
    _owned.discard(tref)
    table = tref()
    if table is not None and not table.dead:
        try:
            table.kill("was collected")
        except Exception:  # noqa: BLE001 - a finalizer never raises; the graph goes anyway
            pass
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
        try:  # no node of the origin removed since: the exec's nodes still line up
            ok = settings.on and sig.node_handles(raw, sig.quiet)[:len(p.handles)] == p.handles
        except Exception:
            ok = False
        if ok:  # kept, or destroyed with its new origin by the bounds
            p.origin_h, p.raw, p.tref, p.handles = int(raw), 0, None, ()
            _insert(p)
            return
        destroy(_Parked(p.exec_h, 0, ()))
    rt.cudaGraphDestroy(raw)


def _insert(p: _Parked) -> bool:
    """Keep ``p``, then trim to the bounds; whether ``p`` is still kept."""
    global ready, _nodes_total
    with _lock:
        _lru[id(p)] = p
        if p.origin_h:
            _by_key.setdefault(p.key, []).append(p)
            ready += 1
            _sizes[p.key[2]] = _sizes.get(p.key[2], 0) + 1
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
        n = p.key[2]
        if _sizes[n] > 1:
            _sizes[n] -= 1
        else:
            del _sizes[n]
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
        destroy(p)


def destroy(p: _Parked) -> None:
    """``cudaGraphExecDestroy`` of the exec, then ``cudaGraphDestroy`` of an origin that was
    taken. Never raises."""
    try:
        rt.cudaGraphExecDestroy(rt.cudaGraphExec_t(p.exec_h))
        if p.origin_h:
            rt.cudaGraphDestroy(rt.cudaGraph_t(p.origin_h))
    except Exception:
        pass


@atexit.register
def _at_exit() -> None:  # nothing more is parked; what is kept goes while CUDA is up
    settings.on = False
    try:
        clear()
    except Exception:
        pass
