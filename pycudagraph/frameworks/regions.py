"""Memory you name that sleeps and wakes: the sleepable region (``with pcg.sleepable() as
region: model = build()``) and what ``g.sleep()`` / ``g.wake()`` do for one graph.

A region is a sleepable :class:`~pycudagraph.frameworks.pools.CapturePool` routed to for a
``with`` block: PyTorch and CuPy allocations made in the block on this thread (a model's
weights, say) come from it, so the whole model and the graphs that read it can sleep and
wake. A capture opened inside the block still gets its own pool (unless given
``pool=region.pool``).
"""

from __future__ import annotations

from .._cuda import call, ensure_device, rt
from ..errors import ArgumentError, PyCudaGraphError
from ..runtime.graph_mem import graph_mem_info, graph_mem_trim
from . import loaded
from .pools import CapturePool, pool_of

__all__ = ["SleepableRegion", "sleepable", "sleep_graph", "wake_graph"]


class SleepableRegion:
    """PyTorch and CuPy allocations made in its ``with`` block come from a sleepable pool.

    Made by :func:`sleepable`. The block may be entered again (more allocations join the
    region). ``region.sleep(keep=True)`` / ``region.wake()``, ``asleep``, ``nbytes``,
    ``mapped_bytes`` are its pool's (:class:`.Sleepable`); ``region.pool`` is the pool.
    """

    def __init__(self, device=None):
        self.pool = CapturePool(sleepable=True)
        self._device = device
        self._act = None

    def __enter__(self) -> "SleepableRegion":
        if self._act is not None:
            raise ArgumentError("sleepable region: its block is open already (one at a time)")
        dev = self._device
        if dev is None:
            torch = loaded.torch()
            dev = (torch.cuda.current_device()
                   if torch is not None and loaded.torch_cuda_ready(torch) else ensure_device())
        act = self.pool.activate(int(dev), 0)
        act.region = True  # captures opened inside get pools of their own
        self._act = act
        return self

    def __exit__(self, *exc) -> bool:
        act, self._act = self._act, None
        if act is not None:
            act.close()
        return False

    def sleep(self, keep: bool = True) -> int:
        """The region's memory goes back to the driver, its addresses kept (a weights
        region keeps its contents: ``keep=True``); see :meth:`.Sleepable.sleep`
        (``cudaDeviceSynchronize``, ``cudaMemcpy``, ``cuMemUnmap``, ``cuMemRelease``)."""
        return self.pool.sleep(keep)

    def wake(self) -> int:
        """See :meth:`.Sleepable.wake` (``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``,
        ``cudaMemcpy``)."""
        return self.pool.wake()

    @property
    def asleep(self) -> bool:
        """Whether the region sleeps. No CUDA call."""
        return self.pool.asleep

    @property
    def nbytes(self) -> int:
        """Bytes of the region's allocations. No CUDA call."""
        return self.pool.nbytes

    @property
    def mapped_bytes(self) -> int:
        """Bytes of physical memory backing the region now. No CUDA call."""
        return self.pool.mapped_bytes

    def __repr__(self) -> str:
        state = " asleep" if self.asleep else ""
        return f"<pycudagraph.SleepableRegion {self.nbytes} bytes{state}>"


def sleepable(device=None) -> SleepableRegion:
    """A region whose PyTorch and CuPy allocations (made in its ``with`` block, on this
    thread) can sleep and wake: ``with pcg.sleepable() as region: model = build()``.

    Parameters
    ----------
    device : int, optional
        The device its memory lives on (default: PyTorch's current device, else
        pycudagraph's).

    Notes
    -----
    No CUDA call when made; allocations in the block make theirs (``cuMemCreate``,
    ``cuMemMap`` ...). Needs the compiled table (:mod:`pycudagraph._cuda.vmm`).
    """
    return SleepableRegion(device)


def _has_graph_memory(graph) -> bool:
    """Whether a node of ``graph`` allocates graph memory (a site of role ``"alloc"``)."""
    for node, _depth, _owner in graph.table.walk():
        try:
            if any(s.role == "alloc" for s in node.sites()):
                return True
        except PyCudaGraphError:  # a node whose addresses cannot be read allocates nothing
            continue
    return False


def sleep_graph(graph, keep: bool = True) -> int:
    """``g.sleep(keep)``: the graph's sleepable pool sleeps (:meth:`.Sleepable.sleep`; every
    graph sharing the pool sleeps with it), then the device's graph memory pool gives back
    what no exec keeps (``cudaDeviceGraphMemTrim``, on the current device;
    ``cudaDeviceGetGraphMemAttribute`` before and after). Memory of allocation nodes that a
    live exec keeps mapped stays: close the exec to give it back. Returns the bytes
    released."""
    pool = pool_of(graph)
    if pool is None or not pool.sleepable:
        if not _has_graph_memory(graph):
            raise ArgumentError(f"sleep: {graph!r} holds no memory that can sleep; capture it "
                                "with pool=pcg.CapturePool(sleepable=True)")
        pool = None
    released = pool.sleep(keep) if pool is not None else 0
    before = graph_mem_info()["reserved"]  # the current device's graph memory pool
    if pool is None:  # the execs are idle before the trim (a sleep waited for them)
        call(rt.cudaDeviceSynchronize)
    graph_mem_trim()
    return released + max(0, before - graph_mem_info()["reserved"])


def wake_graph(graph) -> int:
    """``g.wake()``: the graph's sleepable pool wakes (:meth:`.Sleepable.wake`); graph
    allocation nodes get their memory back by themselves at the next launch. Returns the
    bytes mapped."""
    pool = pool_of(graph)
    return pool.wake() if pool is not None and pool.sleepable else 0
