"""What the driver knows of an address, and the allocation each address a graph bakes in lay
in when the graph was captured (or first audited), so that the audit can tell memory released
to the driver from a number that never was an address.

When a capture ends, :func:`note_capture` (registered with
:func:`~pycudagraph.capture.hooks.register_end_hook`) asks the driver about every address
the graph's nodes bake in (their :meth:`~pycudagraph.nodes.base.Node.sites`, through the one
walk) and keeps, for those inside a device or managed allocation, that allocation's start
and size: a small dict per graph, held by a weak reference to the graph's node table, so it
goes with the graph. :func:`remember` adds what an audit learns of a graph built here.

The notes cost one read of each node's parameters and one ``cuPointerGetAttributes`` per
distinct address when a capture ends: about 5.6 us per node, measured on an H200 as 3.7x the
bare driver calls' capture + instantiate of a 1,000-kernel graph (0.82x without them). So a capture notes its
addresses only while its graph has at most :data:`MAX_NODES` nodes (one
``cudaGraphGetNodes`` count tells); :func:`note_captures` sets the limit, or turns the notes
off or on for every size. A graph that was not noted is audited as before: a freed
address inside a kernel argument then reads as a number.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from .._cuda import call, dr, ensure_device, error_for, rt
from ..capture.hooks import register_end_hook
from ..errors import ArgumentError

__all__ = ["PointerInfo", "pointer_info", "seen_ranges", "remember", "note_capture", "MAX_NODES",
           "note_captures"]

_A = dr.CUpointer_attribute
_ATTRS = [_A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          _A.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, _A.CU_POINTER_ATTRIBUTE_RANGE_SIZE,
          _A.CU_POINTER_ATTRIBUTE_IS_MANAGED]
_MEMORY = {1: "host", 2: "device", 3: "device", 4: "managed"}
#: Kinds of memory whose allocation range is remembered (a driver allocation).
_ALLOCATED = ("device", "managed")
#: NodeTable -> {address: (allocation start, size)} as seen at capture or audit.
_SEEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_on = [True]
#: The most nodes (at the top level) a captured graph may have for its addresses to be
#: noted when the capture ends; None: no limit.
MAX_NODES = 256
_limit = [MAX_NODES]


@dataclass(frozen=True)
class PointerInfo:
    """What the driver knows of an address (``cuPointerGetAttributes``): ``memory`` is
    ``"device"``, ``"host"`` (pinned or registered), ``"managed"`` or ``"unregistered"``
    (pageable host memory, freed memory, or no address at all)."""

    memory: str
    device: int
    start: int
    size: int


def pointer_info(address: int) -> PointerInfo:
    """What the driver knows of ``address`` (``cuPointerGetAttributes``: memory type,
    device ordinal, allocation start and size, managed or not)."""
    ensure_device()
    err, values = dr.cuPointerGetAttributes(len(_ATTRS), _ATTRS, address)
    if err in (dr.CUresult.CUDA_ERROR_INVALID_VALUE, dr.CUresult.CUDA_ERROR_INVALID_CONTEXT):
        return PointerInfo("unregistered", -1, 0, 0)
    if err:
        raise error_for("cuPointerGetAttributes", err)
    kind, dev, start, size, managed = (int(v) if v is not None else 0 for v in values)
    memory = "managed" if managed else _MEMORY.get(kind, "unregistered")
    return PointerInfo(memory, dev if memory != "unregistered" else -1, start, size)


def seen_ranges(graph) -> dict:
    """``{address: (start, size)}``: the device allocation each address of ``graph`` lay in
    when it was captured or audited (empty when none was seen). No CUDA call."""
    return dict(_SEEN.get(graph.table, ()))


def remember(graph, address: int, info: PointerInfo) -> None:
    """Keep the allocation ``info`` tells of ``address`` (a device or managed one) for
    ``graph``, unless one is kept already. No CUDA call."""
    if info.memory in _ALLOCATED and info.size:
        seen = _SEEN.get(graph.table)
        if seen is None:
            seen = _SEEN[graph.table] = {}
        seen.setdefault(address, (info.start, info.size))


def note_capture(graph) -> None:
    """Remember the allocation of every address ``graph`` bakes in (the end of a capture):
    ``cuPointerGetAttributes`` per distinct address of the nodes' sites
    (``cuGraphKernelNodeGetParams`` & co. to read them). Never raises: a graph whose
    addresses cannot be read is audited without what it held at capture."""
    if not _on[0]:
        return
    try:
        limit = _limit[0]
        if limit is not None and call(rt.cudaGraphGetNodes, graph.handle, 0)[-1] > limit:
            return
        addresses = set()
        for node, _depth, _owner in graph.table.walk():
            try:
                sites = node.sites()
            except Exception:  # noqa: BLE001 - unreadable: the audit says so itself
                continue
            addresses.update(s.address for s in sites if s.role == "use")
        for a in addresses:
            remember(graph, a, pointer_info(a))
    except Exception:  # noqa: BLE001 - a capture never fails for the audit's notes
        pass


def note_captures(on: bool, max_nodes: int | None = MAX_NODES) -> bool:
    """Whether captures ending from now on note their addresses' allocations (on at
    start), for graphs of at most ``max_nodes`` top-level nodes (None: any size); returns
    the on/off setting it replaced. No CUDA call."""
    if not isinstance(on, bool):
        raise ArgumentError(f"note_captures: on must be True or False, got {on!r}")
    if max_nodes is not None and (isinstance(max_nodes, bool) or not isinstance(max_nodes, int)
                                  or max_nodes < 0):
        raise ArgumentError(f"note_captures: max_nodes must be None or an int >= 0, got "
                            f"{max_nodes!r}")
    old, _on[0], _limit[0] = _on[0], on, max_nodes
    return old


register_end_hook(note_capture)
