"""Sleep and wake: a sleepable pool gives its physical memory back to the driver and gets it
again at the same addresses, so the graphs that baked those addresses in replay after
:meth:`wake` with no recapture.

A sleepable :class:`~pycudagraph.frameworks.pools.CapturePool` (``sleepable=True``) and a
region of :func:`~pycudagraph.frameworks.regions.sleepable` own a :class:`SleepState`: their
tag in the sleepable memory table (:mod:`pycudagraph._cuda.vmm`), where every PyTorch
segment and CuPy chunk they hold is one allocation with an address range of its own.

:func:`sleep` (``pool.sleep(keep=True)``):

1. blocks every live exec that can read the memory (``exe.block_launches(reason)``): the
   execs whose ledgers hold the pool (made from a graph captured with it, its clones, or
   updated with one), and the execs whose graphs bake in an address inside it (found by the
   node sites over the one walk, as the audit finds them, once per graph);
2. waits for the pool's devices (``cudaDeviceSynchronize``): no work still uses the memory;
3. with ``keep=True``, copies every allocation to pinned host memory (``cudaMallocHost``,
   ``cudaMemcpy``); ``keep=False`` declares the contents scratch (outputs and
   temporaries the next replay rewrites);
4. unmaps and releases the physical memory (``cuMemUnmap``, ``cuMemRelease``); the address
   ranges stay reserved.

:func:`wake` maps new physical memory at the same addresses (``cuMemCreate``,
``cuMemMap``, ``cuMemSetAccess``: all or nothing), copies the kept contents back, and lifts
the blocks. A launch of a blocked exec raises a :class:`~pycudagraph.errors.PyCudaGraphError`
naming the pool, and launches nothing. Sleeping a sleeping pool and waking an awake one do
nothing. An exec instantiated while its pool sleeps is not blocked: wake the pool first.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import weakref

from .._cuda import call, rt, vmm
from .._lifetime import live_owners
from ..errors import ArgumentError, PyCudaGraphError
from ..graph.exec import GraphExec
from ..runtime.device import device as on_device
from ..runtime.memory import PinnedBuffer
from ..runtime.values import bool_arg

__all__ = ["Sleepable", "SleepState", "sleep", "wake", "release_state", "check_routable",
           "execs_reading", "blocked_by"]

_tags = itertools.count(1)
_D2H = rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
_H2D = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
#: exec -> {tag: reason} of the sleeping pools that block it
_blocks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_blocks_lock = threading.Lock()
#: graph -> (number of nodes known, sorted baked addresses): found once per graph
_baked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class SleepState:
    """What a sleepable pool or region knows of its memory: its tag in the table, whether
    it sleeps, the host copy of a ``keep=True`` sleep, the execs it blocks. No CUDA call."""

    __slots__ = ("tag", "device", "asleep", "host", "blocked", "lock", "__weakref__")

    def __init__(self):
        vmm.require()  # NotSupportedError, saying how to build it, without the table
        self.tag = next(_tags)
        self.device: int | None = None  # the one device its memory lives on, once used
        self.asleep = False
        self.host: tuple | None = None  # (PinnedBuffer, [(address, size, offset)])
        self.blocked: list = []  # weak references to the execs this sleep blocked
        self.lock = threading.RLock()

    def rows(self) -> list:
        """(address, size, device, mapped, tag) of its allocations. No CUDA call."""
        return vmm.allocations(self.tag)

    def nbytes(self) -> int:
        return sum(r[1] for r in self.rows())

    def mapped_bytes(self) -> int:
        return sum(r[1] for r in self.rows() if r[3])


class Sleepable:
    """The sleep methods of a sleepable pool (mixed into
    :class:`~pycudagraph.frameworks.pools.CapturePool`, which provides ``_sleep_state()``)."""

    __slots__ = ()

    def _sleep_state(self):  # the SleepState, or None for a pool that cannot sleep
        raise NotImplementedError

    def _sleep_or_refuse(self, what: str):
        state = self._sleep_state()
        if state is None:
            raise ArgumentError(f"{what}: {self!r} cannot sleep; make it with "
                                "pcg.CapturePool(sleepable=True)")
        return state

    @property
    def sleepable(self) -> bool:
        """Whether the pool's memory can sleep (``CapturePool(sleepable=True)``). No CUDA call."""
        return self._sleep_state() is not None

    @property
    def asleep(self) -> bool:
        """Whether the pool's memory is given back now (:meth:`sleep`). No CUDA call."""
        state = self._sleep_state()
        return state is not None and state.asleep

    @property
    def nbytes(self) -> int:
        """Bytes of the pool's allocations, asleep or awake (0 for a pool that cannot
        sleep). No CUDA call."""
        state = self._sleep_state()
        return state.nbytes() if state is not None else 0

    @property
    def mapped_bytes(self) -> int:
        """Bytes of physical memory backing the pool now: :attr:`nbytes` awake, 0 asleep.
        No CUDA call."""
        state = self._sleep_state()
        return state.mapped_bytes() if state is not None else 0

    def sleep(self, keep: bool = True) -> int:
        """Give the pool's physical memory back to the driver, keeping its addresses.

        Blocks the execs that can read it (``exe.block_launches``), waits for the devices
        (``cudaDeviceSynchronize``), with ``keep=True`` copies the contents to pinned host
        memory (``cudaMallocHost``, ``cudaMemcpy``), then ``cuMemUnmap`` and
        ``cuMemRelease``. ``keep=False``: the contents are scratch the next replay
        rewrites. Returns the bytes released (0 when it sleeps already). See
        the module docstring.
        """
        return sleep(self._sleep_or_refuse("sleep"), self, keep)

    def wake(self) -> int:
        """Back the pool's addresses with new physical memory (``cuMemCreate``,
        ``cuMemMap``, ``cuMemSetAccess``), restore what ``sleep(keep=True)`` kept
        (``cudaMemcpy``) and let its execs launch again. Returns the bytes mapped (0 when
        it is awake); on a failure (out of memory) it stays asleep."""
        return wake(self._sleep_or_refuse("wake"))


