"""Stream capture into a graph: ``with pcg.capture(stream) as cap: ...; cap.graph``.

Work issued on the stream inside the block (our kernels, CuPy, PyTorch: anything
that launches on that stream handle) becomes nodes of ``cap.graph``. Whatever goes
wrong, the capture is ended, its partial graph destroyed, and :class:`CaptureError`
raised naming the first failing raw call made through pycudagraph, when there was one, and
the line of the block where it broke (the innermost line of the traceback outside PyTorch,
CuPy and pycudagraph, with what that call does and how to avoid it: :mod:`.breakers`).
``KeyboardInterrupt``, ``SystemExit`` and other exceptions that are not ``Exception``
end the capture the same way and propagate unchanged. A capture still open at process
exit is ended quietly.

Memory-safe capture: when PyTorch or CuPy is imported, what they allocate inside the block
comes from a private pool owned by ``cap.graph`` (:mod:`pycudagraph.frameworks.pools`),
so no tensor allocated afterwards is handed memory the graph still uses.
"""

from __future__ import annotations

import threading

from .. import _cuda, _lifetime
from .._cuda import call, rt
from ..errors import ArgumentError, CaptureError, CudaError
from .._lifetime import flush_deferred
from .control import (_STATUS, CAPTURE_MODES, RECAPTURE_VERSION, capture_info,
                              update_capture_dependencies)
from .flow import CaptureFlow
from ..graph.graph import Graph
from ..runtime.stream import Stream
from ..runtime.values import choice_arg, seq_arg
from .hooks import open_pools, run_end_hooks
from .breakers import describe_failure
from .collectives import COLLECTIVE_MODES, communicator_key, mark_collectives

__all__ = ["capture", "capture_status", "CAPTURE_MODES", "recapture"]

_S = rt.cudaStreamCaptureStatus

_CAUSES = (
    "Common causes: a synchronous call inside the capture (cudaMemcpy, cudaMalloc, "
    "cudaStreamSynchronize, .synchronize(), copy_to/copy_from without stream=, "
    "torch.cuda.synchronize, .item()/.get()); an allocation that is not stream-ordered; "
    "work on the legacy default stream; another thread calling CUDA while a "
    "mode='global' capture is active (use mode='thread_local' or 'relaxed' there).")
_DOCTOR = ("pcg.doctor(fn, *args) lists every call in fn that would break a capture, each "
           "with its file and line.")

#: Captures begun and not yet ended (any thread), ended quietly at process exit.
_open: set = set()
_open_lock = threading.Lock()


def capture_status(stream) -> str:
    """``"none"``, ``"active"`` or ``"invalidated"`` (``cudaStreamIsCapturing``)."""
    s = Stream.wrap(stream)
    return _STATUS.get(int(call(rt.cudaStreamIsCapturing, s.ptr)), "unknown")


