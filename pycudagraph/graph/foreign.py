"""Graphs and execs someone else made (PyTorch, CuPy, a C++ library), adopted without owning.

``Graph.wrap(handle, owner)`` and ``GraphExec.wrap(handle, owner, graph=)`` make
pycudagraph objects for a raw ``cudaGraph_t`` / ``cudaGraphExec_t``. They never destroy the
handle (the maker does); they keep ``owner`` (the object that does) alive as long as they
live, so the handle stays valid. Introspection, DOT, listing, per-node updates of captured
kernel nodes (:mod:`pycudagraph.nodes.captured_kernel`) and :meth:`GraphExec.rebind` work on them.
"""

from __future__ import annotations

from .._cuda import context, rt
from .._lifetime import Ledger
from ..errors import ArgumentError

__all__ = ["raw_int", "wrap_graph", "wrap_exec"]


def raw_int(handle, what: str) -> int:
    """The integer value of a raw handle: an int, a cuda.bindings handle (``cudaGraph_t``,
    ``CUgraph``, ...) or anything with ``__int__``; a null handle raises."""
    if isinstance(handle, bool):
        raise ArgumentError(f"{what}: expected a {what} handle, got {handle!r}")
    try:
        h = int(handle)
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: expected an int or a cuda.bindings handle, got "
                            f"{type(handle).__name__}") from None
    if h <= 0:
        raise ArgumentError(f"{what}: the handle is null ({h})")
    return h


def wrap_graph(cls, handle, owner=None):
    """A :class:`~pycudagraph.Graph` for a ``cudaGraph_t`` made elsewhere (not destroyed
    by pycudagraph; ``owner`` is kept alive while the Graph lives)."""
    h = raw_int(handle, "cudaGraph_t")
    context.ensure_device()
    return cls._wrap(rt.cudaGraph_t(h), owner=owner)


def _noop() -> None:
    return None


def wrap_exec(cls, handle, owner, graph, never):
    """A :class:`~pycudagraph.GraphExec` for a ``cudaGraphExec_t`` made elsewhere.

    ``graph`` (a :class:`~pycudagraph.Graph`, e.g. from :meth:`Graph.wrap`) is the graph it
    was instantiated from, which per-node updates and :meth:`GraphExec.rebind` address;
    ``never`` is the exec module's "not launched yet" marker.
    """
    h = raw_int(handle, "cudaGraphExec_t")
    if graph is not None and not hasattr(graph, "_wrap_child"):
        raise ArgumentError(f"GraphExec.wrap: graph must be a pycudagraph.Graph (use "
                            f"Graph.wrap(handle) for a raw one), got {type(graph).__name__}")
    context.ensure_device()
    self = cls.__new__(cls)
    self._raw = rt.cudaGraphExec_t(h)
    self._h = self._addr = h
    self.graph = graph
    self._packs = {}
    self._src = {}
    self._held = ()
    held = {"owner": (owner,)}
    if graph is not None:
        held["graph"] = graph.keepalive() + (graph,)
        graph._execs.add(self)
    self._ledger = Ledger(held, owner=self)
    self._aliases = {}
    self._pending = None
    self._host_ids = set()
    self._host_scan = True
    self._last_stream = never
    self._fin = _noop  # not ours to destroy
    return self
