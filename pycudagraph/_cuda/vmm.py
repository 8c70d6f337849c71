"""Device memory that sleeps and wakes at the same addresses: the checked layer over the
compiled table ``pycudagraph._cuda._vmm`` (CUDA's virtual memory management).

Each allocation is an address range of its own (``cuMemAddressReserve``) backed by one
physical allocation (``cuMemCreate``: pinned device memory of the device) mapped there
(``cuMemMap``) and made readable and writable by the device (``cuMemSetAccess``); sizes
round up to the device's granularity (``cuMemGetAllocationGranularity``, 2 MiB on current
GPUs). Every allocation carries a *tag*, the sleepable pool it belongs to:
:func:`unmap` gives a tag's physical memory back to the driver (``cuMemUnmap``,
``cuMemRelease``) and keeps its address ranges reserved; :func:`remap` backs them again
with new physical memory at the same addresses, so graphs that baked those addresses in
replay without recapture.

PyTorch allocates through the table's C functions (:data:`MALLOC`, :data:`FREE` of
:func:`library_path`, given to ``torch.cuda.memory.CUDAPluggableAllocator``), which tag an
allocation with this thread's :func:`set_tag`; CuPy through :func:`alloc` / :func:`free`.

The driver entry points come from libcuda (``dlopen`` / ``dlsym``, as the hot calls get
theirs) when first needed; :func:`use_driver_library` points them at a stand-in for tests.
Every failure raises the :class:`~pycudagraph.errors.CudaError` naming the failing call, and
the trace (``pcg.trace()``) sees each kind of call made.
"""

from __future__ import annotations

import ctypes
import importlib
import threading

from ..errors import NotSupportedError
from . import check

__all__ = ["available", "why_not", "require", "library_path", "use_driver_library", "set_tag",
           "alloc", "free", "unmap", "remap", "allocations", "take_allocator_error", "MALLOC",
           "FREE"]

#: The C functions PyTorch's pluggable allocator calls.
MALLOC, FREE = "pcg_vmm_malloc", "pcg_vmm_free"

_BUILD = ("build it in place with `python setup.py build_ext --inplace` or "
          "`python pycudagraph/_cuda/_build.py` (a C compiler and the Python headers), "
          "or reinstall with `pip install -e .`")


def _import():
    try:
        return importlib.import_module(__package__ + "._vmm"), ""
    except ImportError as exc:
        return None, f"pycudagraph._cuda._vmm is not built ({exc})"


_mod, _why = _import()
_lock = threading.Lock()
_driver: list = []  # the library whose entry points the table has, once handed over


def available() -> bool:
    """Whether the compiled table is built here. No CUDA call."""
    return _mod is not None


def why_not() -> str:
    """Why sleepable memory is not available ("" when it is). No CUDA call."""
    return _why


def require() -> None:
    """Raise :class:`~pycudagraph.errors.NotSupportedError`, saying how to build it, when
    the compiled table is missing. No CUDA call."""
    _module()


def _module():
    if _mod is None:
        raise NotSupportedError(f"sleepable memory needs the compiled module: {_why}; "
                                f"{_BUILD}")
    return _mod


def _hand_over(name: str) -> None:
    mod = _module()
    lib = check.open_driver(name, "sleepable memory needs an NVIDIA GPU and driver")
    table = {}
    for sym in mod.ENTRY_POINTS:
        fn = getattr(lib, sym, None)
        if fn is None:
            raise NotSupportedError(f"{name} has no {sym}: the driver is too old for CUDA's "
                                    "virtual memory management (CUDA 10.2+ drivers have it)")
        table[sym] = ctypes.cast(fn, ctypes.c_void_p).value
    mod.set_driver(table)
    _driver[:] = [name]


def _ready():
    """The table, with the driver's entry points handed over (on first use)."""
    mod = _module()
    if not _driver:
        with _lock:
            if not _driver:
                _hand_over(check.DRIVER_LIBRARY)
    return mod


def use_driver_library(path: str) -> None:
    """Test hook: make the table call the entry points of the library at ``path`` (a
    stand-in for libcuda such as ``tests/support/vmm_driver_stub.c``), in this process."""
    with _lock:
        _hand_over(path)


def library_path() -> str:
    """The shared library holding :data:`MALLOC` and :data:`FREE` (the compiled module's
    file), for ``torch.cuda.memory.CUDAPluggableAllocator``. Hands the driver entry points
    over first (``dlsym`` of libcuda), since PyTorch calls them without asking."""
    return _ready().__file__


def _checked(res, api_hint: str, args: tuple):
    rc, api, value = res
    if rc:
        check.report(api or api_hint, rc, args)
    return value


def _traced(apis, args: tuple) -> None:
    if check.tracer is not None:
        for api in apis:
            check.report(api, 0, args)


def set_tag(tag: int) -> int:
    """Tag this thread's later :data:`MALLOC` allocations with ``tag``; returns the tag
    before. No CUDA call."""
    return _module().set_tag(tag)


def alloc(size: int, device: int, tag: int) -> int:
    """A new allocation of at least ``size`` bytes on ``device``, tagged ``tag``; its
    address (``cuMemAddressReserve``, ``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``;
    relaxed capture mode around them, ``cuThreadExchangeStreamCaptureMode``)."""
    args = (size, device, tag)
    ptr = _checked(_ready().alloc(size, device, tag), "cuMemCreate", args)
    _traced(("cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess"), args)
    return ptr


def free(ptr: int) -> None:
    """Free an allocation of the table: wait for its device (``cuCtxSynchronize``, as
    ``cudaFree`` does), unmap and release what backs it (``cuMemUnmap``, ``cuMemRelease``),
    free its range (``cuMemAddressFree``)."""
    _checked(_ready().free(ptr), "cuMemAddressFree", (ptr,))
    _traced(("cuMemUnmap", "cuMemRelease", "cuMemAddressFree"), (ptr,))


def unmap(tag: int) -> tuple[int, int]:
    """Give the physical memory of every mapped allocation tagged ``tag`` back to the
    driver (``cuMemUnmap``, ``cuMemRelease``); the address ranges stay reserved. Returns
    (allocations, bytes) unmapped. On a failure, those unmapped before it stay unmapped.
    The caller makes sure no work still uses the memory."""
    n, nbytes = _checked(_ready().unmap(tag), "cuMemUnmap", (tag,))
    if n:
        _traced(("cuMemUnmap", "cuMemRelease"), (tag, n))
    return n, nbytes


def remap(tag: int) -> tuple[int, int]:
    """Back every unmapped allocation tagged ``tag`` with new physical memory at its own
    address (``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``). All or nothing: on a
    failure (out of memory, say) what this call mapped is given back and the error raised.
    Returns (allocations, bytes) mapped. The contents are undefined until written."""
    n, nbytes = _checked(_ready().remap(tag), "cuMemCreate", (tag,))
    if n:
        _traced(("cuMemCreate", "cuMemMap", "cuMemSetAccess"), (tag, n))
    return n, nbytes


def allocations(tag: int | None = None) -> list[tuple[int, int, int, bool, int]]:
    """(address, size, device, mapped, tag) of each allocation of the table (tagged
    ``tag``, or all). No CUDA call."""
    if _mod is None:
        return []
    return _mod.allocations(tag)


def take_allocator_error() -> tuple[str, int] | None:
    """(call, CUresult) of the last failure inside :data:`MALLOC` / :data:`FREE` (which
    cannot raise: PyTorch sees a failed allocation), or None; clears it. No CUDA call."""
    return _mod.take_error() if _mod is not None else None
