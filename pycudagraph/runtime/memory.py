"""Device and pinned host memory: :class:`DeviceBuffer` (``cudaMalloc``) and
:class:`PinnedBuffer` (``cudaMallocHost``).

Their ``int()`` is their address (a :class:`~pycudagraph.errors.ClosedError` once freed);
:mod:`pycudagraph.runtime.pointers` turns them, and any array-like object, into the
addresses kernels and copies take.
"""

from __future__ import annotations

import contextlib
import ctypes
import weakref

import numpy as np

from .. import _cuda, _lifetime
from .._cuda import call, fast, rt
from .._cuda.context import current_device, seen, thread_state
from .._lifetime import release
from .device import Device, known_device, trusted_scope
from ..errors import ArgumentError, ClosedError
from .pointers import (device_pointer, host_array_arg, host_pointer, nbytes_of,
                       register_buffer)
from .stream import stream_handle
from .values import int_arg, short_repr

__all__ = ["DeviceBuffer", "PinnedBuffer", "device_pointer", "host_pointer", "nbytes_of"]

_LEGACY_STREAM = 1  # cudaStreamLegacy
_H2D = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
_D2H = rt.cudaMemcpyKind.cudaMemcpyDeviceToHost


def _size_arg(nbytes, cls: str) -> int:
    """A buffer size: a positive int (a float, a bool or a string is refused, not truncated)."""
    nbytes = int_arg(nbytes, f"{cls}: nbytes")
    if nbytes <= 0:
        raise ArgumentError(f"{cls} needs a positive size in bytes, got {nbytes}")
    if nbytes >= 1 << 64:
        raise ArgumentError(f"{cls}: nbytes is a 64-bit size, got {nbytes}")
    return nbytes


def _reshaped(arr: np.ndarray, shape, where: str) -> np.ndarray:
    """``arr`` viewed with ``shape`` (``None``: as it is); a shape that does not fit is refused."""
    if shape is None:
        return arr
    try:
        return arr.reshape(shape)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{where}: shape {short_repr(shape)} does not fit {arr.size} "
                            f"elements of {arr.dtype} ({exc})") from None


def _dtype_arg(dtype, where: str) -> np.dtype:
    """A numpy dtype that can view raw memory (not object, not empty)."""
    try:
        dtype = np.dtype(dtype)
    except (TypeError, ValueError, KeyError, SyntaxError) as exc:
        raise ArgumentError(f"{where}: dtype {short_repr(dtype)} is not a numpy dtype "
                            f"({type(exc).__name__}: {exc})") from None
    if dtype.hasobject or dtype.itemsize == 0:
        raise ArgumentError(f"{where}: dtype {dtype} cannot view raw memory")
    return dtype


