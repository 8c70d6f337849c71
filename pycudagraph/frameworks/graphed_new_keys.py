"""How a graphed callable meets a key it has no graph for: capture it now
(``capture="inline"``), or queue it for the capture thread and run the call eagerly
(``capture="background"``, :mod:`.graphed_background`); a key whose capture fails raises
(``fallback="raise"``) or runs eagerly from then on with one warning that carries the
capture's error (``fallback="eager"``); a captured key is admitted through the key table's
memory budget (:meth:`.graphed_keys.KeyTable.admit`).

A background capture during which the watched weights moved (:mod:`.weight_watch`) is
thrown away: it may read the old ones.

:class:`NewKeys` is a part of :class:`~.graphed.GraphedCallable` (a base class): it uses
the callable's table, capturer, lock, stats and weight watch.
"""

from __future__ import annotations

import warnings

from .._cuda import ensure_device
from ..errors import PyCudaGraphError
from ..runtime.device import device as device_scope
from ..runtime.stream import Event
from .arrays import substitute
from .graphed_background import CaptureJob
from .graphed_capture import place
from .ops import current_stream, framework_streams, twin

__all__ = ["NewKeys"]


class NewKeys:
    """The new-key half of a graphed callable (see the module docstring). Calls
    ``cudaEventRecord`` on the caller's stream (the capture waits for it), then the
    capture's calls (:class:`~.graphed_capture.Capturer`) here or in the capture thread."""

    def _new_key(self, key, args, kwargs, infos):
        """(entry, reference) of a key captured now, or (None, None) when this call runs
        eagerly (the key is eager, its capture is in flight or was just queued, or failed
        with ``fallback="eager"``)."""
        t = self._keys
        if key in t.eager:
            self._warn_eager(key)
            return None, None
        if key in t.pending:
            return None, None
        failed = t.failed.pop(key, None)
        if failed is not None:  # a background capture failed, fallback="raise"
            raise PyCudaGraphError(failed)
        if self.capture == "background":
            self._submit(key, args, kwargs, infos)
            return None, None
        return self._capture(key, args, kwargs, infos)

    def _capture(self, key, args, kwargs, infos):
        """Capture a key now, in the calling thread; (entry, reference) or (None, None)."""
        t = self._keys
        frameworks, device = place(infos)
        try:
            with device_scope(device) if device is not None else _nothing():
                device = ensure_device() if device is None else device
                now = self.stream.ptr if self.stream is not None else current_stream(frameworks, device)
                ready = Event(timing=False)
                ready.record(now)
                entry, reference = self._capturer.capture(key, args, kwargs, infos, device, ready)
        except Exception as exc:
            self._stats.failed_captures += 1
            if self.fallback == "raise":
                raise
            t.run_eagerly(key, self._failure(infos, exc))
            self._warn_eager(key)
            return None, None
        entry.bound = (args, kwargs)
        if not self._added(entry):
            return None, None
        return entry, (reference if self.check else None)

    def _added(self, entry, warn: bool = True) -> bool:
        """Admit a captured entry (memory budget); False when it runs eagerly instead (its
        warning now, or, from the capture thread, at the key's next call)."""
        self._stats.captures += 1
        why = self._keys.admit(entry, self._stats)
        if why:
            self._keys.eager[entry.key][0] = f"graphed({_name(self.fn)}): a key's graph: {why}"
            if warn:
                self._warn_eager(entry.key)
            return False
        if entry.plan.unproven and not self.check:
            warnings.warn(f"graphed({_name(self.fn)}): rebinding cannot be proven right for "
                          f"this input key: {entry.plan.unproven[0]}; pass check=True to "
                          "compare with eager execution", RuntimeWarning, stacklevel=5)
        return True

    def _submit(self, key, args, kwargs, infos) -> None:
        """Copy the inputs on the caller's stream and queue the key's capture."""
        frameworks, device = place(infos)
        with device_scope(device) if device is not None else _nothing():
            device = ensure_device() if device is None else device
            fixed = self.stream.ptr if self.stream is not None else None
            with framework_streams(fixed, device):
                warm = substitute((args, kwargs), twin)
            ready = Event(timing=False)
            ready.record(fixed if fixed is not None else current_stream(frameworks, device))
        watch = self.weight_watch
        job = CaptureJob(key, args, kwargs, infos, device, ready, warm, self._keys.generation,
                         watch.snapshot() if watch is not None else None)
        self._keys.pending[key] = job
        self._background.submit(job)

    def _capture_job(self, job):
        """In the capture thread: warm up and capture (no lock held)."""
        return self._capturer.capture(job.key, job.args, job.kwargs, job.infos, job.device,
                                      job.ready, job.warm)[0]

    def _finish_job(self, job, entry, error) -> None:
        """In the capture thread: add the key, or note why it failed."""
        with self._lock:
            t = self._keys
            if t.pending.get(job.key) is not job or job.generation != t.generation:
                return  # cleared meanwhile: thrown away
            del t.pending[job.key]
            if error is not None:
                self._stats.failed_captures += 1
                why = self._failure(job.infos, error)
                if self.fallback == "eager":
                    t.run_eagerly(job.key, why)
                else:
                    t.failed[job.key] = why
                return
            why = self._weights_since(job)
            if why is not None:
                self._weights_moved_meanwhile(job.key, why)
                return
            entry.bound = (job.args, job.kwargs)
            entry.needs_check = bool(self.check)
            self._added(entry, warn=False)

    def _weights_since(self, job) -> str | None:
        """What moved among the watched weights while ``job``'s capture ran, or None."""
        watch = self.weight_watch
        if job.weights is None or watch is None:
            return None
        return watch.since(job.weights)

    def _weights_moved_meanwhile(self, key, why: str) -> None:
        """Throw away a capture whose weights moved while it ran (it may read the old ones):
        the key's next call queues it again; the second time, the key runs eagerly (a
        function that replaces its own weights as it runs)."""
        t = self._keys
        t.discarded[key] = t.discarded.get(key, 0) + 1
        if t.discarded[key] >= 2:
            t.run_eagerly(key, f"graphed({_name(self.fn)}): {why} while each of 2 captures "
                               "of this key ran (does the function replace its own weights?); "
                               "capture='inline' records them after the capture")

    def _failure(self, infos, exc) -> str:
        shapes = ", ".join(str(tuple(getattr(i.obj, "shape", ()))) for i in infos[:4])
        return (f"graphed({_name(self.fn)}): the capture of the call with arrays of shapes "
                f"[{shapes}] failed: {type(exc).__name__}: {exc}")

    def _warn_eager(self, key) -> None:
        why = self._keys.eager[key]
        if not why[1]:
            why[1] = True
            warnings.warn(why[0] + "; that key runs eagerly from now on", RuntimeWarning,
                          stacklevel=5)

    def _eager(self, args, kwargs, infos):
        """``fn`` run on the caller's current stream, under ``torch.no_grad()``."""
        device = next((i.device for i in infos if i.device >= 0), None)
        if device is None:
            return self.fn(*args, **kwargs)
        with framework_streams(None, device):
            return self.fn(*args, **kwargs)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> bool:
        return False


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
