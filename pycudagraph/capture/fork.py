"""Side streams inside a capture: ``with cap.fork(2) as (s1, s2): ...``.

On entry an event is recorded on the capture stream (``cudaEventRecord``) and each side
stream waits for it (``cudaStreamWaitEvent``): the side streams join the capture, and what
they run becomes branches of the graph that start where the capture stream was. At the
end of the block each side stream records an event the capture stream waits for: the
branches join again, and what the capture stream runs next depends on all of them.

Work issued on a side stream after its join (or on a stream forked by hand) is not
joined; CUDA then refuses to end the capture (``cudaErrorStreamCaptureUnjoined``). The
capture checks its side streams before it ends and names each one with unjoined work:
which fork made it, the last call issued on it through pycudagraph (a trace hook records
them while a capture has forks) and the last node captured on it.
"""

from __future__ import annotations

import re

from .. import _cuda
from ..errors import ArgumentError, CaptureError
from ..runtime.stream import Event, Stream
from ..runtime.trace import call_site
from .control import capture_info, capture_mode

__all__ = ["Fork", "SideCalls", "unjoined_text"]


#: Calls that only ask about a stream (pycudagraph itself makes them while it checks the
#: capture); they are not "the last call issued on it".
_QUERY = re.compile(r"Get|Is[A-Z]|Query")


class SideCalls:
    """A trace hook that remembers the last raw call made on each forked stream.

    Installed in front of the trace hook in place (a ``pcg.trace`` keeps recording);
    :meth:`remove` puts that one back, or, if another was installed since, just stops.
    """

    def __init__(self):
        self.streams: dict = {}  # stream handle -> its last call, as text
        self.active = True
        self.previous = _cuda.check.set_tracer(self)

    def __call__(self, api, args, result) -> None:
        if self.previous is not None:
            self.previous(api, args, result)
        if not self.active or _QUERY.search(api):  # a query issues no work on the stream
            return
        for a in args:
            h = _stream_int(a)
            if h is not None and h in self.streams:
                name = getattr(args[0], "name", None) if args else None
                what = f"{api}({name})" if isinstance(name, str) else api
                self.streams[h] = f"{what} at {call_site(3)}"

    def remove(self) -> None:
        self.active = False
        if _cuda.check.tracer is self:
            _cuda.check.set_tracer(self.previous)


def _stream_int(a):
    if type(a) is int:
        return a
    kind = type(a).__name__
    if kind in ("cudaStream_t", "CUstream"):
        return int(a)
    if kind == "Stream":
        return getattr(a, "ptr", None)
    return None


class Side:
    """One forked stream: the object given back, its :class:`Stream`, and where it came from."""

    def __init__(self, given, stream: Stream, label: str):
        self.given, self.stream, self.label = given, stream, label


class Fork:
    """What ``cap.fork(n_or_streams)`` returns: entered, it forks the side streams from the
    capture stream and gives them back; on exit it joins them (see the module docstring)."""

    def __init__(self, cap, streams):
        if isinstance(streams, bool) or not isinstance(streams, (int, list, tuple)):
            raise ArgumentError(f"fork: give a number of side streams or a sequence of streams, "
                                f"got {type(streams).__name__}")
        if isinstance(streams, int) and streams < 1:
            raise ArgumentError(f"fork: a positive number of side streams, got {streams}")
        if not isinstance(streams, int) and not streams:
            raise ArgumentError("fork: an empty sequence of streams")
        self.cap = cap
        self.wanted = streams
        self.sides: list = []
        self.events: list = []  # kept until the capture ends (CUDA refers to them until then)

    def __enter__(self):
        cap = self.cap
        main = cap.stream
        if cap.status != "active":
            raise CaptureError("cap.fork: the capture is not active (use it inside the "
                               "`with pcg.capture(...)` block)")
        where = call_site(2)
        with capture_mode("relaxed"):  # stream and event creation while capturing
            if isinstance(self.wanted, int):
                given = [Stream(non_blocking=True) for _ in range(self.wanted)]
            else:
                given = list(self.wanted)
            streams = [Stream.wrap(g) for g in given]
            start = Event(timing=False)
        for k, s in enumerate(streams):
            if s.ptr == main.ptr or s.is_legacy_default:
                raise ArgumentError(f"fork: stream {k} is the capture stream or the legacy "
                                    "default stream; give other streams")
        self.events.append(start)
        hook = cap.fork_hook()
        hook.active = False  # our own fork and join calls are not the user's work
        try:
            start.record(main)  # cudaEventRecord: the fork point
            for k, (g, s) in enumerate(zip(given, streams)):
                s.wait(start)  # cudaStreamWaitEvent: the side stream joins the capture
                self.sides.append(Side(g, s, f"side stream {k} of the cap.fork at {where} ({s!r})"))
                hook.streams[s.ptr] = None
        finally:
            hook.active = True
        cap.forked(self)
        return tuple(given)

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self.join()
        except Exception:
            if exc is None:
                raise
        return False

    def join(self) -> None:
        """Make the capture stream wait for every side stream (``cudaEventRecord`` on each,
        ``cudaStreamWaitEvent`` on the capture stream)."""
        main = self.cap.stream
        hook = self.cap.fork_hook()
        with capture_mode("relaxed"):
            ends = [Event(timing=False) for _ in self.sides]
        self.events += ends
        hook.active = False
        try:
            for side, end in zip(self.sides, ends):
                end.record(side.stream)
                main.wait(end)
                hook.streams[side.stream.ptr] = None  # what ran before the join is joined
        finally:
            hook.active = True


def unjoined_text(sides, main: Stream, graph, calls: SideCalls | None) -> str:
    """Each side stream of ``sides`` capturing into ``graph`` whose last captured work
    neither the capture stream waits for nor any other node depends on, in words; ``""``
    when there is none (``cudaStreamGetCaptureInfo``, ``cudaGraphNodeGetDependentNodes``)."""
    if not sides:
        return ""
    main_info = capture_info(main, graph)
    if main_info.status != "active":
        return ""
    waited = {int(n) for n in main_info.dependencies}
    parts = []
    for side in sides:
        info = capture_info(side.stream, main_info.graph)
        if info.status != "active" or info.graph is None or info.graph.table.h != main_info.graph.table.h:
            continue
        loose = [n for n in info.dependencies if int(n) not in waited and not n.dependents]
        if not loose:
            continue
        last = (calls.streams.get(side.stream.ptr) if calls is not None else None) or \
            "none through pycudagraph (the work came from another library)"
        try:
            node = loose[-1].describe()
        except Exception:  # a node the driver cannot describe: say its type
            node = str(loose[-1].type)
        parts.append(f"{side.label} has work not joined back into the capture stream: the last "
                     f"call issued on it: {last}; the last node captured on it: {node}")
    return "; ".join(parts)