def check_routable(owner, state: SleepState, device: int) -> None:
    """A sleepable pool is routed to (allocated from) only awake, and on its one device
    (the first it was used on). No CUDA call."""
    if state.asleep:
        raise PyCudaGraphError(f"{owner!r} is asleep: wake it (.wake()) before allocating "
                               "from it (a capture or a sleepable region using it)")
    with state.lock:
        if state.device is None:
            state.device = device
    if state.device != device:
        raise ArgumentError(f"{owner!r} serves device {state.device}: a sleepable pool serves "
                            f"one device, and this use is on device {device}; make one per "
                            "device")


def _synchronize(devices) -> None:
    for dev in sorted(devices):
        with on_device(dev):
            call(rt.cudaDeviceSynchronize)


def sleep(state: SleepState, owner, keep: bool = True) -> int:
    """Release ``state``'s physical memory (see the module docstring); returns the bytes
    released, 0 when it sleeps already. ``owner`` (the pool or region) names it in the
    launch error and finds the execs that hold it."""
    keep = bool_arg(keep, "sleep: keep")
    with state.lock:
        if state.asleep:
            return 0
        rows = [r for r in state.rows() if r[3]]
        reason = (f"{owner!r} is asleep: its memory was given back to the driver "
                  f"({type(owner).__name__}.sleep()); call .wake() on it before launching a "
                  "graph that uses it (nothing was launched)")
        state.blocked = [weakref.ref(e) for e in execs_reading(owner, rows)]
        _block(state, reason)
        try:
            _synchronize({r[2] for r in rows})
            state.host = _copy_out(rows) if keep and rows else None
        except BaseException:
            _unblock(state)
            raise
        state.asleep = True  # from here on, even a partial unmap is undone by wake()
        _n, released = vmm.unmap(state.tag)
        return released


