"""The reuse side of one exec: the box its finalizer parks from (:class:`ReuseBox`, also the
exec's ledger owner, ``ledger.extra[2]``), and what the exec's update code tells it or asks
it (:func:`mark_updated`, :func:`mark_unknown`, the aliases of a reused exec's own graph's
nodes, the origin graph it addresses its nodes through). No CUDA call here.
"""

from __future__ import annotations

from .._cuda.context import thread_state

__all__ = ["ReuseBox", "mark_updated", "mark_unknown", "set_aliases", "alias", "origin_graph"]


class ReuseBox(list):
    """The finalizer's box of an exec that may be parked (``box[0]``: its handle, 0 until
    the instantiate call fills it), and the exec's ledger owner (its update code finds it
    there). Holds the exec's graph and records while the exec holds them, nothing after."""
    __slots__ = ("graph", "flags", "device", "stamp", "records", "origin_h", "origin", "key",
                 "unknown", "aliases", "kernels")

    def __init__(self, graph, flags: int):
        super().__init__((0,))
        self.graph, self.flags, self.device = graph, flags, thread_state.device
        self.stamp = self.records = self.origin = self.key = self.aliases = None
        self.origin_h, self.unknown = 0, False  # unknown: updated since, or records dropped
        self.kernels = ()  # a reused exec's origin's kernels

    def follow(self, taken: list, records) -> "ReuseBox":
        """The exec's graph dicts as taken (``taken[0]`` stays the graph's ledger dict while
        the graph is unchanged) and its records (of nodes it may have disabled)."""
        self.stamp, self.records = (taken[0] if taken else None), records
        return self

    def reused(self, parked) -> "ReuseBox":
        """This exec is ``parked``'s handle, which addresses nodes through its origin."""
        self[0], self.origin_h, self.key = parked.exec_h, parked.origin_h, parked.key
        self.kernels = parked.kernels[0]
        return self


def _box(extra: list) -> ReuseBox | None:  # an exec's ledger extra holds its owner at [2]
    return extra[2] if len(extra) > 2 and type(extra[2]) is ReuseBox else None


def mark_updated(extra: list) -> None:
    """The exec of ledger ``extra`` is being updated (``exe.update``, ``exe.apply``): not
    parked (the kernels its nodes launch are no longer its graph's)."""
    box = _box(extra)
    if box is not None:
        box.unknown = True


def mark_unknown(extra: list) -> None:
    """The exec of ledger ``extra`` drops its records: not parked (disabled nodes unknown)."""
    box = _box(extra)
    if box is not None:
        box.unknown, box.aliases = True, None


def set_aliases(extra: list, aliases: dict) -> None:
    """``id(node) -> (node, record)``: the reused exec's own graph's nodes after an update."""
    box = _box(extra)
    if box is not None:
        box.aliases = aliases or box.aliases


def alias(extra: list, node):
    """The record ``node`` of a reused exec's own graph stands for after an update, or None."""
    box = _box(extra)
    entry = box.aliases.get(id(node)) if box is not None and box.aliases else None
    return entry[1] if entry is not None and entry[0] is node else None


def origin_graph(extra: list, cls):
    """The origin graph (a ``cls`` wrapping it, made once) through which the exec of ledger
    ``extra`` addresses its nodes; None for one that addresses them through its own graph."""
    box = _box(extra)
    if box is None or not box.origin_h:
        return None
    if box.origin is None:
        box.origin = cls.wrap(box.origin_h)
    return box.origin