class DeviceBuffer(_lifetime.Releasable):
    """Linear device memory from ``cudaMalloc``.

    Parameters
    ----------
    nbytes : int
        Size in bytes (> 0).

    Notes
    -----
    Allocated on the current device (:attr:`device`). Freed with ``cudaFree`` by
    :meth:`free` or when collected. Exposes ``__cuda_array_interface__`` as bytes, so
    ``cupy.asarray(buf)`` views it. After :meth:`free`, :attr:`ptr` is 0 and every use
    (methods, kernel arguments, copies, ``device_pointer``) raises :class:`ClosedError`
    ("was freed").
    """

    __slots__ = ("ptr", "nbytes", "_addr", "_fin", "_dev", "__weakref__")

    def __init__(self, nbytes: int):
        nbytes = _size_arg(nbytes, "DeviceBuffer")
        self._dev = current_device()
        raw = call(rt.cudaMalloc, nbytes)
        self.ptr: int = int(raw)
        self._addr = self.ptr
        self.nbytes: int = nbytes
        self._fin = release(self, rt.cudaFree, self.ptr)

    def _freed(self) -> ClosedError:
        return ClosedError(f"DeviceBuffer 0x{self._addr:x} ({self.nbytes} bytes)", "was freed")

    def _live(self) -> int:
        ptr = self.ptr
        if not ptr:
            raise self._freed()
        return ptr

    @classmethod
    def from_array(cls, array, stream=None) -> "DeviceBuffer":
        """A new buffer holding a copy of a host array (``cudaMalloc``, ``cudaMemcpy``).

        Parameters
        ----------
        array : numpy.ndarray or buffer
        stream : Stream or stream-like, optional
            Copy with ``cudaMemcpyAsync`` on it instead.
        """
        if isinstance(array, np.ndarray) and not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        arr = host_array_arg(array, "DeviceBuffer.from_array")
        if stream is not None:
            stream_handle(stream)  # a wrong or closed stream is refused before cudaMalloc
        buf = cls(max(arr.nbytes, 1))
        buf.copy_from(arr, stream=stream)
        return buf

    @property
    def handle(self) -> int:
        """The device address (what ``cudaMalloc`` returned)."""
        return self._live()

    def __int__(self) -> int:
        return self._live()

    @property
    def device(self) -> Device:
        """The device the memory was allocated on. No CUDA call."""
        return known_device(self._dev)

    @property
    def ordinal(self) -> int:
        """The ordinal of :attr:`device` (an int). No CUDA call."""
        return self._dev

    def _on_own_device(self):
        """Its device current for a synchronous call (a no-op on one GPU): the legacy
        stream synchronized after ``cudaMemcpy`` / ``cudaMemset`` is the current device's."""
        if seen.multi and self._dev != thread_state.device:
            return trusted_scope(self._dev)
        return contextlib.nullcontext()

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self._live(), False),
                "version": 3, "strides": None}

    def _check_host(self, array, what: str, write: bool = False) -> np.ndarray:
        self._live()
        arr = host_array_arg(array, f"DeviceBuffer.{what}", write)
        if arr.nbytes > self.nbytes:
            raise ArgumentError(f"{what}: the array has {arr.nbytes} bytes but the buffer only "
                                f"{self.nbytes}")
        return arr

    def copy_from(self, host_array, stream=None) -> None:
        """Copy a host array into the buffer's first bytes.

        Calls ``cudaMemcpy`` then ``cudaStreamSynchronize(cudaStreamLegacy)``, so the data
        is on the device when it returns, whatever stream reads it next (a pageable
        copy may otherwise still be in flight). With ``stream`` it calls
        ``cudaMemcpyAsync`` on it; keep ``host_array`` alive until the stream gets there.

        Parameters
        ----------
        host_array : numpy.ndarray or buffer
            At most :attr:`nbytes` bytes.
        stream : Stream or stream-like, optional
        """
        arr = self._check_host(host_array, "copy_from")
        src = arr.ctypes.data
        if stream is None:
            with self._on_own_device():
                call(rt.cudaMemcpy, self.ptr, src, arr.nbytes, _H2D)
                call(rt.cudaStreamSynchronize, _LEGACY_STREAM)
        else:
            call(rt.cudaMemcpyAsync, self.ptr, src, arr.nbytes, _H2D, stream_handle(stream))
            if _lifetime.capture_keeps:
                _lifetime.keep_in_captures(self, arr)

    def copy_to(self, host_array=None, stream=None):
        """Copy the buffer's first bytes into a host array and return it.

        With ``host_array=None`` a ``uint8`` array of :attr:`nbytes` is made.
        Calls ``cudaMemcpy`` (or ``cudaMemcpyAsync`` on ``stream``). The synchronous
        form does not wait for work on non-blocking streams: synchronize those first.

        Parameters
        ----------
        host_array : numpy.ndarray, optional
            At most :attr:`nbytes` bytes; a new ``uint8`` array when ``None``.
        stream : Stream or stream-like, optional

        Returns
        -------
        numpy.ndarray
        """
        if host_array is None:
            host_array = np.empty(self.nbytes, dtype=np.uint8)
        arr = self._check_host(host_array, "copy_to", write=True)
        if stream is None:
            with self._on_own_device():
                call(rt.cudaMemcpy, arr.ctypes.data, self.ptr, arr.nbytes, _D2H)
        else:
            call(rt.cudaMemcpyAsync, arr.ctypes.data, self.ptr, arr.nbytes, _D2H, stream_handle(stream))
            if _lifetime.capture_keeps:
                _lifetime.keep_in_captures(self, arr)
        return host_array

    def to_numpy(self, dtype=np.float32, shape=None) -> np.ndarray:
        """A new host array with the buffer's contents (``cudaMemcpy``).

        Parameters
        ----------
        dtype : numpy dtype
        shape : tuple of int, optional
            Default: 1-D, as many elements as fit in :attr:`nbytes`.
        """
        dtype = _dtype_arg(dtype, "DeviceBuffer.to_numpy")
        count = self.nbytes // dtype.itemsize
        out = _reshaped(np.empty(count, dtype=dtype), shape, "DeviceBuffer.to_numpy")
        self.copy_to(out)
        return out

    def zero(self, stream=None) -> None:
        """Set every byte to 0 (``cudaMemset`` then ``cudaStreamSynchronize(cudaStreamLegacy)``,
        or ``cudaMemsetAsync`` on ``stream``).

        Parameters
        ----------
        stream : Stream or stream-like, optional
        """
        self._live()
        if stream is None:
            with self._on_own_device():
                call(rt.cudaMemset, self.ptr, 0, self.nbytes)
                call(rt.cudaStreamSynchronize, _LEGACY_STREAM)
        else:
            call(rt.cudaMemsetAsync, self.ptr, 0, self.nbytes, stream_handle(stream))
            if _lifetime.capture_keeps:
                _lifetime.keep_in_captures(self)

    def free(self) -> None:
        """Free the memory (``cudaFree``); idempotent.

        From now on this object refuses every use with :class:`ClosedError`. If a live
        graph or exec still points at the buffer (it was given to ``add_kernel``,
        ``add_memcpy``, ``set_arg`` ... and not replaced since), the ``cudaFree`` is
        deferred until the last of them lets go (closed, collected, the node removed,
        or the argument replaced and the exec synchronized): freeing memory a graph
        can still launch on would kill the CUDA context. ``repr(buf)`` names them.
        """
        if not self.ptr:
            return
        self.ptr = 0
        self._release_when_unused()

    def __repr__(self) -> str:
        if self.ptr:
            return f"<pycudagraph.DeviceBuffer ptr=0x{self.ptr:x} nbytes={self.nbytes}>"
        state = "freed"
        if self._fin.alive:
            state += " (cudaFree deferred: used by " + ", ".join(self._holders()) + ")"
        return f"<pycudagraph.DeviceBuffer 0x{self._addr:x} nbytes={self.nbytes} {state}>"


