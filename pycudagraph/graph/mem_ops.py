"""The batch memory-op builder of :class:`~pycudagraph.Graph` (the operations and the node
are in :mod:`pycudagraph.nodes.batch_mem_op`)."""

from __future__ import annotations

from ..nodes.batch_mem_op import BatchMemOpNode

__all__ = ["GraphMemOps"]


class GraphMemOps:
    """The batch memory-op builder of :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    def add_batch_mem_op(self, ops, deps=()) -> BatchMemOpNode:
        """A node running stream memory operations in order (driver
        ``cuGraphAddBatchMemOpNode``).

        Parameters
        ----------
        ops : MemOp or sequence of MemOp
            From :func:`~pycudagraph.wait_value`, :func:`~pycudagraph.write_value`,
            :func:`~pycudagraph.flush_remote_writes`, :func:`~pycudagraph.memory_barrier`.
        deps : sequence of Node

        Returns
        -------
        BatchMemOpNode
        """
        return BatchMemOpNode._add(self, deps, ops)
