"""Where a sleepable pool's framework allocations come from: the sleepable memory table
(:mod:`pycudagraph._cuda.vmm`), each allocation an address range of its own that keeps its
address through sleep and wake.

- PyTorch: a ``torch.cuda.MemPool`` whose allocator is the table's C functions
  (``torch.cuda.memory.CUDAPluggableAllocator(library, "pcg_vmm_malloc", "pcg_vmm_free")``,
  one per process). PyTorch's caching allocator keeps its segments in the pool as it does
  for any private pool; each segment is one allocation of the table, tagged with the pool's
  tag while the pool routes this thread's allocations (:func:`pycudagraph._cuda.vmm.set_tag`).
- CuPy: a ``cupy.cuda.MemoryPool`` whose base allocator is :class:`CupyArena`: chunks of
  the table (at least 2 MiB) cut into pieces, each piece a ``MemoryPointer`` over
  ``UnownedMemory``; a chunk goes back to the table when its last piece is collected.

Nothing here imports a framework: each function is handed the module the program imported.
"""

from __future__ import annotations

import os
import threading

from .._cuda import vmm
from .._lifetime import release
from ..errors import ArgumentError

__all__ = ["torch_mempool", "CupyArena"]

_ALIGN = 512  # CuPy's allocation unit
_CHUNK = 2 << 20
_allocator: list = []  # the process's CUDAPluggableAllocator, made once
_allocator_lock = threading.Lock()


def _pluggable(torch):
    with _allocator_lock:
        if not _allocator:
            make = torch.cuda.memory.CUDAPluggableAllocator
            _allocator.append(make(vmm.library_path(), vmm.MALLOC, vmm.FREE))
        return _allocator[0]


def torch_mempool(torch, device: int):
    """A new ``torch.cuda.MemPool`` on ``device`` whose segments come from the table
    (``CUDAPluggableAllocator``; the driver calls are made when PyTorch allocates). Refused
    with PyTorch's expandable segments on, which a ``MemPool`` with an allocator does not
    support."""
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if "expandable_segments:true" in conf.replace(" ", "").lower():
        raise ArgumentError("a sleepable pool needs PyTorch's expandable segments off: "
                            f"PYTORCH_CUDA_ALLOC_CONF={conf!r} turns them on, and a MemPool "
                            "with its own allocator refuses them")
    if not hasattr(torch.cuda, "MemPool"):
        raise ArgumentError(f"a sleepable pool needs torch.cuda.MemPool (PyTorch 2.6+); "
                            f"PyTorch {torch.__version__} has none")
    allocator = _pluggable(torch)
    with torch.cuda.device(device):  # a MemPool registers its allocator on the current device
        return torch.cuda.MemPool(allocator.allocator())


class _Chunk:
    """One allocation of the table that CuPy pieces are cut from; freed (``vmm.free``) when
    the arena and every piece let go of it."""

    __slots__ = ("ptr", "size", "used", "_fin", "__weakref__")

    def __init__(self, size: int, device: int, tag: int):
        self.ptr = vmm.alloc(size, device, tag)
        self.size = max(size, 1)
        for row in vmm.allocations(tag):
            if row[0] == self.ptr:
                self.size = row[1]  # rounded up to the granularity
        self.used = 0
        self._fin = release(self, vmm.free, self.ptr)


class _Piece:
    """The owner of one piece: keeps its chunk alive."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: _Chunk):
        self.chunk = chunk


class CupyArena:
    """The base allocator of a sleepable pool's ``cupy.cuda.MemoryPool``: ``arena.malloc``
    hands out pieces of chunks of the table, tagged with the pool's tag.

    Parameters
    ----------
    cupy : module
        The ``cupy`` module the program imported.
    tag : int
        The pool's tag in the table.
    device : int
        The device the memory lives on.

    Notes
    -----
    A chunk is made with :func:`pycudagraph._cuda.vmm.alloc` (``cuMemAddressReserve``,
    ``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``) when the current one is full.
    """

    def __init__(self, cupy, tag: int, device: int):
        self._cupy = cupy
        self.tag, self.device = int(tag), int(device)
        self._chunk: _Chunk | None = None
        self._lock = threading.Lock()

    def malloc(self, size: int):
        """A ``cupy.cuda.MemoryPointer`` to ``size`` bytes of the table."""
        size = max(int(size), 1)
        need = -(-size // _ALIGN) * _ALIGN
        with self._lock:
            chunk = self._chunk
            if chunk is None or chunk.used + need > chunk.size:
                chunk = _Chunk(max(need, _CHUNK), self.device, self.tag)
                self._chunk = chunk
            offset = chunk.used
            chunk.used += need
        cuda = self._cupy.cuda
        mem = cuda.UnownedMemory(chunk.ptr + offset, need, _Piece(chunk), self.device)
        return cuda.MemoryPointer(mem, 0)

    def close(self) -> None:
        """Let go of the current chunk (it goes back when its pieces are gone). No CUDA call."""
        with self._lock:
            self._chunk = None
