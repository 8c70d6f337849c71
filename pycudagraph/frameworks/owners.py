"""Who owns a device address: what a graph keeps, its framework pools, live tensors,
arrays and buffers, and PyTorch's allocator blocks (the audit's owner lookup).

:class:`OwnerIndex` answers :meth:`OwnerIndex.find` with an :class:`Owner` whose
``status`` says how the address is held:

============== ===============================================================
``kept``       inside an object the graph keeps alive (a buffer, tensor, array, or a
               weight of a kept ``torch.nn.Module``)
``pool``       inside the graph's capture pool (:mod:`.pools`) or a PyTorch
               ``CUDAGraph``'s pool the graph keeps
``graph``      inside memory a node of the graph allocates (``cudaGraphAddMemAllocNode``)
``live``       inside a live tensor, array or buffer the graph does not keep
``allocator``  inside a block PyTorch's allocator holds in use with no tensor found
               (a library workspace, e.g. cuBLAS's)
``freed``      inside a block PyTorch's allocator holds as free (or awaiting free)
``unknown``    no owner found: the object that owned it was freed (its memory went back
               to a pool), or a library allocated it for itself
============== ===============================================================

Live objects are found with one walk of :func:`gc.get_objects` (its cost grows with the
number of Python objects); PyTorch's blocks with ``torch.cuda.memory_snapshot()``. No CUDA
call of pycudagraph's own.
"""

from __future__ import annotations

import bisect
import gc
from dataclasses import dataclass

from .._lifetime import contents
from ..runtime.memory import DeviceBuffer
from . import loaded
from .arrays import owner_range
from .pools import CapturePool

__all__ = ["Owner", "OwnerIndex", "describe_owner"]


@dataclass(frozen=True)
class Owner:
    """How an address is held (see the module docstring) and by what, in words."""

    status: str
    what: str


class _Ranges:
    """(start, end, what) ranges, found by address (nested ranges allowed)."""

    def __init__(self, items):
        self.items = sorted(set(items), key=lambda r: (r[0], r[1]))
        self.starts = [r[0] for r in self.items]
        self.reach = []  # the furthest end among ranges up to here
        far = -1
        for r in self.items:
            far = max(far, r[1])
            self.reach.append(far)

    def find(self, address: int):
        i = bisect.bisect_right(self.starts, address) - 1
        while i >= 0 and self.reach[i] > address:
            start, end, what = self.items[i]
            if start <= address < end:
                return what
            i -= 1
        return None


def describe_owner(obj) -> str:
    """A short name for an owner object: ``torch.Tensor (4, 8) float32`` ... No CUDA call."""
    torch = loaded.torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return f"torch.Tensor {tuple(obj.shape)} {str(obj.dtype).replace('torch.', '')}"
    cupy = loaded.cupy()
    if cupy is not None and isinstance(obj, cupy.ndarray):
        return f"cupy.ndarray {obj.shape} {obj.dtype}"
    if isinstance(obj, DeviceBuffer):
        return f"DeviceBuffer of {obj.nbytes} bytes"
    return type(obj).__name__


def _kept_ranges(kept) -> tuple[list, list]:
    """Ranges of the objects ``kept`` holds, and of the pools among them."""
    objs, pools = [], []
    torch = loaded.torch()
    module = getattr(getattr(torch, "nn", None), "Module", ())
    for obj in contents(kept):
        if module and isinstance(obj, module):  # a kept model keeps its weights
            for t in list(obj.parameters()) + list(obj.buffers()):
                r = owner_range(t)
                if r is not None:
                    objs.append((r[0], r[1], f"{describe_owner(t)} of a kept model"))
        elif isinstance(obj, CapturePool):
            pools += obj.ranges()
        elif type(obj).__name__ == "CUDAGraph" and hasattr(obj, "pool"):
            pools += _torch_pool_ranges(obj)
        else:
            r = owner_range(obj)
            if r is not None:
                objs.append((r[0], r[1], describe_owner(obj)))
    return objs, pools


def _torch_pool_ranges(tg) -> list:
    torch = loaded.torch()
    try:
        pool_id = tuple(tg.pool())
        segments = torch.cuda.memory_snapshot() if torch is not None else ()
    except Exception:  # not captured yet, or no CUDA: no pool to report
        return []
    return [(int(s["address"]), int(s["address"]) + int(s["total_size"]),
             "PyTorch CUDAGraph pool") for s in segments
            if tuple(s.get("segment_pool_id", ())) == pool_id]


def _live_ranges() -> list:
    """Ranges of every live tensor, CuPy array and pycudagraph buffer (one gc walk)."""
    kinds = [DeviceBuffer]
    torch, cupy = loaded.torch(), loaded.cupy()
    if torch is not None:
        kinds.append(torch.Tensor)
    if cupy is not None:
        kinds.append(cupy.ndarray)
    kinds = tuple(kinds)
    out = {}
    for obj in gc.get_objects():
        if isinstance(obj, kinds):
            r = owner_range(obj)
            if r is not None and r not in out:
                out[r] = describe_owner(obj)
    return [(a, b, what) for (a, b), what in out.items()]


def _torch_blocks() -> list:
    """(start, end, state) of every block of PyTorch's caching allocator."""
    torch = loaded.torch()
    if torch is None or not loaded.torch_cuda_ready(torch):
        return []
    out = []
    for seg in torch.cuda.memory_snapshot():
        addr = int(seg["address"])
        for block in seg.get("blocks", ()):
            start = int(block.get("address", addr))
            size = int(block["size"])
            out.append((start, start + size, str(block.get("state", ""))))
            addr = start + size
    return out


class OwnerIndex:
    """Finds the owner of addresses baked into one graph.

    Parameters
    ----------
    kept
        What the graph keeps alive (``graph.keepalive()``).
    graph_ranges : sequence of (start, end, what)
        Memory the graph's own nodes allocate.
    """

    def __init__(self, kept, graph_ranges=()):
        objs, pools = _kept_ranges(kept)
        self._kept = _Ranges(objs)
        self._pools = _Ranges(pools)
        self._graph = _Ranges(graph_ranges)
        self._live = None  # found on first need: a gc walk
        self._blocks = None

    def find(self, address: int) -> Owner:
        """The :class:`Owner` of ``address`` (see the module docstring). No CUDA call."""
        for status, ranges in (("kept", self._kept), ("pool", self._pools),
                               ("graph", self._graph)):
            what = ranges.find(address)
            if what is not None:
                return Owner(status, what)
        if self._live is None:
            self._live = _Ranges(_live_ranges())
        what = self._live.find(address)
        if what is not None:
            return Owner("live", what)
        if self._blocks is None:
            self._blocks = _Ranges(_torch_blocks())
        state = self._blocks.find(address)
        if state is not None:
            if state == "active_allocated":
                return Owner("allocator", "a block PyTorch's allocator holds in use, no "
                                          "tensor found (a library workspace)")
            return Owner("freed", "a free block of PyTorch's caching allocator")
        return Owner("unknown", "no live tensor, array or buffer owns it")
