"""Graphs and execs someone else made (PyTorch, CuPy, a C++ library), adopted without owning.

``Graph.wrap(handle, owner)`` and ``GraphExec.wrap(handle, owner, graph=)`` make
pycudagraph objects for a raw ``cudaGraph_t`` / ``cudaGraphExec_t``. They never destroy the
handle (the maker does); they keep ``owner`` (the object that does) alive as long as they
live, so the handle stays valid. Introspection, DOT, listing, per-node updates of captured
kernel nodes (:mod:`pycudagraph.nodes.captured_kernel`) and :meth:`GraphExec.rebind` work on them.
"""

from __future__ import annotations

from .._cuda import context, rt
from ..errors import ArgumentError
from ..runtime.values import raw_int
from .exec_reuse import origin_of

__all__ = ["wrap_graph", "exec_handle"]


def wrap_graph(cls, handle, owner=None):
    """A :class:`~pycudagraph.Graph` for a ``cudaGraph_t`` made elsewhere (not destroyed
    by pycudagraph; ``owner`` is kept alive while the Graph lives)."""
    h = raw_int(handle, "cudaGraph_t")
    context.ensure_device()
    return cls._wrap(rt.cudaGraph_t(h), owner=owner)


def exec_handle(handle, graph):
    """The ``cudaGraphExec_t`` of a handle made elsewhere, checked, with ``graph`` (its
    source :class:`~pycudagraph.Graph`, e.g. from :meth:`Graph.wrap`, or None) checked too.
    Per-node updates and :meth:`GraphExec.rebind` address ``graph``'s nodes."""
    h = raw_int(handle, "cudaGraphExec_t")
    if graph is not None and not hasattr(graph, "table"):
        raise ArgumentError(f"GraphExec.wrap: graph must be a pycudagraph.Graph (use "
                            f"Graph.wrap(handle) for a raw one), got {type(graph).__name__}")
    origin = origin_of(h)
    if origin:
        raise ArgumentError(
            f"GraphExec.wrap: exec 0x{h:x} is a pycudagraph GraphExec made by exec reuse (an "
            f"update of a released exec), whose nodes are those of graph 0x{origin:x}, not of "
            f"the graph it was instantiated with: use that GraphExec itself, or instantiate "
            f"with reuse off (pcg.exec_reuse(False))")
    context.ensure_device()
    return rt.cudaGraphExec_t(h)
