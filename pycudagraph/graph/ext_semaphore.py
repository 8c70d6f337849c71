"""The external-semaphore builders of :class:`~pycudagraph.Graph` (the semaphores and the
nodes are in :mod:`pycudagraph.nodes.semaphore_nodes`)."""

from __future__ import annotations

from ..nodes.semaphore_nodes import ExternalSemaphore, ExtSemaphoreSignalNode, ExtSemaphoreWaitNode

__all__ = ["ExternalSemaphore", "GraphExtSemaphores"]


class GraphExtSemaphores:
    """The external-semaphore builders of :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    def add_ext_semaphore_signal(self, semaphores, values=None, deps=()):
        """A node signalling external semaphores (``cudaGraphAddExternalSemaphoresSignalNode``).

        Parameters
        ----------
        semaphores : ExternalSemaphore or sequence of them
        values : int or sequence of int, optional
            The value each timeline semaphore is set to (default 0).
        deps : sequence of Node

        Returns
        -------
        ExtSemaphoreSignalNode
        """
        return ExtSemaphoreSignalNode._add(self, deps, semaphores, values)

    def add_ext_semaphore_wait(self, semaphores, values=None, deps=()):
        """A node waiting on external semaphores (``cudaGraphAddExternalSemaphoresWaitNode``).

        Parameters
        ----------
        semaphores : ExternalSemaphore or sequence of them
        values : int or sequence of int, optional
            The value each timeline semaphore must reach (default 0).
        deps : sequence of Node

        Returns
        -------
        ExtSemaphoreWaitNode
        """
        return ExtSemaphoreWaitNode._add(self, deps, semaphores, values)
