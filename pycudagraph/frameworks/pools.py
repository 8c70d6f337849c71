"""Memory-safe capture: framework allocations made inside ``pcg.capture`` come from a
private pool that the captured graph owns.

A graph bakes in the addresses of the memory its work used. When PyTorch or CuPy frees a
temporary inside the capture and hands its block to a tensor allocated afterwards, every
replay writes into that tensor. ``torch.cuda.graph`` prevents this with a private memory
pool; :class:`CapturePool` does the same for ``pcg.capture``, with each framework's own
mechanism:

- PyTorch: the caching allocator's graph pools, the machinery ``torch.cuda.graph`` uses.
  While the capture is open, allocations of the capturing thread go to the pool
  (``torch._C._cuda_beginAllocateCurrentThreadToPool`` / ``_cuda_endAllocateToPool``,
  PyTorch 2.8+; the per-stream ``_cuda_beginAllocateCurrentStreamToPool`` before). The
  pool object holds one reference on the allocator's pool per device
  (``_cuda_releasePool`` gives it back), so blocks of the pool go to nobody else while it
  lives; after that PyTorch frees them at its next ``torch.cuda.empty_cache()`` (or when
  it needs the memory).
- CuPy: a ``cupy.cuda.MemoryPool`` of its own, made the thread's allocator for the capture
  (``cupy.cuda.using_allocator``); its ``cudaMalloc`` calls run in relaxed capture mode
  (``cudaThreadExchangeStreamCaptureMode``), as PyTorch does for its own.

A sleepable pool (``CapturePool(sleepable=True)``) gets both frameworks' memory from the
sleepable memory table instead (:mod:`.sleep_alloc`): a ``torch.cuda.MemPool`` with the
table's allocator, a CuPy pool cut from the table's chunks. Its memory can then go back to
the driver and come back at the same addresses (``pool.sleep()`` / ``pool.wake()``,
:mod:`.sleep`); it serves one device.

A framework takes part only when the program imported it (``sys.modules``) and, for
PyTorch, initialized CUDA. The graph keeps its pool (``graph.table.ledger.keep_also``), so
its execs, clones and adopted wraps keep it too; the pool is released when the last of
them goes, by a finalizer that never raises (deferred while a capture is open).
"""

from __future__ import annotations

import threading
import warnings

from .._cuda import call, rt, vmm
from .._lifetime import release
from ..errors import ArgumentError, PyCudaGraphError
from ..capture.hooks import register_pool_hook
from ..runtime.values import bool_arg
from . import loaded
from .sleep import Sleepable, SleepState, check_routable, release_state
from .sleep_alloc import CupyArena, torch_mempool

__all__ = ["CapturePool", "PoolActivation", "framework_pools", "pool_of"]

_BEGIN = ("_cuda_beginAllocateCurrentThreadToPool", "_cuda_beginAllocateCurrentStreamToPool")
_END = ("_cuda_endAllocateToPool", "_cuda_endAllocateCurrentStreamToPool")
_RELEASE = ("_cuda_releasePool",)
_RELAXED = rt.cudaStreamCaptureMode.cudaStreamCaptureModeRelaxed
_warned: set = set()
#: This thread's open activations (a capture into a body opened inside another capture
#: routes to the pool already routed to, and shares it when it was given none).
_active = threading.local()


def _open_here() -> list:
    stack = getattr(_active, "stack", None)
    if stack is None:
        stack = _active.stack = []
    return stack


class _PoolState:
    """What a :class:`CapturePool` releases (its finalizer holds this, never the pool)."""

    __slots__ = ("torch_id", "torch_devices", "torch_keep", "cupy_pool", "cupy_owned",
                 "cupy_ranges", "lock", "sleep", "arena")

    def __init__(self, torch_id, torch_keep, cupy_pool, sleep=None):
        self.torch_id = torch_id
        self.torch_devices: set = set()  # devices where this pool holds a reference
        self.torch_keep = torch_keep  # a torch.cuda.MemPool given as pool=
        self.cupy_pool = cupy_pool
        self.cupy_owned = cupy_pool is None  # made here: its free blocks go at release
        self.cupy_ranges: set = set()  # (address, size) of each block handed out
        self.lock = threading.Lock()
        self.sleep: SleepState | None = sleep  # a sleepable pool's memory table state
        self.arena: CupyArena | None = None  # where a sleepable pool's CuPy pool cuts from


