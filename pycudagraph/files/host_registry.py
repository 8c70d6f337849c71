"""Host functions by name, for graph files: a host node is saved as the name its callable
was registered under, never as code, and a loading process supplies its own callable for
that name (:func:`register_host_fn`)."""

from __future__ import annotations

import threading
from typing import Callable

from ..errors import ArgumentError
from ..runtime.values import require_callable

__all__ = ["register_host_fn", "host_fn", "host_fn_name", "registered_host_fns"]

_lock = threading.Lock()
_by_name: dict[str, Callable] = {}


def register_host_fn(name: str, fn: Callable) -> None:
    """Register ``fn`` as the host function called ``name`` in graph files. No CUDA call.

    ``Graph.save`` writes a host node whose callable is registered as its name (and its
    arguments, which must be JSON values: None, bool, int, float, str and lists of them);
    :func:`pycudagraph.load` builds the node with the callable registered under that name
    in the loading process. Registering a name again replaces its callable.

    Parameters
    ----------
    name : str
        1 to 256 printable characters.
    fn : callable
        Runs on a CUDA host thread: it must not call CUDA.
    """
    if not isinstance(name, str) or not 1 <= len(name) <= 256 or not name.isprintable():
        raise ArgumentError(f"register_host_fn: name must be 1 to 256 printable characters, "
                            f"got {name!r}")
    require_callable(fn, "fn", "register_host_fn")
    with _lock:
        _by_name[name] = fn


def host_fn(name: str) -> Callable | None:
    """The callable registered as ``name``, or ``None``. No CUDA call."""
    return _by_name.get(name)


def host_fn_name(fn) -> str | None:
    """The name ``fn`` was registered under (the latest, if several), or ``None``. Bound
    methods match by equality. No CUDA call."""
    with _lock:
        items = list(_by_name.items())
    found = None
    for name, f in items:
        if f is fn or f == fn:
            found = name
    return found


def registered_host_fns() -> list[str]:
    """The registered names. No CUDA call."""
    return sorted(_by_name)
