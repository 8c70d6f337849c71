"""External semaphores (Vulkan, D3D12, ...) and the graph nodes that signal and wait on them.

:class:`ExternalSemaphore` holds a ``cudaExternalSemaphore_t``: imported from a file
descriptor another API exported (``cudaImportExternalSemaphore``; a Vulkan timeline
semaphore exported as an fd, say), or one made elsewhere (:meth:`ExternalSemaphore.wrap`).
``Graph.add_ext_semaphore_signal`` / ``add_ext_semaphore_wait`` add the nodes; each
semaphore gets a value (the fence value of a timeline semaphore; ignored by binary ones).
"""

from __future__ import annotations

from .._cuda import call, ensure_device, rt
from .._lifetime import release
from ..errors import ArgumentError, ClosedError
from ..runtime.values import bool_arg, raw_int, seq_arg
from .base import Node, NodeType

__all__ = ["ExternalSemaphore", "ExtSemaphoreSignalNode", "ExtSemaphoreWaitNode",
           "semaphore_list"]

_T = rt.cudaExternalSemaphoreHandleType


class ExternalSemaphore:
    """A CUDA external semaphore (``cudaExternalSemaphore_t``).

    Made by :meth:`import_fd` (destroyed with ``cudaDestroyExternalSemaphore`` on
    :meth:`close` or collection) or :meth:`wrap` (not owned).
    """

    __slots__ = ("_raw", "_h", "_owner", "_fin", "__weakref__")

    def __init__(self, raw, owner=None, owned: bool = False):
        self._h = raw_int(raw, "ExternalSemaphore")
        self._raw = raw
        self._owner = owner
        self._fin = release(self, rt.cudaDestroyExternalSemaphore, raw) if owned else None

    @classmethod
    def import_fd(cls, fd: int, timeline: bool = True) -> "ExternalSemaphore":
        """Import a semaphore exported as a POSIX file descriptor (``cudaImportExternalSemaphore``).

        Parameters
        ----------
        fd : int
            The descriptor; CUDA owns it once the import succeeds.
        timeline : bool
            ``cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd`` (a Vulkan timeline
            semaphore) or ``cudaExternalSemaphoreHandleTypeOpaqueFd`` (a binary one).
        """
        if isinstance(fd, bool) or not isinstance(fd, int) or fd < 0:
            raise ArgumentError(f"import_fd: fd must be a non-negative int, got {fd!r}")
        timeline = bool_arg(timeline, "import_fd: timeline")
        desc = rt.cudaExternalSemaphoreHandleDesc()
        desc.type = (_T.cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd if timeline
                     else _T.cudaExternalSemaphoreHandleTypeOpaqueFd)
        desc.handle.fd = fd
        desc.flags = 0
        ensure_device()
        return cls(call(rt.cudaImportExternalSemaphore, desc), owned=True)

    @classmethod
    def wrap(cls, handle, owner=None) -> "ExternalSemaphore":
        """Adopt a ``cudaExternalSemaphore_t`` made elsewhere (not destroyed here;
        ``owner`` kept alive)."""
        return cls(rt.cudaExternalSemaphore_t(raw_int(handle, "cudaExternalSemaphore_t")), owner)

    @property
    def handle(self):
        """The raw ``cudaExternalSemaphore_t``."""
        if self._fin is not None and not self._fin.alive:
            raise ClosedError(f"ExternalSemaphore 0x{self._h:x}", "was closed")
        return self._raw

    def close(self) -> None:
        """Destroy the semaphore now (``cudaDestroyExternalSemaphore``) if it is ours."""
        if self._fin is not None:
            self._fin()

    def __repr__(self) -> str:
        return f"<pycudagraph.ExternalSemaphore 0x{self._h:x}>"


def semaphore_list(semaphores, values, where: str) -> tuple[list, list[int]]:
    """(semaphores, one value each), checked: a non-empty list of ExternalSemaphore and
    values as None (0), one int for all, or one int per semaphore (0 <= v < 2**64)."""
    sems = ([semaphores] if isinstance(semaphores, (ExternalSemaphore, str, bytes))
            else list(seq_arg(semaphores, f"{where}: semaphores")))
    if not sems:
        raise ArgumentError(f"{where}: needs at least one ExternalSemaphore")
    for s in sems:
        if not isinstance(s, ExternalSemaphore):
            raise ArgumentError(f"{where}: expected ExternalSemaphore objects, got {type(s).__name__}")
    if values is None:
        values = [0] * len(sems)
    elif isinstance(values, int) and not isinstance(values, bool):
        values = [values] * len(sems)
    else:
        try:
            values = list(values)
        except TypeError:
            raise ArgumentError(f"{where}: a semaphore value is an int in [0, 2**64), "
                                f"got {values!r}") from None
        if len(values) != len(sems):
            raise ArgumentError(f"{where}: {len(values)} values for {len(sems)} semaphores")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
            raise ArgumentError(f"{where}: a semaphore value is an int in [0, 2**64), got {v!r}")
    return sems, values