def _release_state(state: _PoolState) -> None:
    """Give the pools back (the finalizer of a :class:`CapturePool`); never raises. A
    sleeping pool wakes first: tensors of its memory may outlive it."""
    if state.sleep is not None:
        release_state(state.sleep)
    free = loaded.torch_private(*_RELEASE)
    for dev in list(state.torch_devices):
        try:
            free(dev, state.torch_id)
        except Exception:  # noqa: BLE001 - a finalizer never raises
            pass
    state.torch_devices.clear()
    pool, state.cupy_pool = state.cupy_pool, None
    if pool is not None and state.cupy_owned:
        try:
            pool.free_all_blocks()
        except Exception:  # noqa: BLE001
            pass
    if state.arena is not None:
        state.arena.close()


class CapturePool(Sleepable):
    """The private memory pool of one capture, or of several that share it (``pool=``).

    Parameters
    ----------
    torch_pool : tuple of two ints or torch.cuda.MemPool, optional
        A PyTorch pool id (``torch.cuda.graph_pool_handle()``, ``CUDAGraph.pool()``) or
        ``MemPool`` to allocate from; default: a new id, made on first use.
    cupy_pool : cupy.cuda.MemoryPool, optional
        The CuPy pool to allocate from; default: a new one, made on first use.
    sleepable : bool
        Its memory can go back to the driver and come back at the same addresses
        (:meth:`sleep`, :meth:`wake`, :attr:`asleep`, :attr:`nbytes`,
        :attr:`mapped_bytes`): both frameworks allocate from the sleepable memory table
        (:mod:`pycudagraph._cuda.vmm`; needs its compiled module). Takes no
        ``torch_pool`` / ``cupy_pool``; serves one device.

    Notes
    -----
    No CUDA call when made; PyTorch's and CuPy's allocators make theirs. Released when
    the last graph, exec, clone or capture holding it goes (see the module docstring).
    """

    __slots__ = ("_state", "_fin", "__weakref__")

    def __init__(self, torch_pool=None, cupy_pool=None, sleepable: bool = False):
        if bool_arg(sleepable, "CapturePool: sleepable") and (torch_pool is not None
                                                              or cupy_pool is not None):
            raise ArgumentError("CapturePool: a sleepable pool makes its own PyTorch and CuPy "
                                "pools; give no torch_pool or cupy_pool with sleepable=True")
        keep, pool_id = None, None
        if torch_pool is not None:
            pool_id = getattr(torch_pool, "id", torch_pool)
            if not (isinstance(pool_id, tuple) and len(pool_id) == 2
                    and all(isinstance(v, int) for v in pool_id)):
                raise ArgumentError(f"CapturePool: torch_pool must be a PyTorch pool id (a "
                                    f"tuple of two ints) or torch.cuda.MemPool, got "
                                    f"{type(torch_pool).__name__}")
            keep = torch_pool if pool_id is not torch_pool else None
            pool_id = tuple(pool_id)
        self._state = _PoolState(pool_id, keep, cupy_pool, SleepState() if sleepable else None)
        self._fin = release(self, _release_state, self._state)

    def _sleep_state(self) -> SleepState | None:
        return self._state.sleep

    @classmethod
    def coerce(cls, pool) -> "CapturePool":
        """The pool ``pcg.capture(pool=...)`` means: a new one for ``None``; the pool of a
        :class:`CapturePool`, of a graph captured with one, of a PyTorch pool id /
        ``MemPool`` or of a ``cupy.cuda.MemoryPool``. No CUDA call."""
        if pool is None:
            return cls()
        if isinstance(pool, CapturePool):
            return pool
        if hasattr(pool, "table") and hasattr(pool, "instantiate"):  # a Graph
            found = pool_of(pool)
            if found is None:
                raise ArgumentError(f"pool={pool!r}: that graph was not captured with a "
                                    "framework pool (PyTorch or CuPy took no part in it)")
            return found
        kind = type(pool)
        if kind.__module__.startswith("cupy") and hasattr(pool, "malloc"):
            return cls(cupy_pool=pool)
        if isinstance(pool, tuple) or kind.__name__ == "MemPool":
            return cls(torch_pool=pool)
        raise ArgumentError(f"pool= must be a CapturePool (cap.pool), a Graph captured with "
                            f"one, a PyTorch pool id or MemPool, or a cupy.cuda.MemoryPool; "
                            f"got {kind.__name__}")

    @property
    def torch_id(self) -> tuple | None:
        """The PyTorch allocator's pool id, once PyTorch used the pool. No CUDA call."""
        return self._state.torch_id

    @property
    def cupy_pool(self):
        """The ``cupy.cuda.MemoryPool`` captures allocate from, once CuPy used it. No CUDA call."""
        return self._state.cupy_pool

    def reserved_bytes(self) -> dict:
        """Bytes each framework holds for the pool: ``{"torch": n, "cupy": n}`` (PyTorch's
        ``torch.cuda.memory_snapshot()`` segments of the pool, CuPy's
        ``MemoryPool.total_bytes()``). No CUDA call here (the frameworks' bookkeeping)."""
        cp = self._state.cupy_pool
        return {"torch": sum(size for _, size in self.torch_segments()),
                "cupy": int(cp.total_bytes()) if cp is not None else 0}

    def torch_segments(self) -> list[tuple[int, int]]:
        """(address, size) of each PyTorch segment of the pool (``torch.cuda.memory_snapshot``).
        No CUDA call here."""
        st = self._state
        torch = loaded.torch()
        if st.torch_id is None or torch is None:
            return []
        return [(int(seg["address"]), int(seg["total_size"]))
                for seg in torch.cuda.memory_snapshot()
                if tuple(seg.get("segment_pool_id", ())) == st.torch_id]

    def ranges(self) -> list[tuple[int, int, str]]:
        """(start, end, owner) of the memory the pool holds: PyTorch segments and the CuPy
        blocks captures were handed. No CUDA call here."""
        out = [(a, a + n, "PyTorch graph pool") for a, n in self.torch_segments()]
        with self._state.lock:
            blocks = list(self._state.cupy_ranges)
        out += [(a, a + n, "CuPy graph pool") for a, n in blocks]
        return out

    def activate(self, device: int, stream_ptr: int) -> "PoolActivation":
        """Route this thread's framework allocations to the pool until the activation's
        :meth:`~PoolActivation.close` (see :class:`PoolActivation`; no CUDA call of
        pycudagraph's own but ``cudaThreadExchangeStreamCaptureMode`` around CuPy's
        allocations)."""
        return PoolActivation(self, self._state, device, stream_ptr)

    def __repr__(self) -> str:
        st = self._state
        how = "" if st.sleep is None else " sleepable" + (" asleep" if st.sleep.asleep else "")
        return (f"<pycudagraph.CapturePool{how} torch={st.torch_id} "
                f"cupy={'yes' if st.cupy_pool is not None else 'no'}>")