class PinnedBuffer(_lifetime.Releasable):
    """Page-locked host memory from ``cudaMallocHost``.

    Copies between pinned memory and the device run asynchronously and can be graph
    memcpy nodes. :meth:`array` gives a numpy view of the memory. After :meth:`free`
    every use raises :class:`ClosedError` ("was freed").
    """

    __slots__ = ("ptr", "nbytes", "_addr", "_fin", "_views", "__weakref__")

    def __init__(self, nbytes: int):
        nbytes = _size_arg(nbytes, "PinnedBuffer")
        _cuda.ensure_device()
        self.ptr: int = int(call(rt.cudaMallocHost, nbytes))
        self._addr = self.ptr
        self.nbytes: int = nbytes
        self._views: list = []  # weakrefs to the owners of live numpy views
        self._fin = release(self, rt.cudaFreeHost, self.ptr)

    def _freed(self) -> ClosedError:
        return ClosedError(f"PinnedBuffer 0x{self._addr:x} ({self.nbytes} bytes)", "was freed")

    def _live(self) -> int:
        ptr = self.ptr
        if not ptr:
            raise self._freed()
        return ptr

    @property
    def handle(self) -> int:
        """The host address (an int); :class:`ClosedError` once freed. No CUDA call."""
        return self._live()

    def __int__(self) -> int:
        return self._live()

    def array(self, dtype=np.uint8, shape=None) -> np.ndarray:
        """A numpy view of the pinned memory; it keeps this buffer alive, and a
        :meth:`free` waits until the last view is gone. No CUDA call."""
        self._live()
        dtype = _dtype_arg(dtype, "PinnedBuffer.array")
        raw = (ctypes.c_char * self.nbytes).from_address(self.ptr)
        arr = np.frombuffer(raw, dtype=np.uint8)[: self.nbytes - self.nbytes % dtype.itemsize].view(dtype)
        arr = _reshaped(arr, shape, "PinnedBuffer.array")
        _keep = _ViewOwner(self)
        raw._pycudagraph_owner = _keep  # the ctypes object holds the buffer alive
        self._views = [r for r in self._views if r() is not None]
        self._views.append(weakref.ref(_keep, _view_gone))
        return arr

    def free(self) -> None:
        """Free the memory (``cudaFreeHost``); idempotent.

        From now on this object refuses every use with :class:`ClosedError`. While a live
        graph or exec still points at it, or a numpy view from :meth:`array` is alive,
        the ``cudaFreeHost`` is deferred until the last of them lets go.
        """
        if not self.ptr:
            return
        self.ptr = 0
        self._release_when_unused()

    def _holders(self, first: bool = False) -> list[str]:
        views = sum(1 for r in self._views if r() is not None)
        return _lifetime.holders_of(self, first) + ([f"{views} numpy view(s)"] if views else [])

    def __repr__(self) -> str:
        if self.ptr:
            return f"<pycudagraph.PinnedBuffer ptr=0x{self.ptr:x} nbytes={self.nbytes}>"
        state = "freed"
        if self._fin.alive:
            state += " (cudaFreeHost deferred: used by " + ", ".join(self._holders()) + ")"
        return f"<pycudagraph.PinnedBuffer 0x{self._addr:x} nbytes={self.nbytes} {state}>"


class _ViewOwner:
    __slots__ = ("buffer", "__weakref__")

    def __init__(self, buffer):
        self.buffer = buffer


def _view_gone(_ref) -> None:
    try:  # a weakref callback: never raises
        _lifetime.retry_frees()
    except BaseException:  # noqa: BLE001
        pass


register_buffer(DeviceBuffer)
register_buffer(PinnedBuffer)
# the compiled hot calls read a DeviceBuffer argument's address where device_pointer does
fast.pointer_slot(DeviceBuffer, DeviceBuffer.__dict__["ptr"])
