"""Lifetime: finalizers that never raise, and the ledger of what a graph or exec keeps alive.

Each owning object registers ``release(obj, destroy_fn, handle)`` with the raw destroy
call and the handle (never the object itself), as cuda.core does with its small
holders. ``destroy_fn`` is a ``cuda.bindings`` function; its error code is ignored
because there is nobody left to tell.

A destroy that comes due while a ``pcg.capture`` block is active (the garbage collector
can run anywhere) is deferred until the capture ends: ``cudaFree`` or
``cudaGraphDestroy`` inside a capture would invalidate it.

A :class:`Ledger` is the one place a graph or an exec records the Python objects its
nodes point at (buffers, arrays, callables, kernels, events, child graphs), and the
objects an update replaced while a launch may still read them.
"""

from __future__ import annotations

import sys
import weakref

from ._cuda import check

__all__ = ["release", "flush_deferred", "Ledger"]

_deferred: list = []


def _run_destroy(destroy_fn, handle) -> None:
    if sys.is_finalizing():
        return
    if check.capture_watchers:
        _deferred.append((destroy_fn, handle))
        return
    try:
        destroy_fn(handle)
    except Exception:  # a finalizer never raises
        pass


def flush_deferred() -> None:
    """Run the destroys deferred during captures (called when the last capture ends)."""
    while _deferred and not check.capture_watchers:
        destroy_fn, handle = _deferred.pop()
        _run_destroy(destroy_fn, handle)


def release(owner, destroy_fn, handle) -> weakref.finalize:
    """Call ``destroy_fn(handle)`` when ``owner`` is collected or ``.close()``\\ d.

    Returns the ``weakref.finalize`` object; calling it runs the release once.
    """
    fin = weakref.finalize(owner, _run_destroy, destroy_fn, handle)
    fin.atexit = False
    return fin


class Ledger:
    """What one graph or exec keeps alive.

    ``held`` maps a key (a node handle, or a name) to a tuple of objects; ``retired``
    holds objects an update replaced, until the owner knows no launch can still read them.
    """

    __slots__ = ("held", "retired")

    def __init__(self, held: dict | None = None):
        self.held: dict = dict(held) if held else {}
        self.retired: list = []

    def hold(self, key, *objs) -> None:
        """Keep ``objs`` under ``key``, replacing what was kept there."""
        if objs:
            self.held[key] = objs
        else:
            self.held.pop(key, None)

    def add(self, key, *objs) -> None:
        """Keep ``objs`` under ``key`` in addition to what is kept there."""
        self.held[key] = self.held.get(key, ()) + objs

    def drop(self, key) -> None:
        """Stop keeping what is under ``key`` (now: nothing can launch it any more)."""
        self.held.pop(key, None)

    def retire(self, obj) -> int:
        """Keep ``obj`` until :meth:`clear_retired`; returns how many are retired."""
        self.retired.append(obj)
        return len(self.retired)

    def clear_retired(self) -> None:
        self.retired.clear()

    def snapshot(self) -> tuple:
        """Everything held, as one tuple (what a copy of the owner must keep)."""
        return tuple(self.held.values())

    def __contains__(self, obj) -> bool:
        return any(_refers_to(v, obj) for v in self.held.values())


def _refers_to(value, obj) -> bool:
    if value is obj:
        return True
    if isinstance(value, (tuple, list)):
        return any(_refers_to(v, obj) for v in value)
    return False