class PoolActivation:
    """This thread's PyTorch and CuPy allocations go to ``pool`` until :meth:`close`.

    Made active at once. PyTorch takes part when imported with CUDA initialized (its
    allocator's ``beginAllocateToPool`` for ``device``); CuPy when imported (its
    thread-local allocator). No CUDA call of pycudagraph's own except
    ``cudaThreadExchangeStreamCaptureMode`` around CuPy's ``cudaMalloc``.
    """

    region = False  # a sleepable region's (pcg.sleepable()), set by the region: no capture
    workspaces = False  # a capture's own: PyTorch's workspaces dropped again at close

    def __init__(self, pool: CapturePool, state: _PoolState, device: int, stream_ptr: int):
        self.pool = pool
        self.device = int(device)
        self._state = state
        self._torch = None  # (end, release or None) while PyTorch routes to the pool
        self._cupy = None  # the using_allocator context while CuPy does
        self._tag = None  # this thread's table tag before a sleepable pool's activation
        self._open = False
        if state.sleep is not None:
            check_routable(pool, state.sleep, self.device)
        if any(a.pool is pool and a.device == self.device for a in _open_here()):
            return  # nested in an activation of this pool: it routes here already
        if state.sleep is not None:
            self._tag = vmm.set_tag(state.sleep.tag)
        try:
            self._begin_torch(stream_ptr)
            try:
                self._begin_cupy()
            except BaseException:
                self._end_torch()
                raise
        except BaseException:
            self._end_tag()
            raise
        _open_here().append(self)
        self._open = True

    def _begin_torch(self, stream_ptr: int) -> None:
        torch = loaded.torch()
        if torch is None or not loaded.torch_cuda_ready(torch):
            return
        per_thread = loaded.torch_private(_BEGIN[0])
        begin = per_thread or loaded.torch_private(*_BEGIN[1:])
        end, free = loaded.torch_private(*_END), loaded.torch_private(*_RELEASE)
        if begin is None or end is None or free is None:
            _warn_once("torch", f"PyTorch {torch.__version__} has no allocator pool entry "
                       "points: its allocations inside pcg.capture are not memory-safe")
            return
        st, dev = self._state, self.device
        with st.lock:
            if st.torch_id is None and st.sleep is not None:  # segments from the table
                st.torch_keep = torch_mempool(torch, dev)
                st.torch_id = tuple(st.torch_keep.id)
            elif st.torch_id is None:
                st.torch_id = tuple(torch.cuda.graph_pool_handle())
            first = dev not in st.torch_devices
        if per_thread is not None:
            begin(dev, st.torch_id)
        else:  # the per-stream form (before PyTorch 2.8) filters by the current stream
            with torch.cuda.stream(torch.cuda.ExternalStream(stream_ptr, device=dev)):
                begin(dev, st.torch_id)
        with st.lock:
            if first:  # this reference is the pool's own, given back by its finalizer
                st.torch_devices.add(dev)
        self._torch = (end, None if first else free)

    def _begin_cupy(self) -> None:
        cupy = loaded.cupy()
        if cupy is None:
            return
        st = self._state

        def malloc(size: int):
            pool = st.cupy_pool
            if pool is None:
                with st.lock:
                    if st.cupy_pool is None and st.sleep is not None:  # chunks of the table
                        st.arena = CupyArena(cupy, st.sleep.tag, self.device)
                        st.cupy_pool = cupy.cuda.MemoryPool(allocator=st.arena.malloc)
                    elif st.cupy_pool is None:
                        st.cupy_pool = cupy.cuda.MemoryPool()
                    pool = st.cupy_pool
            # cudaMalloc is refused inside a strict capture: relaxed mode around it
            old = call(rt.cudaThreadExchangeStreamCaptureMode, _RELAXED)
            try:
                mp = pool.malloc(size)
            finally:
                call(rt.cudaThreadExchangeStreamCaptureMode, old)
            mem = mp.mem
            if mem.ptr:
                with st.lock:
                    st.cupy_ranges.add((int(mem.ptr), int(mem.size)))
            return mp

        cm = cupy.cuda.using_allocator(malloc)
        cm.__enter__()
        self._cupy = cm

    def _end_torch(self) -> None:
        if self._torch is None:
            return
        end, free = self._torch
        self._torch = None
        end(self.device, self._state.torch_id)
        if free is not None:
            free(self.device, self._state.torch_id)

    def close(self) -> None:
        """Stop routing (each framework's end call); idempotent. Both frameworks are
        ended even when one fails; the first failure is raised after."""
        if self._open:
            self._open = False
            stack = _open_here()
            if self in stack:
                stack.remove(self)
        first = None
        cm, self._cupy = self._cupy, None
        if cm is not None:
            try:
                cm.__exit__(None, None, None)
            except Exception as exc:  # noqa: BLE001 - end PyTorch too, then raise
                first = exc
        try:
            self._end_torch()
        except Exception as exc:  # noqa: BLE001
            first = first or exc
        self._end_tag()
        if self.workspaces:  # what the capture's products used stays the graph's alone
            self.workspaces = False
            loaded.drop_torch_workspaces()
        if first is not None:
            raise first

    def _end_tag(self) -> None:
        tag, self._tag = self._tag, None
        if tag is not None:
            vmm.set_tag(tag)