class capture(CaptureFlow):
    """Capture the work issued on ``stream`` into a graph.

    Parameters
    ----------
    stream : Stream or stream-like
        A real stream (not the legacy default stream); CuPy/PyTorch streams are wrapped.
    mode : {"global", "thread_local", "relaxed"}
        ``cudaStreamCaptureMode``.
    graph : Graph, optional
        Capture into this existing graph (``cudaStreamBeginCaptureToGraph``, CUDA 12.3+).
    deps : sequence of Node, optional
        With ``graph``: the nodes the captured work depends on.
    keep : sequence, optional
        Objects the captured work points at, kept alive by the graph and its execs.
    pool : CapturePool, Graph, optional
        The private pool PyTorch / CuPy allocations inside the block come from: by default
        a new one; ``cap.pool`` of another capture (or the graph it made) shares it, as
        ``torch.cuda.graph(pool=)`` does. A PyTorch pool id / ``MemPool`` or a
        ``cupy.cuda.MemoryPool`` is taken too. The graph keeps its pool (``cap.pool``).
    collectives : {None, "serialize", "refuse"}
        The graph runs NCCL collectives (name the communicators with
        :meth:`collective`): its execs are ordered after, or refuse to run beside, other
        such graphs sharing a communicator launched on another stream
        (:mod:`pycudagraph.capture.collectives`). None: a graph like any other.

    Notes
    -----
    Calls ``cudaStreamBeginCapture`` (or ``cudaStreamBeginCaptureToGraph``) on entry and
    ``cudaStreamEndCapture`` on exit, always.
    """

    def __init__(self, stream, mode: str = "global", graph: Graph | None = None, deps=(),
                 keep=(), pool=None, collectives: str | None = None):
        choice_arg(mode, CAPTURE_MODES, "capture mode")
        if collectives is not None:
            choice_arg(collectives, COLLECTIVE_MODES, "capture: collectives")
        self.collectives = collectives
        self._comms: list = []  # the communicators cap.collective named
        if graph is not None and not isinstance(graph, Graph):
            raise ArgumentError(f"capture: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        self.stream = Stream.wrap(stream)
        self.mode = mode
        self.graph: Graph | None = None
        self._target = graph
        self._deps = seq_arg(deps, "capture: deps")
        self._keep = seq_arg(keep, "capture: keep")
        self._failures: list = []
        self._launched: list = []  # what work issued through pycudagraph inside points at
        self._pool_arg = pool
        self._pools = None  # the framework pools' activation while the capture is open
        self._pool_error = None  # why ending it failed (the capture fails with it)
        self.pool = None  # the CapturePool the frameworks allocated from (set on entry)

    @property
    def status(self) -> str:
        """The stream's capture status now (``cudaStreamIsCapturing``)."""
        return capture_status(self.stream)

    def _is_open(self) -> bool:
        """Whether the capture has begun and not ended yet (inside its ``with`` block). No
        CUDA call."""
        with _open_lock:
            return self in _open

    def keep(self, *objs) -> None:
        """Keep ``objs`` alive as long as the captured graph and its execs. No CUDA call."""
        self._keep += objs

    def collective(self, *comms) -> None:
        """Name the NCCL communicator(s) the captured collectives use (CuPy's
        ``NcclCommunicator``, an nccl4py communicator, an ``ncclComm_t`` address, or any
        object standing for one); needs ``collectives=``. No CUDA call."""
        if self.collectives is None:
            raise ArgumentError("cap.collective needs pcg.capture(..., collectives='serialize' "
                                "or 'refuse')")
        for comm in comms:
            communicator_key(comm)  # refused now, not when the capture ends
        self._comms.extend(comms)

    def __enter__(self) -> "capture":
        s = self.stream
        s.require_capturable("stream capture")
        _cuda.ensure_device()
        mode = CAPTURE_MODES[self.mode]
        if int(call(rt.cudaStreamIsCapturing, s.ptr)) == int(_S.cudaStreamCaptureStatusActive):
            raise CaptureError(f"nested capture: {s!r} is already being captured; end that "
                               "capture first (one stream, one capture at a time)")
        self._pools = open_pools(self._pool_arg, s)
        if self._pools is not None:
            self.pool = self._pools.pool
        try:
            self._begin(s, mode)
        except BaseException:
            self._close_pools()  # the begin call's error is the one to raise
            raise
        with _open_lock:
            _cuda.check.capture_watchers.append(self._failures)
            _lifetime.capture_keeps.append(self._launched)
            _open.add(self)
        return self

    def _begin(self, s, mode) -> None:
        """``cudaStreamBeginCapture``, or ``cudaStreamBeginCaptureToGraph`` with ``graph=``."""
        if self._target is not None:
            _cuda.require("capture into an existing graph (cudaStreamBeginCaptureToGraph)", 12030)
            raw_deps, n = self._target.table.dep_list(self._deps)
            call(rt.cudaStreamBeginCaptureToGraph, s.ptr, self._target.handle, raw_deps, None, n,
                 mode)
        else:
            call(rt.cudaStreamBeginCapture, s.ptr, mode)

    @property
    def info(self):
        """What the capture has built so far (``cudaStreamGetCaptureInfo``): a
        :class:`~pycudagraph.capture.control.CaptureInfo` whose ``graph`` is the graph
        being captured into (the same object ``cap.graph`` is after the block)."""
        info = capture_info(self.stream, getattr(self, "_live", None) or self._target)
        if info.graph is not None and self._target is None:
            self._live = info.graph  # one wrapper per capture: it becomes cap.graph
        return info

    def update_dependencies(self, nodes, mode: str = "add", ports=None) -> None:
        """Add to (``"add"``) or replace (``"set"``) what the next captured work depends
        on (``cudaStreamUpdateCaptureDependencies``); see
        :func:`~pycudagraph.capture.control.update_capture_dependencies`."""
        update_capture_dependencies(self.stream, nodes, mode, ports)

    def _end(self):
        """``cudaStreamEndCapture``; returns (status before, err, raw graph)."""
        h = self.stream._addr
        status = _STATUS.get(int(rt.cudaStreamIsCapturing(h)[1] or 0), "unknown")
        err, raw = rt.cudaStreamEndCapture(h)
        with _open_lock:
            _open.discard(self)
            for registry, entry in ((_cuda.check.capture_watchers, self._failures),
                                    (_lifetime.capture_keeps, self._launched)):
                # by identity: two captures' lists may be equal (both empty)
                registry[:] = [item for item in registry if item is not entry]
        self._pool_error = self._close_pools()
        flush_deferred()
        return status, err, raw

    def _close_pools(self):
        """Stop routing framework allocations to the pool; the error, or None."""
        pools, self._pools = self._pools, None
        try:
            if pools is not None:
                pools.close()
        except Exception as exc:  # noqa: BLE001 - the capture fails with it (__exit__)
            return exc
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        s = self.stream
        unjoined = self._flow_close()  # forked streams with work not joined, in words
        status, err, raw = self._end()
        if _cuda.check.tracer is not None:
            _cuda.check.tracer("cudaStreamEndCapture", (s,), (err, raw))
        owned = self._target is None
        if exc is None and not err and status == "active" and self._pool_error is None:
            if owned:  # the wrapper cap.info handed out becomes cap.graph: its nodes stay valid
                self.graph = Graph.adopt_captured(raw, getattr(self, "_live", None))
            else:
                self.graph = self._target
            if self._keep or self._launched or self.pool is not None:
                pool = (self.pool,) if self.pool is not None else ()
                self.graph.table.ledger.keep_also(*self._keep, *self._launched, *pool)
            if self.collectives is not None:
                mark_collectives(self.graph, self.collectives, self._comms)
            run_end_hooks(self.graph)
            return False
        # Failure: end (done), destroy the partial graph, explain.
        if owned and raw is not None and int(raw):
            rt.cudaGraphDestroy(raw)
            if getattr(self, "_live", None) is not None:
                self._live.table.kill("was destroyed: its capture failed")
        rt.cudaGetLastError()
        if exc is not None and not isinstance(exc, Exception):
            return False  # KeyboardInterrupt, SystemExit...: propagate unchanged
        first = self._failures[0] if self._failures else None
        if first is None and isinstance(exc, CudaError):
            first = f"{exc.api} ({exc.name})"
        raw = first.split(" ")[0] if first else None
        broke = describe_failure(exc, tb, raw or "") if exc is not None else None
        parts = ["stream capture failed"]
        if broke is not None:
            parts.append(broke.located())
        if first:
            parts.append(f"; the first failing call through pycudagraph was {first}")
        elif broke is not None and broke.raw_call:
            parts.append(f"; the failing call was {broke.raw_call}")
        if exc is not None:
            parts.append(f"; the block raised {type(exc).__name__}: {exc}")
        elif self._pool_error is not None:
            parts.append(f"; ending the framework memory pool failed: {self._pool_error}")
        elif err:
            parts.append(f"; cudaStreamEndCapture returned {_cuda.check.runtime_name_text(err)[0]}")
        if status == "invalidated":
            parts.append("; the capture had been invalidated")
        if unjoined:
            parts.append("; " + unjoined)
        advice = broke.advice() if broke is not None else ""
        message = "".join(parts) + ". " + advice + _CAUSES + " " + _DOCTOR
        place = broke.place if broke is not None else None
        raise CaptureError(message, failed_call=raw or (broke.raw_call if broke else None) or None,
                           failed_at=str(place) if place is not None else None) from exc


class recapture(capture):
    """Capture ``stream`` again into ``graph``, which an earlier capture made, updating
    its nodes in place (``cudaStreamBeginRecaptureToGraph``, CUDA 13.3+).

    The work must create nodes in the same order and topology as the first capture; on
    a mismatch the capture fails and ``graph`` must be discarded. Parameters as
    :class:`capture` (``graph`` required, no ``deps``).
    """

    def __init__(self, stream, graph: Graph, mode: str = "global", keep=(), pool=None):
        if not isinstance(graph, Graph):
            raise ArgumentError(f"recapture: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        super().__init__(stream, mode=mode, graph=graph, keep=keep, pool=pool)

    def _begin(self, s, mode) -> None:
        fn = _cuda.versions.gated("cudaStreamBeginRecaptureToGraph", RECAPTURE_VERSION)
        call(fn, s.ptr, mode, self._target.handle, None)


def _end_open_captures() -> None:
    """At exit: end every capture still open and destroy its partial graph, quietly."""
    for cap in list(_open):
        _status, _err, raw = cap._end()
        if cap._target is None and raw is not None and int(raw):
            rt.cudaGraphDestroy(raw)
    rt.cudaGetLastError()


_lifetime.on_exit(_end_open_captures, 10)
