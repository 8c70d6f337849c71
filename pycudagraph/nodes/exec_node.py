"""What an exec knows about one of its nodes: the :class:`ExecNode` record.

A :class:`~pycudagraph.GraphExec` keeps one dict of these, keyed by node identity
(``id(node)``, checked with ``is``: a handle CUDA reuses, or an address Python reuses, can
never reach a record). The node's class makes the record on the exec's first per-node call
for it (:meth:`Node.exec_record <pycudagraph.nodes.base.Node.exec_record>`) and its
exec-side setter receives it. The record holds:

- the node of the exec's graph, whose handle names the node in ``cudaGraphExec*`` calls,
  and the exec's raw handle;
- ``source``: what the node kept alive when the exec took the graph (instantiation, or
  the update that paired it), the starting point of the exec's own copies;
- ``args``: the exec's own argument storage for a kernel node (a copy of the node's
  :class:`~pycudagraph.compile.args.ArgPack`, or the argument bytes of a kernel node
  read back from the driver), so one argument can be rewritten in place;
- ``keep``: what the exec keeps alive for this node, by place (``"args"``, ``"event"``,
  ``"memcpy"`` ...). Replacing a place hands what it held to ``retire`` (a launch already
  queued may still read it);
- ``twin``: after ``exe.update(g2)``, a weak reference to the node of ``g2`` that stands
  for this one. Its key in the exec's dict dies with that node object.
"""

from __future__ import annotations

import weakref

from .._cuda.fast import ExecNodeBase
from .._lifetime import register_contents

__all__ = ["ExecNode", "ExecNodes"]


class ExecNodes(dict):
    """An exec's records, ``id(node) -> ExecNode`` (a dict that weak references can reach,
    so a twin's key can go with the twin)."""

    __slots__ = ("__weakref__",)


class ExecNode(ExecNodeBase):
    """The exec's record of one node (see the module docstring)."""

    # node, node_h, exec_raw, exec_h, args and retire (what an argument update reads) are
    # the base's (fast.ExecNodeBase: a C type where the extension is built)
    __slots__ = ("source", "keep", "twin", "__weakref__")

    def __init__(self, node, exec_raw, source: tuple, retire):
        self.node = node
        self.node_h = int(node)
        self.exec_raw = exec_raw
        self.exec_h = int(exec_raw)
        self.source = source
        self.args = None
        self.keep: dict = {}
        self.twin = None
        self.retire = retire

    def stands_for(self, node) -> bool:
        """Whether ``node`` is this record's node or its live update twin."""
        return self.node is node or (self.twin is not None and self.twin() is node)

    def taken(self, node):
        """The node whose parameters the exec holds for this record while nothing was set
        since: after ``exe.update(g2)`` (or for a reused exec) the update's twin in ``g2``,
        else ``node``. No CUDA call."""
        twin = self.twin() if self.twin is not None else None
        return twin if twin is not None else node

    def pair(self, twin, table: dict) -> None:
        """``twin`` (a node of an update's graph) stands for this node from now on; its key
        in ``table`` (the exec's dict) goes when the twin object goes."""
        key = id(twin)
        me = weakref.ref(self)

        def gone(_ref, key=key, table_ref=weakref.ref(table)):
            rec, tab = me(), table_ref()
            if rec is not None and tab is not None and tab.get(key) is rec:
                del tab[key]

        self.twin = weakref.ref(twin, gone)
        table[key] = self

    def held(self, place, default=None):
        """What the exec keeps at ``place`` for this node (a tuple), or ``default``."""
        return self.keep.get(place, default)

    def hold(self, place, *objs) -> None:
        """Keep ``objs`` at ``place``; what was kept there is retired."""
        old = self.keep.pop(place, None)
        if objs:
            self.keep[place] = objs
        if old is not None:
            self.retire(old)

    def __repr__(self) -> str:
        return f"<ExecNode of {self.node!r} in exec 0x{self.exec_h:x}>"


register_contents(ExecNode, lambda r: (r.source, r.args, r.keep))
register_contents(ExecNodes, dict.values)
