"""What other wings add to every capture, registered here so that ``capture/`` imports none
of them.

A pool hook is called as ``hook(pool, stream)`` when ``pcg.capture`` opens, with the
capture's ``pool=`` argument and its :class:`~pycudagraph.Stream`. It returns None (nothing
to route) or an activation with a ``pool`` attribute and a ``close()`` method, which the
capture calls when it ends. The framework pools (:mod:`pycudagraph.frameworks.pools`)
register the one hook there is today; with none registered a capture routes nothing, and a
``pool=`` argument is refused.

An end hook is called as ``hook(graph)`` when a capture ends with its graph made (the audit
notes the allocation of each address the graph bakes in, :mod:`pycudagraph.inspect.ranges`).
An end hook must not raise; one that does is passed over.
"""

from __future__ import annotations

from ..errors import ArgumentError

__all__ = ["register_pool_hook", "open_pools", "register_end_hook", "run_end_hooks"]

_pool_hooks: list = []
_end_hooks: list = []


def register_pool_hook(hook) -> None:
    """Have every later capture call ``hook(pool, stream)`` on entry (idempotent). No CUDA call."""
    if not callable(hook):
        raise ArgumentError(f"register_pool_hook: hook must be callable, got {type(hook).__name__}")
    if hook not in _pool_hooks:
        _pool_hooks.append(hook)


def open_pools(pool, stream):
    """The activation of the registered pool hook for a capture opening on ``stream``, or
    None. No CUDA call of its own."""
    if not _pool_hooks:
        if pool is not None:
            raise ArgumentError("capture: pool= needs the framework pools "
                                "(import pycudagraph, which registers them)")
        return None
    return _pool_hooks[-1](pool, stream)


def register_end_hook(hook) -> None:
    """Have every later capture call ``hook(graph)`` when it ends with its graph made
    (idempotent). No CUDA call."""
    if not callable(hook):
        raise ArgumentError(f"register_end_hook: hook must be callable, got {type(hook).__name__}")
    if hook not in _end_hooks:
        _end_hooks.append(hook)


def run_end_hooks(graph) -> None:
    """Call each end hook with the graph a capture made; a hook that raises is passed over.
    No CUDA call of its own."""
    for hook in _end_hooks:
        try:
            hook(graph)
        except Exception:  # noqa: BLE001 - a capture that worked never fails for a hook
            pass
