"""Streams and events.

:class:`Stream` owns a ``cudaStream_t`` or wraps one made elsewhere (CuPy, PyTorch,
cuda.core, or a raw integer handle). :class:`Event` owns a ``cudaEvent_t``.
"""

from __future__ import annotations

import numpy as np

from .. import _cuda

from . import hostfn
from .._cuda import call, fast, rt
from .. import _lifetime
from .._cuda.context import current_device, seen, stream_device
from .._lifetime import release
from .device import Device, check_same_device, known_device
from ..errors import ArgumentError, ClosedError
from .values import ADDRESS_MAX, address_arg, bool_arg, int_arg, require_event, short_repr

__all__ = ["Stream", "Event", "stream_handle", "PER_THREAD"]

# The raw values CUDA reserves for the default streams.
_LEGACY = 1  # cudaStreamLegacy
PER_THREAD = 2  #: cudaStreamPerThread: another stream in each thread
# Stream._dev for streams whose device is not a fixed ordinal.
_FOLLOWS_CURRENT = -1  # a default stream: it belongs to whichever device is current
_NOT_ASKED = -2  # wrapped: asked of the driver on first use


class Stream:
    """A CUDA stream.

    Parameters
    ----------
    non_blocking : bool
        Create with ``cudaStreamNonBlocking`` (no implicit sync with the legacy stream).
    priority : int
        Stream priority (lower numbers are higher priority).

    Notes
    -----
    Calls ``cudaStreamCreateWithPriority`` on the current device (:attr:`device`); the
    stream is destroyed with ``cudaStreamDestroy`` when the object is collected or
    :meth:`close` is called. After :meth:`close` every use (methods, launches and copies
    on it, ``stream=`` of any call) raises :class:`ClosedError` before any raw call.
    """

    __slots__ = ("_h", "_addr", "_raw", "_owner", "_fin", "_dev", "__weakref__")

    def __init__(self, non_blocking: bool = True, priority: int = 0):
        non_blocking = bool_arg(non_blocking, "Stream: non_blocking")
        priority = int_arg(priority, "Stream: priority", -(1 << 31), (1 << 31) - 1)
        dev = current_device()
        flags = rt.cudaStreamNonBlocking if non_blocking else rt.cudaStreamDefault
        raw = call(rt.cudaStreamCreateWithPriority, flags, priority)
        self._init(int(raw), raw, None, dev)
        self._fin = release(self, rt.cudaStreamDestroy, raw)

    def _init(self, h: int, raw, owner, dev: int = _NOT_ASKED) -> None:
        self._h = h  # None once closed: every path reading it refuses
        self._addr = h
        self._raw = raw
        self._owner = owner
        self._fin = None
        self._dev = _FOLLOWS_CURRENT if h in (0, _LEGACY, PER_THREAD) else dev

    @classmethod
    def wrap(cls, obj) -> "Stream":
        """Wrap a stream made elsewhere without taking ownership.

        Accepts a :class:`Stream`, an object with ``__cuda_stream__`` (cuda.core),
        ``.cuda_stream`` (PyTorch), ``.ptr`` (CuPy), a ``cuda.bindings`` stream handle,
        or a raw integer handle (``0`` is the legacy default stream). The wrapped
        object is kept alive as long as the :class:`Stream` is. No CUDA call.
        """
        if isinstance(obj, Stream):
            return obj
        h = stream_handle(obj)
        self = cls.__new__(cls)
        self._init(h, None, obj)
        return self

    def _live(self) -> int:
        """The integer handle; :class:`ClosedError` once the stream was closed."""
        h = self._h
        if h is None:
            raise ClosedError(f"Stream 0x{self._addr:x}", "was closed")
        return h

    @property
    def handle(self):
        """The raw ``cudaStream_t`` (cuda.bindings object). No CUDA call."""
        if self._raw is None:
            self._raw = rt.cudaStream_t(self._live())
        return self._raw

    @property
    def ptr(self) -> int:
        """The stream handle as an integer. No CUDA call."""
        return self._live()

    @property
    def device(self) -> Device:
        """The device the stream belongs to (for a wrapped stream ``cuStreamGetDevice``,
        asked once; a default stream belongs to the current device)."""
        return known_device(self._ordinal())

    def _ordinal(self) -> int:
        dev = self._dev
        if dev >= 0:
            return dev
        if dev == _FOLLOWS_CURRENT:
            return current_device()
        dev = stream_device(self._live())
        seen.note(dev)
        self._dev = dev
        return dev

    def __int__(self) -> int:
        return self._live()

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol: ``(version, handle)``."""
        return (0, self._live())

    @property
    def closed(self) -> bool:
        """True once :meth:`close` destroyed the stream. No CUDA call."""
        return self._h is None

    @property
    def is_legacy_default(self) -> bool:
        """True for the legacy default stream (handle 0 or ``cudaStreamLegacy``). No CUDA call."""
        return self._live() in (0, _LEGACY)

    def synchronize(self) -> None:
        """Wait for all work on the stream (``cudaStreamSynchronize``).

        Raises the first error a Python host node launched on this stream raised.
        """
        call(rt.cudaStreamSynchronize, self._live())
        if hostfn.pending:
            hostfn.raise_pending()

    def query(self) -> bool:
        """True when all work on the stream is done (``cudaStreamQuery``)."""
        return _done(rt.cudaStreamQuery, self._live())

    def wait(self, event: "Event") -> None:
        """Make future work on this stream wait for ``event`` (``cudaStreamWaitEvent``).

        Parameters
        ----------
        event : Event
            Recorded on any stream of this device.
        """
        require_event(event, "Stream.wait")
        call(rt.cudaStreamWaitEvent, self.handle, event.handle, 0)

    def require_capturable(self, what: str = "capture") -> None:
        """Raise an :class:`ArgumentError` if this is the legacy default stream, which CUDA
        cannot capture (the stream given is the wrong argument). No CUDA call."""
        if self.is_legacy_default:
            raise ArgumentError(
                f"{what}: the stream must be a non-default stream, got the legacy default "
                f"stream (handle {self._addr}), which cannot be captured; use a non-default "
                "stream: create one with pycudagraph.Stream() or wrap your framework's "
                "non-default stream with Stream.wrap()")

    def close(self) -> None:
        """Destroy the stream now (``cudaStreamDestroy``) if this object owns it; idempotent.

        Work already queued on it still completes (CUDA's rule). Every later use of this
        object raises :class:`ClosedError`. A wrapped stream is left to its owner.
        """
        if self._fin is not None and self._h is not None:
            self._h = None
            self._raw = None
            self._fin()

    def __repr__(self) -> str:
        kind = "owned" if self._fin is not None else "wrapped"
        state = " closed" if self._h is None else ""
        return f"<pycudagraph.Stream {kind} handle=0x{self._addr:x}{state}>"

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other._addr == self._addr

    def __hash__(self) -> int:
        return hash(("stream", self._addr))


def _done(query_fn, handle) -> bool:
    """Run a ``cuda*Query``: True when done, False for ``cudaErrorNotReady``, else raise."""
    err = query_fn(handle)[0]
    if err == rt.cudaError_t.cudaErrorNotReady:
        return False
    if err:
        raise _cuda.error_for(query_fn.__name__, err)
    return True


def stream_handle(obj) -> int:
    """The raw integer handle of any stream-like object (``None`` -> 0, the legacy stream)."""
    if obj is None:
        return 0
    if type(obj) is int and 0 <= obj <= ADDRESS_MAX:
        return obj
    if isinstance(obj, Stream):
        return obj.ptr
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        try:
            value = proto() if callable(proto) else proto
            return address_arg(value[1], "stream (its __cuda_stream__()[1])")
        except (TypeError, IndexError, KeyError, ValueError) as exc:
            raise ArgumentError(f"stream: {type(obj).__name__}.__cuda_stream__ must give "
                                f"(version, handle), got {short_repr(proto)}: {exc}") from None
    for attr in ("cuda_stream", "ptr"):
        value = getattr(obj, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return address_arg(value, f"stream (its .{attr})")
    if isinstance(obj, rt.cudaStream_t) or type(obj).__name__ in ("CUstream", "cudaStream_t"):
        return int(obj)
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_)):
        return address_arg(obj, "stream")
    raise ArgumentError(
        f"cannot use {type(obj).__name__} as a CUDA stream ({short_repr(obj)}): expected a "
        "pycudagraph.Stream, an object with __cuda_stream__ (cuda.core), .cuda_stream "
        "(PyTorch), .ptr (CuPy), a cuda.bindings stream or an int handle")


def _handle_of(obj) -> int:
    """:func:`stream_handle`, a Stream's first: what the ctypes launch routes call."""
    if type(obj) is Stream:
        h = obj._h
        if h is not None:
            return h
    return stream_handle(obj)


# the compiled launches read a Stream's handle where its methods do
fast.stream_slot(Stream, Stream.__dict__["_h"], _handle_of)


class Event(_lifetime.Releasable):
    """A CUDA event.

    Parameters
    ----------
    timing : bool
        Record timestamps (omit ``cudaEventDisableTiming``); needed for :meth:`elapsed_ms`.
    blocking : bool
        ``cudaEventBlockingSync``: :meth:`synchronize` sleeps instead of spinning.

    Notes
    -----
    Calls ``cudaEventCreateWithFlags`` on the current device (:attr:`device`); destroyed
    with ``cudaEventDestroy``. After :meth:`close` every use raises :class:`ClosedError`.
    CUDA records an event only on a stream of its own device; any stream may wait for it.
    """

    __slots__ = ("_raw", "_h", "_addr", "_fin", "timing", "_dev", "__weakref__")

    def __init__(self, timing: bool = True, blocking: bool = False):
        timing = bool_arg(timing, "Event: timing")
        blocking = bool_arg(blocking, "Event: blocking")
        self._dev = current_device()
        flags = 0 if timing else rt.cudaEventDisableTiming
        if blocking:
            flags |= rt.cudaEventBlockingSync
        self._raw = call(rt.cudaEventCreateWithFlags, flags)
        self._h = self._addr = int(self._raw)
        self.timing = bool(timing)
        self._fin = release(self, rt.cudaEventDestroy, self._raw)

    def _live(self):
        """The raw handle; :class:`ClosedError` once the event was closed."""
        if self._h is None:
            raise ClosedError(f"Event 0x{self._addr:x}", "was closed")
        return self._raw

    @property
    def handle(self):
        """The raw ``cudaEvent_t`` (cuda.bindings object). No CUDA call."""
        return self._live()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called. No CUDA call."""
        return self._h is None

    @property
    def device(self) -> Device:
        """The device the event was created on. No CUDA call."""
        return known_device(self._dev)

    def record(self, stream=None) -> "Event":
        """Record the event on ``stream`` (``cudaEventRecord``); returns ``self``.

        Parameters
        ----------
        stream : Stream or stream-like, optional
            ``None`` is the legacy default stream.

        Raises
        ------
        DeviceMismatchError
            When ``stream`` belongs to another device than the event.
        """
        if seen.multi:
            if type(stream) is Stream:
                where = stream.device.handle
            else:
                where = current_device() if stream is None else -1  # -1: not known here
            check_same_device("Event.record", "the event", self._dev, "the stream", where,
                              f"Create the event inside `with pcg.device({where}):`")
        call(rt.cudaEventRecord, self._live(), stream_handle(stream))
        return self

    def synchronize(self) -> None:
        """Wait until the event has completed (``cudaEventSynchronize``)."""
        call(rt.cudaEventSynchronize, self._live())

    def query(self) -> bool:
        """True when the event has completed (``cudaEventQuery``)."""
        return _done(rt.cudaEventQuery, self._live())

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (``cudaEventElapsedTime``); both
        must be of one device.

        Parameters
        ----------
        end : Event
            Recorded after this one; both made with ``timing=True``.

        Returns
        -------
        float
        """
        if not isinstance(end, Event):
            raise ArgumentError(f"Event.elapsed_ms: end must be a pycudagraph.Event, got "
                                f"{short_repr(end)} ({type(end).__name__})")
        if seen.multi:
            check_same_device("Event.elapsed_ms", "the start event", self._dev, "the end event",
                              end.device.handle)
        return float(call(rt.cudaEventElapsedTime, self._live(), end.handle))

    def close(self) -> None:
        """Destroy the event (``cudaEventDestroy``); idempotent.

        Every later use of this object raises :class:`ClosedError`. If a graph or exec
        still records or waits for the event (an event node), the destroy is deferred
        until the last of them lets go, so no launch touches a destroyed event.
        """
        if self._h is None:
            return
        self._h = None
        self._release_when_unused()

    def __repr__(self) -> str:
        state = " closed" if self._h is None else ""
        return f"<pycudagraph.Event handle=0x{self._addr:x} timing={self.timing}{state}>"
