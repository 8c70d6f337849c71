"""Event nodes: record an event, or wait for one."""

from __future__ import annotations

from .._cuda import call, rt
from ..runtime.values import require_event
from .base import Node, NodeType
from .file_records import EventFile

__all__ = ["EventRecordNode", "EventWaitNode"]

_EVENT_FIELDS = frozenset({"event"})


class _EventNode(Node, EventFile):
    __slots__ = ("_event",)
    _add_fn = _get = _set = _exec_set_fn = None

    def __init__(self, table, h: int, event=None):
        super().__init__(table, h)
        self._event = event

    @classmethod
    def build(cls, table, deps, event) -> "_EventNode":
        """``cudaGraphAddEventRecordNode`` / ``cudaGraphAddEventWaitNode``."""
        require_event(event, f"add_{cls.type}")
        raw_deps, nd = table.dep_list(deps)
        raw = call(cls._add_fn, table.raw, raw_deps, nd, event.handle)
        return table.register(cls(table, int(raw), event), event)

    @property
    def event(self):
        """The :class:`Event` (ours) or raw ``cudaEvent_t`` (read with
        ``cudaGraphEventRecordNodeGetEvent`` / ``cudaGraphEventWaitNodeGetEvent``
        for a node not built here)."""
        if self._event is not None:
            return self._event
        return call(self._get, self.handle)

    @property
    def params(self) -> dict:
        """``{"event": ...}``, as :attr:`event` reads it (``cudaGraphEventRecordNodeGetEvent`` or
        ``cudaGraphEventWaitNodeGetEvent`` for a node not built here)."""
        return {"event": self.event}

    def set_params(self, event) -> None:
        """Use another event (``cudaGraphEventRecordNodeSetEvent`` /
        ``cudaGraphEventWaitNodeSetEvent``).

        Parameters
        ----------
        event : Event
        """
        require_event(event, "set_params")
        call(self._set, self.handle, event.handle)
        self._event = event
        self._table.register(self, event)

    def exec_set(self, rec, event) -> None:
        """``cudaGraphExecEventRecordNodeSetEvent`` / ``cudaGraphExecEventWaitNodeSetEvent``."""
        require_event(event, "set_params")
        call(self._exec_set_fn, rec.exec_raw, rec.node.handle, event.handle)
        rec.hold("event", event)

    def describe(self) -> str:
        """One line: the node type and the event handle (as :attr:`event` reads it)
        (``cudaGraphEventRecordNodeGetEvent`` / ``cudaGraphEventWaitNodeGetEvent``)."""
        return f"{self.type} 0x{int(self.event.handle if self._event else self.event):x}"

    # Facets (:mod:`pycudagraph.nodes.facets`) ---------------------------------------

    @property
    def exec_fields(self) -> frozenset:
        """``event`` where the node holds an :class:`~pycudagraph.Event` (what
        :meth:`exec_set` takes); none for a raw event read back. No CUDA call."""
        return _EVENT_FIELDS if self._event is not None else frozenset()

    def fields(self) -> dict:
        """``event``, as :attr:`event` reads it (``cudaGraphEventRecordNodeGetEvent`` /
        ``cudaGraphEventWaitNodeGetEvent`` for a node not built here)."""
        return {"event": self.event}


class EventRecordNode(_EventNode):
    """Records an event (``cudaGraphAddEventRecordNode``)."""

    type = NodeType.EVENT_RECORD
    exec_call = "cudaGraphExecEventRecordNodeSetEvent"
    __slots__ = ()
    _add_fn = staticmethod(rt.cudaGraphAddEventRecordNode)
    _get = staticmethod(rt.cudaGraphEventRecordNodeGetEvent)
    _set = staticmethod(rt.cudaGraphEventRecordNodeSetEvent)
    _exec_set_fn = staticmethod(rt.cudaGraphExecEventRecordNodeSetEvent)


class EventWaitNode(_EventNode):
    """Waits for an event (``cudaGraphAddEventWaitNode``)."""

    type = NodeType.EVENT_WAIT
    exec_call = "cudaGraphExecEventWaitNodeSetEvent"
    __slots__ = ()
    _add_fn = staticmethod(rt.cudaGraphAddEventWaitNode)
    _get = staticmethod(rt.cudaGraphEventWaitNodeGetEvent)
    _set = staticmethod(rt.cudaGraphEventWaitNodeSetEvent)
    _exec_set_fn = staticmethod(rt.cudaGraphExecEventWaitNodeSetEvent)
