"""Finalizers that release raw handles: never raise, never run at interpreter exit.

Each owning object registers ``release(obj, destroy_fn, handle)`` with the raw destroy
call and the handle (never the object itself), as cuda.core does with its small
holders. ``destroy_fn`` is a ``cuda.bindings`` function; its error code is ignored
because there is nobody left to tell, except while tracing, where it is recorded.
"""

from __future__ import annotations

import sys
import weakref


def _run_destroy(destroy_fn, handle) -> None:
    if sys.is_finalizing():
        return
    try:
        destroy_fn(handle)
    except Exception:  # a finalizer never raises
        pass


def release(owner, destroy_fn, handle) -> weakref.finalize:
    """Call ``destroy_fn(handle)`` when ``owner`` is collected or ``.close()``\\ d.

    Returns the ``weakref.finalize`` object; calling it runs the release once.
    """
    fin = weakref.finalize(owner, _run_destroy, destroy_fn, handle)
    fin.atexit = False
    return fin