def wake(state: SleepState) -> int:
    """Map ``state``'s memory back at its addresses and restore a kept copy (see the module
    docstring); returns the bytes mapped, 0 when it is awake. On a failure it stays asleep
    (its execs blocked) and a later call tries again."""
    with state.lock:
        if not state.asleep:
            return 0
        _n, mapped = vmm.remap(state.tag)
        if state.host is not None:
            buf, parts = state.host
            for ptr, size, offset in parts:
                call(rt.cudaMemcpy, ptr, buf.ptr + offset, size, _H2D)
            state.host = None
            buf.free()
        state.asleep = False
        _unblock(state)
        return mapped


def release_state(state: SleepState) -> None:
    """When the pool goes: wake it quietly if it sleeps (tensors of its memory may still be
    alive; no address stays unmapped), then free the host copy. Never raises."""
    try:
        if state.asleep:
            wake(state)
    except Exception:  # noqa: BLE001 - a finalizer never raises
        pass


def _copy_out(rows) -> tuple:
    """The contents of ``rows`` in one pinned host buffer (``cudaMallocHost``,
    ``cudaMemcpy`` device to host)."""
    total = sum(r[1] for r in rows)
    buf = PinnedBuffer(total)
    parts, offset = [], 0
    try:
        for ptr, size, _dev, _mapped, _tag in rows:
            call(rt.cudaMemcpy, buf.ptr + offset, ptr, size, _D2H)
            parts.append((ptr, size, offset))
            offset += size
    except BaseException:
        buf.free()
        raise
    return buf, parts


# -- which execs read the memory, and blocking them -----------------------------------

def _addresses(graph) -> list:
    """The sorted addresses ``graph`` bakes in (the sites of every node the one walk
    reaches), found once per graph and again when it gains nodes. A node that cannot be
    read raises :class:`~pycudagraph.errors.PyCudaGraphError`."""
    known = len(graph.table.nodes)
    hit = _baked.get(graph)
    if hit is not None and hit[0] == known:
        return hit[1]
    found = sorted({s.address for node, _depth, _owner in graph.table.walk()
                    for s in node.sites()})
    _baked[graph] = (len(graph.table.nodes), found)
    return found


def _reads(addresses: list, ranges: list) -> bool:
    for start, end in ranges:
        i = bisect.bisect_left(addresses, start)
        if i < len(addresses) and addresses[i] < end:
            return True
    return False


def execs_reading(owner, rows) -> list:
    """The live execs that hold ``owner`` (their ledgers keep it) or whose graphs bake in
    an address inside ``rows`` (the pool's allocations). No CUDA call but the node reads
    of graphs not seen before (``cuGraphGetNodes``, ``cuGraphKernelNodeGetParams`` ...)."""
    out = {id(e): e for e in live_owners(holding=owner)
           if isinstance(e, GraphExec) and not e.closed}
    ranges = sorted((r[0], r[0] + r[1]) for r in rows)
    if ranges:
        for exe in live_owners():
            if (not isinstance(exe, GraphExec) or exe.closed or id(exe) in out
                    or exe.graph is None):
                continue
            try:
                if _reads(_addresses(exe.graph), ranges):
                    out[id(exe)] = exe
            except PyCudaGraphError:  # a graph that cannot be read: block it to be safe
                out[id(exe)] = exe
    return list(out.values())


def _set_block(exe, reasons: dict) -> None:
    exe.block_launches(next(iter(reasons.values())) if reasons else None)


def _block(state: SleepState, reason: str) -> None:
    with _blocks_lock:
        for ref in state.blocked:
            exe = ref()
            if exe is None or exe.closed:
                continue
            reasons = _blocks.setdefault(exe, {})
            reasons[state.tag] = reason
            _set_block(exe, reasons)


def _unblock(state: SleepState) -> None:
    with _blocks_lock:
        for ref in state.blocked:
            exe = ref()
            reasons = _blocks.get(exe) if exe is not None else None
            if reasons is None or reasons.pop(state.tag, None) is None:
                continue
            if not exe.closed:
                _set_block(exe, reasons)
        state.blocked = []


def blocked_by(exe) -> list[str]:
    """Why ``exe`` may not launch now: the reason of each sleeping pool that blocks it.
    No CUDA call."""
    with _blocks_lock:
        return list(_blocks.get(exe, {}).values())