class _ExtSemaphoreNode(Node):
    """Shared body of the signal and wait nodes: a list of (semaphore, value)."""

    __slots__ = ()
    _what = ""

    @classmethod
    def _params(cls, semaphores, values):
        sems, values = semaphore_list(semaphores, values, f"ext_semaphore_{cls._what}")
        node = cls._NODE_PARAMS()
        per = []
        for v in values:
            q = cls._PARAMS()
            q.params.fence.value = v
            q.flags = 0
            per.append(q)
        node.extSemArray = [s.handle for s in sems]
        node.paramsArray = per
        node.numExtSems = len(sems)
        return node, tuple(sems)

    @classmethod
    def build(cls, table, deps, semaphores, values=None):
        p, sems = cls._params(semaphores, values)
        raw_deps, n = table.dep_list(deps)
        raw = call(cls._ADD, table.raw, raw_deps, n, p)
        return table.register(cls(table, int(raw)), sems, p)

    @property
    def params(self) -> list[tuple[int, int]]:
        """``[(semaphore handle, value), ...]`` read with the node's GetParams call."""
        p = call(self._GET, self.handle)
        n = int(p.numExtSems)
        return [(int(s), int(q.params.fence.value))
                for s, q in zip(list(p.extSemArray)[:n], list(p.paramsArray)[:n])]

    def set_params(self, semaphores, values=None) -> None:
        """Change the node in its graph (the node's SetParams call)."""
        p, sems = self._params(semaphores, values)
        call(self._SET, self.handle, p)
        self._table.register(self, sems, p)

    def exec_set(self, rec, semaphores=None, values=None) -> None:
        """The exec-side SetParams call; ``semaphores`` is required."""
        if semaphores is None:
            raise ArgumentError(f"set_params: an {self.type} node needs semaphores=")
        p, sems = self._params(semaphores, values)
        call(self._EXEC_SET, rec.exec_raw, rec.node.handle, p)
        rec.hold("ext_semaphore", sems, p)

    def describe(self) -> str:
        """One line: the node type. No CUDA call."""
        return f"{self.type}"

    def fields(self) -> dict:
        """``semaphores``: ``((semaphore handle, value), ...)``, read with the node's
        GetParams call (:attr:`params`)."""
        return {"semaphores": tuple(self.params)}


class ExtSemaphoreSignalNode(_ExtSemaphoreNode):
    """Signals external semaphores (``cudaGraphAddExternalSemaphoresSignalNode``;
    ``cudaGraphExternalSemaphoresSignalNodeGetParams`` / ``SetParams``;
    ``cudaGraphExecExternalSemaphoresSignalNodeSetParams``)."""

    type = NodeType.EXT_SEMAPHORE_SIGNAL
    __slots__ = ()
    _what = "signal"
    _NODE_PARAMS = rt.cudaExternalSemaphoreSignalNodeParams
    _PARAMS = rt.cudaExternalSemaphoreSignalParams
    _ADD = staticmethod(rt.cudaGraphAddExternalSemaphoresSignalNode)
    _GET = staticmethod(rt.cudaGraphExternalSemaphoresSignalNodeGetParams)
    _SET = staticmethod(rt.cudaGraphExternalSemaphoresSignalNodeSetParams)
    _EXEC_SET = staticmethod(rt.cudaGraphExecExternalSemaphoresSignalNodeSetParams)


class ExtSemaphoreWaitNode(_ExtSemaphoreNode):
    """Waits on external semaphores (``cudaGraphAddExternalSemaphoresWaitNode``;
    ``cudaGraphExternalSemaphoresWaitNodeGetParams`` / ``SetParams``;
    ``cudaGraphExecExternalSemaphoresWaitNodeSetParams``)."""

    type = NodeType.EXT_SEMAPHORE_WAIT
    __slots__ = ()
    _what = "wait"
    _NODE_PARAMS = rt.cudaExternalSemaphoreWaitNodeParams
    _PARAMS = rt.cudaExternalSemaphoreWaitParams
    _ADD = staticmethod(rt.cudaGraphAddExternalSemaphoresWaitNode)
    _GET = staticmethod(rt.cudaGraphExternalSemaphoresWaitNodeGetParams)
    _SET = staticmethod(rt.cudaGraphExternalSemaphoresWaitNodeSetParams)
    _EXEC_SET = staticmethod(rt.cudaGraphExecExternalSemaphoresWaitNodeSetParams)