def framework_pools(pool, stream) -> PoolActivation | None:
    """The activation ``pcg.capture`` makes around its capture, or None when no framework
    is imported and no ``pool=`` was given (then nothing changes). A capture opened while
    another is open in this thread (into a conditional body, say) shares the outer pool
    unless given one. PyTorch's cuBLAS workspaces are dropped before an outermost capture
    and again when it ends (:func:`.loaded.drop_torch_workspaces`). No CUDA call when None;
    else ``cuStreamGetDevice`` for a wrapped stream's device."""
    if pool is None and loaded.torch() is None and loaded.cupy() is None:
        return None
    outer = [a for a in _open_here() if not a.region]  # a sleepable region is no capture
    if pool is None and outer:  # a capture inside a capture: the outer one's pool
        pool = outer[-1].pool
    pool = CapturePool.coerce(pool)
    if not outer:  # the graph's matrix products get a workspace of their own, in its pool
        loaded.drop_torch_workspaces()
    act = pool.activate(int(stream.device), stream.ptr)
    act.workspaces = not outer
    return act


def pool_of(graph) -> CapturePool | None:
    """The :class:`CapturePool` a graph's capture used, or None. No CUDA call."""
    for obj in graph.table.ledger.extra:
        if isinstance(obj, CapturePool):
            return obj
    return None


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


register_pool_hook(framework_pools)
