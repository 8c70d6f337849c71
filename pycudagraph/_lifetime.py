"""Finalizers that release raw handles: never raise, never run at interpreter exit.

Each owning object registers ``release(obj, destroy_fn, handle)`` with the raw destroy
call and the handle (never the object itself), as cuda.core does with its small
holders. ``destroy_fn`` is a ``cuda.bindings`` function; its error code is ignored
because there is nobody left to tell.

A destroy that comes due while a ``pcg.capture`` block is active (the garbage collector
can run anywhere) is deferred until the capture ends: ``cudaFree`` or
``cudaGraphDestroy`` inside a capture would invalidate it.
"""

from __future__ import annotations

import sys
import weakref

from . import _cuda

_deferred: list = []


def _run_destroy(destroy_fn, handle) -> None:
    if sys.is_finalizing():
        return
    if _cuda.capture_watchers:
        _deferred.append((destroy_fn, handle))
        return
    try:
        destroy_fn(handle)
    except Exception:  # a finalizer never raises
        pass


def flush_deferred() -> None:
    """Run the destroys deferred during captures (called when the last capture ends)."""
    while _deferred and not _cuda.capture_watchers:
        destroy_fn, handle = _deferred.pop()
        _run_destroy(destroy_fn, handle)


def release(owner, destroy_fn, handle) -> weakref.finalize:
    """Call ``destroy_fn(handle)`` when ``owner`` is collected or ``.close()``\\ d.

    Returns the ``weakref.finalize`` object; calling it runs the release once.
    """
    fin = weakref.finalize(owner, _run_destroy, destroy_fn, handle)
    fin.atexit = False
    return fin
