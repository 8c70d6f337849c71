"""CPU stand-ins for PyTorch and CuPy: just enough of their API for the plumbing of the
framework glue (pools, keys, owners) to be tested without either installed.

``install_torch(monkeypatch)`` / ``install_cupy(monkeypatch)`` put a fake module in
``sys.modules`` (where pycudagraph looks for frameworks) and return it; the fake torch's
allocator (``torch.allocator``) counts pool references as PyTorch's caching allocator does.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import types
from types import SimpleNamespace

_ids = itertools.count(1)


class FakeAllocator:
    """Counts what PyTorch's allocator counts: references per (device, pool id)."""

    def __init__(self):
        self.calls: list = []
        self.uses: dict = {}
        self.segments: list = []  # memory_snapshot() answers these
        self.stream = None  # the current stream when a per-stream begin was called

    def begin(self, dev, pool):
        self.calls.append(("begin", dev, pool))
        self.uses[(dev, pool)] = self.uses.get((dev, pool), 0) + 1

    def end(self, dev, pool):
        self.calls.append(("end", dev, pool))

    def release(self, dev, pool):
        self.calls.append(("release", dev, pool))
        self.uses[(dev, pool)] -= 1
        assert self.uses[(dev, pool)] >= 0, "released more than referenced"


class FakeStorage:
    def __init__(self, ptr, nbytes):
        self._ptr, self._n = ptr, nbytes

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._n


class FakeTensor:
    """A CUDA tensor: an address, a shape, strides in elements, 4-byte elements."""

    def __init__(self, ptr, shape, stride=None, device=0, dtype="float32", storage=None):
        self._ptr, self.shape, self.dtype, self._dev = ptr, tuple(shape), dtype, device
        if stride is None:
            stride, step = [], 1
            for n in reversed(self.shape):
                stride.insert(0, step)
                step *= n
        self._stride = tuple(stride)
        size = 4
        for n in self.shape:
            size *= n
        self._storage = storage or FakeStorage(ptr, size)

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self._dev

    def stride(self):
        return self._stride

    def element_size(self):
        return 4

    @property
    def is_cuda(self):
        return self._dev >= 0

    def untyped_storage(self):
        return self._storage

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def install_torch(monkeypatch, initialized: bool = True, per_thread: bool = True,
                  pool_api: bool = True):
    """A fake ``torch`` (and ``torch._C``) in ``sys.modules``; returns it."""
    alloc = FakeAllocator()
    c = types.ModuleType("torch._C")
    if pool_api:
        if per_thread:
            c._cuda_beginAllocateCurrentThreadToPool = alloc.begin
            c._cuda_endAllocateToPool = alloc.end
        else:
            def begin_per_stream(dev, pool):
                alloc.stream = cuda.current
                alloc.begin(dev, pool)
            c._cuda_beginAllocateCurrentStreamToPool = begin_per_stream
            c._cuda_endAllocateCurrentStreamToPool = alloc.end
        c._cuda_releasePool = alloc.release

    @contextlib.contextmanager
    def stream(s):
        old, cuda.current = cuda.current, s
        try:
            yield
        finally:
            cuda.current = old

    cuda = SimpleNamespace(
        current=None,
        is_initialized=lambda: initialized,
        graph_pool_handle=lambda: (0, next(_ids)),
        memory_snapshot=lambda: alloc.segments,
        stream=stream,
        ExternalStream=lambda ptr, device=None: SimpleNamespace(cuda_stream=ptr),
        device=lambda dev: contextlib.nullcontext(),
        current_stream=lambda dev=None: SimpleNamespace(cuda_stream=0x5151),
    )
    torch = types.ModuleType("torch")
    torch.cuda, torch._C, torch.Tensor = cuda, c, FakeTensor
    torch.__version__ = "0.0-fake"
    torch.allocator = alloc
    torch.no_grad = contextlib.nullcontext
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._C", c)
    return torch


class FakeMem:
    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size


class FakeMemoryPool:
    """A CuPy MemoryPool handing out blocks at made-up addresses."""

    __module__ = "cupy.cuda.memory"
    made: list = []

    def __init__(self):
        self.blocks, self.freed_all = [], False
        FakeMemoryPool.made.append(self)

    def malloc(self, size):
        mem = FakeMem(0x9000_0000 + 0x1000 * len(self.blocks), size)
        self.blocks.append(mem)
        return SimpleNamespace(ptr=mem.ptr, mem=mem)

    def total_bytes(self):
        return sum(b.size for b in self.blocks)

    def free_all_blocks(self):
        self.freed_all = True


class FakeCupyArray:
    def __init__(self, ptr, shape, strides, itemsize=4, device=0, size=None):
        self.shape, self.strides, self.itemsize = tuple(shape), tuple(strides), itemsize
        self.dtype = "float32"
        self.data = SimpleNamespace(ptr=ptr, device_id=device,
                                    mem=FakeMem(ptr, size or itemsize * max(1, _prod(shape))))


def _prod(shape):
    out = 1
    for n in shape:
        out *= n
    return out


def install_cupy(monkeypatch):
    """A fake ``cupy`` in ``sys.modules``; ``cupy.allocators`` lists the allocators made
    current with ``using_allocator`` (the live one last)."""
    cupy = types.ModuleType("cupy")
    cupy.allocators = []

    @contextlib.contextmanager
    def using_allocator(fn):
        cupy.allocators.append(fn)
        try:
            yield
        finally:
            cupy.allocators.remove(fn)

    cupy.cuda = SimpleNamespace(MemoryPool=FakeMemoryPool, using_allocator=using_allocator)
    cupy.ndarray = FakeCupyArray
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return cupy


def without_frameworks(monkeypatch) -> None:
    """Neither PyTorch nor CuPy imported, as far as pycudagraph can tell."""
    for name in ("torch", "torch._C", "cupy"):
        monkeypatch.delitem(sys.modules, name, raising=False)
