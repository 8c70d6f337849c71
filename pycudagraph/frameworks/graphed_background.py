"""``capture="background"``: new keys of a graphed callable are captured by a side thread
while their calls run eagerly.

The calling thread copies the inputs of a new key's first call (on its own stream, so the
copies are ordered after the work that made the inputs), records an event there and
hands a :class:`CaptureJob` to the callable's capture thread, then runs ``fn`` eagerly.
The capture thread (a daemon, one per callable, started when a job comes and gone when none
is left) waits for the event on its side stream, warms up on the copies and captures
``fn`` on the call's own arguments: a capture runs nothing, so it only needs them alive
(the job holds them) and their addresses, alignment and aliasing are the key's own. Jobs
run one at a time, so captures into a shared pool never overlap. No call waits for a
capture: a call for a key whose capture is in flight runs eagerly, and the capture thread
takes the callable's lock only to add the finished key.

The capture thread holds the GIL while it runs ``fn`` (warm-up and capture), so calls made
meanwhile run somewhat slower; none blocks.
"""

from __future__ import annotations

import collections
import threading
import weakref
from dataclasses import dataclass

from ..runtime.device import device as device_scope

__all__ = ["CaptureJob", "BackgroundCaptures"]


@dataclass
class CaptureJob:
    """What the capture thread needs for one key: the first call's arguments (captured)
    and copies of them (``warm``: warmed up on), the event after those copies, the device,
    and the key table's generation when it was made (a :meth:`clear` since throws it away);
    ``weights``: the watched module's tensors and addresses then
    (:meth:`.weight_watch.WeightWatch.snapshot`), or None."""

    key: tuple
    args: tuple
    kwargs: dict
    infos: list
    device: int
    ready: object
    warm: tuple
    generation: int
    weights: tuple | None = None


class BackgroundCaptures:
    """The capture thread of one graphed callable. ``capture(job)`` returns the entry (it
    runs in the thread); ``finish(job, entry, error)`` adds it to the table (it takes the
    callable's lock and never raises). Both are methods of the callable, held weakly
    (``weakref.WeakMethod``): the callable holds this, so a strong hold would make a cycle
    that keeps a dropped callable, its graphs and their pools until the collector runs.
    Jobs queued when the callable goes are dropped. No CUDA call of its own."""

    def __init__(self, capture, finish):
        self._capture = weakref.WeakMethod(capture)
        self._finish = weakref.WeakMethod(finish)
        self._jobs: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, job: CaptureJob) -> None:
        """Queue ``job``; start the capture thread if none runs."""
        with self._lock:
            self._jobs.append(job)
            self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, daemon=True,
                                                name="pycudagraph-graphed-capture")
                self._thread.start()

    def cancel(self) -> None:
        """Drop the jobs not begun yet (the one running ends and is thrown away)."""
        with self._lock:
            self._jobs.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no job is queued or running; False on timeout."""
        return self._idle.wait(timeout)

    def _drain(self) -> None:
        while True:
            capture, finish = self._capture(), self._finish()
            with self._lock:
                if capture is None or finish is None:  # the callable went
                    self._jobs.clear()
                if not self._jobs:
                    self._thread = None
                    self._idle.set()
                    return
                job = self._jobs.popleft()
            entry = error = None
            try:
                with device_scope(job.device):
                    entry = capture(job)
            except Exception as exc:  # noqa: BLE001 - the key's fallback decides
                error = exc
            job.warm = None  # the copies go now (the side stream has finished with them)
            try:
                finish(job, entry, error)
            except Exception:  # noqa: BLE001 - never let the thread die with jobs queued
                pass
