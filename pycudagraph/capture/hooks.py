"""What other wings add to every capture, registered here so that ``capture/`` imports none
of them.

A pool hook is called as ``hook(pool, stream)`` when ``pcg.capture`` opens, with the
capture's ``pool=`` argument and its :class:`~pycudagraph.Stream`. It returns None (nothing
to route) or an activation with a ``pool`` attribute and a ``close()`` method, which the
capture calls when it ends. The framework pools (:mod:`pycudagraph.frameworks.pools`)
register the one hook there is today; with none registered a capture routes nothing, and a
``pool=`` argument is refused.
"""

from __future__ import annotations

from ..errors import ArgumentError

__all__ = ["register_pool_hook", "open_pools"]

_pool_hooks: list = []


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
