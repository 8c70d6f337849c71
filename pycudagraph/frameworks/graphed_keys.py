"""The key table of a graphed callable: its captured graphs, the keys that run eagerly and
why, the captures in flight, the pools the graphs allocate from, the memory budget.

A key is in at most one of three places: :attr:`KeyTable.graphs` (captured: replayed),
:attr:`KeyTable.eager` (its capture failed with ``fallback="eager"``, or its graph went
beyond ``memory_budget``: run eagerly from then on, with one warning) or
:attr:`KeyTable.pending` (``capture="background"``: a side thread is capturing it; calls run
eagerly until it is done). Every change of the table calls :attr:`KeyTable.on_change` and
tells :attr:`KeyTable.watch` (the weights its graphs read, :mod:`.weight_watch`) whether any
graph is left.

Pools: with ``pool="private"`` every key captures into a :class:`~.pools.CapturePool` of
its own. With ``pool="shared"`` every key captures into one pool (scratch memory is
shared: keys are replayed one at a time, and a launch from another stream waits for the
last launch, :class:`Handoff`), and, unless outputs are copied anyway
(``copy_outputs=True``), each graph ends by copying its outputs into arrays of a second
pool that no capture allocates from, so no key's replay overwrites another key's outputs.

Memory is what PyTorch and CuPy hold for the pools of the keys in :attr:`graphs`
(:meth:`CapturePool.reserved_bytes <.pools.CapturePool.reserved_bytes>`: PyTorch's
``memory_snapshot`` segments of each pool, CuPy's ``MemoryPool.total_bytes``), each pool
counted once. No CUDA call here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.device import device as device_scope
from ..runtime.stream import PER_THREAD, Event, Stream
from .arrays import array_info, substitute
from .pools import CapturePool
from . import loaded

__all__ = ["GraphedStats", "GraphedEntry", "Handoff", "KeyTable", "pools_bytes"]


@dataclass
class GraphedStats:
    """Counters of a graphed callable: calls, captures, replays (graph launches),
    ``set_params`` calls made to rebind, inputs rebound, inputs copied (they overlapped
    an output), checks run against eager, calls run eagerly (refused keys, keys whose
    capture failed, is in flight or went beyond the memory budget), captures that failed,
    graphs evicted to stay within the memory budget."""

    calls: int = 0
    captures: int = 0
    replays: int = 0
    set_params: int = 0
    rebound_inputs: int = 0
    copied_inputs: int = 0
    checks: int = 0
    eager_calls: int = 0
    failed_captures: int = 0
    evictions: int = 0


class Handoff:
    """How a launch from another stream is ordered after earlier ones. One per key with
    ``pool="private"`` (CUDA orders the launches of one exec itself); one per device for
    every key of a shared pool, whose graphs share scratch memory.

    ``event`` / ``on``: recorded after each call's output copies (``copy_outputs=True``) on
    the stream ``on``; the next launch from another stream waits for it. A shared pool
    without copies orders lazily (:meth:`follow`): it remembers the stream of the last
    launch and only when a launch comes from another stream records an event there (then,
    after everything queued on it) for the new stream to wait for; a launch on
    ``cudaStreamPerThread``, which names another stream in each thread, records one at once
    (:meth:`after`)."""

    __slots__ = ("event", "on", "shared", "device", "last", "tail")

    def __init__(self, shared: bool = False, device: int = 0):
        self.event = None
        self.on = None
        self.shared = shared
        self.device = device
        self.last = None  # the stream handle of the last launch (shared pools)
        self.tail = None  # the event the next launch from another stream waits for

    def follow(self, handle: int) -> None:
        """Order a launch about to go on stream ``handle`` after the last launch of the
        shared pool's keys (``cudaEventRecord`` on that launch's stream and
        ``cudaStreamWaitEvent`` here, only when the stream differs). Nothing for a private
        pool or the same stream."""
        last = self.last
        if not self.shared or last is None or (last == handle and handle != PER_THREAD):
            self.last = handle
            return
        if self.tail is None:
            with device_scope(self.device):
                self.tail = Event(timing=False)
        if last != PER_THREAD:  # a per-thread launch recorded the tail right after itself
            self.tail.record(last)
        Stream.wrap(handle).wait(self.tail)
        self.last = handle

    def launch(self, exe, stream, handle: int) -> None:
        """``exe.launch(stream)`` (``cuGraphLaunch``) ordered as :meth:`follow` and
        :meth:`after` order it (``handle``: the stream's raw handle); a repeat on the stream
        of the last launch, where both do nothing, calls neither."""
        if handle != self.last or handle == PER_THREAD:
            self.follow(handle)
            exe.launch(stream)
            self.after(handle)
        else:
            exe.launch(stream)

    def after(self, handle: int) -> None:
        """After a shared pool's launch on ``cudaStreamPerThread``: record the tail there
        (``cudaEventRecord``). Nothing otherwise."""
        if self.shared and handle == PER_THREAD:
            if self.tail is None:
                with device_scope(self.device):
                    self.tail = Event(timing=False)
            self.tail.record(handle)


class GraphedEntry:
    """One captured graph of a graphed callable: ``graph``, ``exec``, its ``pool`` (and
    ``outputs_pool``, the pool its outputs live in when a shared pool copies them out), the
    static ``outputs``, the rebinding ``plan`` (``plan.slots``: addresses of each input in
    the graph), ``calls``, ``refused`` (why the key runs eagerly or raises, or ""), and
    ``nbytes`` (the bytes its capture added to its pools, when measured)."""

    def __init__(self, key, graph, exe, pool, outputs, plan, frameworks, device,
                 outputs_pool=None):
        self.key = key
        self.graph = graph
        self.exec = exe
        self.pool = pool
        self.outputs_pool = outputs_pool
        self.outputs = outputs
        self.plan = plan
        self.frameworks = frameworks
        self.device = device
        self.calls = 0
        self.refused = ""
        self.rebind_checked = False
        self.needs_check = False  # compare the next replay with eager (background captures)
        self.warned = False
        self.nbytes = 0
        self.last_used = 0  # the callable's call count at its latest call (LRU)
        self.bound = ()  # the arguments the exec points at now (kept alive)
        self.order = Handoff()
        outs = []
        substitute(outputs, lambda a: outs.append(array_info(a)) or a)
        self.output_ranges = [(o.lo, o.hi) for o in outs]

    @property
    def handoff(self):
        """The event after this key's last launch (and output copies), or None."""
        return self.order.event

    @property
    def handoff_on(self):
        """The stream handle :attr:`handoff` was recorded on, or None."""
        return self.order.on

    def pools(self) -> tuple:
        """The pools this graph holds. No CUDA call."""
        return tuple(p for p in (self.pool, self.outputs_pool) if p is not None)

    def __repr__(self) -> str:
        return (f"<GraphedEntry {len(self.graph.nodes)} nodes, {self.calls} calls, "
                f"input slots {self.plan.slots}{', refused' if self.refused else ''}>")


def pools_bytes(pools) -> dict:
    """``{id(pool): bytes}`` for each pool: PyTorch's segments of it (one
    ``torch.cuda.memory_snapshot()`` for all) plus CuPy's ``total_bytes()``. No CUDA call
    here (the frameworks' bookkeeping)."""
    pools = list({id(p): p for p in pools}.values())
    by_torch: dict = {}
    torch = loaded.torch()
    if torch is not None and any(p.torch_id is not None for p in pools):
        for seg in torch.cuda.memory_snapshot():
            pid = tuple(seg.get("segment_pool_id", ()))
            by_torch[pid] = by_torch.get(pid, 0) + int(seg["total_size"])
    out = {}
    for p in pools:
        cp = p.cupy_pool
        out[id(p)] = by_torch.get(p.torch_id, 0) + (int(cp.total_bytes()) if cp is not None else 0)
    return out


def held_bytes(entries, sizes: dict) -> int:
    """The bytes of the pools ``entries`` hold, each pool once (``sizes``: from
    :func:`pools_bytes`). No CUDA call."""
    return sum(sizes.get(i, 0) for i in {id(p) for e in entries for p in e.pools()})


def beyond_budget(budget: int, alone: int, total: int = 0) -> str:
    """Why a key's graph does not fit ``memory_budget``: its own pools (``alone`` bytes)
    are larger than the budget, else the pools together would come to ``total`` bytes.
    No CUDA call."""
    if alone > budget:
        return f"its graph alone takes {alone} bytes of pools, beyond memory_budget={budget}"
    return f"its graph would take the pools to {total} bytes, beyond memory_budget={budget}"


class KeyTable:
    """Graphs, eager keys and captures in flight of one graphed callable; the pools new
    captures use; the memory budget. Callers hold the callable's lock. No CUDA call."""

    def __init__(self, pool: str, copy_outputs: bool, budget, over_budget: str):
        self.graphs: dict = {}
        self.eager: dict = {}  # key -> [why, warned]
        self.pending: dict = {}  # key -> the background job capturing it
        self.failed: dict = {}  # key -> the error of a background capture (fallback="raise")
        self.discarded: dict = {}  # key -> background captures thrown away: weights moved
        self.shared = pool == "shared"
        self.copy_outputs = copy_outputs
        self.budget = budget
        self.over_budget = over_budget
        self.generation = 0  # bumped by clear(): a capture begun before is thrown away
        self.orders: dict = {}  # device -> the shared pool's Handoff (every key's launches)
        self._pool = None
        self._outputs_pool = None
        self.on_change = _nothing
        self.watch = None  # the WeightWatch of the module the graphs read, or None

    # Pools ---------------------------------------------------------------------------

    def pools_for_capture(self) -> tuple:
        """(pool to capture into, pool for the copied-out outputs or None).

        The first capture into a new shared pool copies nothing out: no other graph's
        scratch is in that pool, and later captures cannot place theirs over its outputs
        (the key holds them, so the framework's allocator never hands their bytes out
        again). Every later capture into the pool may put its outputs where an earlier
        key's scratch is, so it copies them into the outputs pool."""
        if not self.shared:
            return CapturePool(), None
        if self._pool is None:
            self._pool = CapturePool()
            return self._pool, None
        if self.copy_outputs:
            return self._pool, None
        if self._outputs_pool is None:
            self._outputs_pool = CapturePool()
        return self._pool, self._outputs_pool

    def held_pools(self) -> list:
        """The pools the captured keys hold, each once."""
        return list({id(p): p for e in self.graphs.values() for p in e.pools()}.values())

    def memory(self) -> dict:
        """``{"total": bytes, "shared": bytes, "pools": n, "keys": {key: bytes}}``: the
        bytes of every pool the keys hold (each once); of the shared pools; and per key,
        its private pool's bytes, or in a shared pool what its capture added. No CUDA call."""
        held = self.held_pools()
        sizes = pools_bytes(held)
        shared = {id(p) for p in (self._pool, self._outputs_pool) if p is not None}
        keys = {}
        for key, e in self.graphs.items():
            own = [id(p) for p in e.pools() if id(p) not in shared]
            keys[key] = sum(sizes[i] for i in own) if own else e.nbytes
        return {"total": sum(sizes.values()), "pools": len(held), "keys": keys,
                "shared": sum(n for i, n in sizes.items() if i in shared)}

    def shared_bytes(self) -> int:
        """The bytes of the shared pools now (0 with private pools)."""
        pools = [p for p in (self._pool, self._outputs_pool) if p is not None]
        return sum(pools_bytes(pools).values()) if pools else 0

    # Keys ----------------------------------------------------------------------------

    def admit(self, entry, stats) -> str:
        """Add a captured key; with a budget, evict least recently used keys
        (``over_budget="evict"``) or refuse this one until the pools fit. Returns "" or why
        the key was refused (then it is in :attr:`eager`). Evicts only when that brings the
        pools within the budget, and only the keys needed: a key whose pool another key
        still holds frees nothing when it goes, so it stays."""
        if self.shared:
            order = self.orders.get(entry.device)
            if order is None:
                order = self.orders[entry.device] = Handoff(True, entry.device or 0)
            entry.order = order
        self.graphs[entry.key] = entry
        self._changed()
        if self.budget is None:
            return ""
        sizes = pools_bytes(self.held_pools())  # one snapshot for every count below
        total = held_bytes(self.graphs.values(), sizes)
        victims = (self._victims(entry, sizes)
                   if total > self.budget and self.over_budget == "evict" else ())
        for victim in victims:
            del self.graphs[victim.key]
            stats.evictions += 1
        if victims:
            total = held_bytes(self.graphs.values(), sizes)
            self._changed()
        if total <= self.budget:
            return ""
        del self.graphs[entry.key]
        why = beyond_budget(self.budget, held_bytes((entry,), sizes), total)
        self.eager[entry.key] = [why, False]
        self._changed()
        return why

    def _victims(self, entry, sizes: dict) -> list:
        """The least recently used keys whose eviction brings the pools within the
        budget, none more; [] when evicting every other key would not."""
        others = sorted((e for e in self.graphs.values() if e is not entry),
                        key=lambda e: e.last_used)
        kept = list(self.graphs.values())
        for n, victim in enumerate(others, 1):
            kept.remove(victim)
            if held_bytes(kept, sizes) <= self.budget:
                break
        else:
            return []
        victims = others[:n]
        for victim in reversed(victims[:-1]):  # the most recently used back first
            if held_bytes(kept + [victim], sizes) <= self.budget:
                kept.append(victim)
                victims.remove(victim)
        return victims

    def run_eagerly(self, key, why: str) -> None:
        """From now on ``key`` runs eagerly, for the reason ``why``: its graph is dropped and
        a background capture of it in flight is thrown away when it ends."""
        self.graphs.pop(key, None)
        self.pending.pop(key, None)
        self.eager[key] = [why, False]
        self._changed()

    def clear(self) -> None:
        """Forget every key and pool; captures in flight are thrown away when they end."""
        self.graphs.clear()
        self.eager.clear()
        self.pending.clear()
        self.failed.clear()
        self.discarded.clear()
        self.generation += 1
        self._pool = self._outputs_pool = None
        self.orders = {}
        self._changed()

    def _changed(self) -> None:
        self.on_change()
        if self.watch is not None:
            self.watch.graphs_changed(bool(self.graphs))


def _nothing() -> None:
    return None
