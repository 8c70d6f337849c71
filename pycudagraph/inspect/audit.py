"""Every device address a graph bakes in, mapped to its allocation and owner:
``g.audit()`` and ``g.memory()``.

A graph holds addresses in its kernel arguments (every 8-byte aligned slot of every
argument, inside by-value structs too), its copies (``src``, ``dst``), memsets (``dst``)
and any other node's sites, in its own nodes and in child graphs and conditional bodies:
:func:`baked_addresses` lists them, one walk of the graph
(:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`) asking each node for its
:meth:`~pycudagraph.nodes.base.Node.sites`. :func:`audit` asks the driver what each is
(``cuPointerGetAttributes``: memory type, device, allocation range) and
:class:`~pycudagraph.frameworks.owners.OwnerIndex` who owns it, and reports each problem as
a :class:`Finding`:

================== =================================================================
``freed``          no live object owns the memory (it went back to a pool, or was
                   released to the driver): a later allocation may get it, and a
                   replay then reads or writes someone else's data, or unmapped memory
``not kept alive`` a live tensor, array or buffer owns it, but the graph does not keep
                   that object: drop it and the memory is free for others
``other device``   the memory lives on another device than the graph's
``pageable host``  a copy reads or writes pageable host memory (not pinned)
``not audited``    a node whose addresses could not be read (its arguments are passed
                   in ``extra``, or its bodies need a newer driver)
================== =================================================================

A kernel argument slot holds an address only by convention: slots whose value is no
allocation the driver knows are taken for numbers and skipped, unless the address lay in a
device allocation when the graph was captured (or at an earlier audit,
:mod:`~pycudagraph.inspect.ranges`): that memory was released to the driver since. A number
that happens to equal an address inside a live allocation is the one false reading left.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._cuda import ensure_device
from ..errors import PyCudaGraphError
from .ranges import PointerInfo, pointer_info, remember, seen_ranges

__all__ = ["Finding", "Baked", "PointerInfo", "baked_addresses",
           "pointer_info", "audit", "memory"]

#: The side of a copy that names host memory (a :class:`~pycudagraph.nodes.facets.Site`'s).
_HOST_SIDE = "host"
#: The memory kind of pinned or registered host memory (a :class:`PointerInfo`'s).
_PINNED = "host"


@dataclass(frozen=True)
class Finding:
    """One problem with an address a graph bakes in.

    Attributes
    ----------
    node : Node
        The node holding the address.
    place : str
        Where in the node (its :class:`~pycudagraph.nodes.facets.Site`'s place):
        ``"arg 2"`` (``"arg 2 +16"`` for a slot 16 bytes into a struct argument),
        ``"src"``, ``"dst"``; ``"sites"`` for a node that could not be read.
    address : int
    problem : str
        ``"freed"``, ``"not kept alive"``, ``"other device"``, ``"pageable host"``,
        ``"not audited"``.
    detail : str
        The allocation and owner in words.
    """

    node: object
    place: str
    address: int
    problem: str
    detail: str = ""

    def __str__(self) -> str:
        return (f"{self.problem}: {self.node!r} {self.place} = 0x{self.address:x}"
                + (f" ({self.detail})" if self.detail else ""))


@dataclass(frozen=True)
class Baked:
    """One address a node holds (one of its sites): the node, the place, the value; for a
    kernel slot, the argument index and the slot's byte offset in it; the copy side's kind;
    the bytes known to be used from it; ``role`` ``"alloc"`` for memory the node hands out
    (a graph allocation)."""

    node: object
    place: str
    address: int
    arg: int | None = None
    offset: int = 0
    side: str = "device"  # "host" for the host side of a copy, "any" when unknown
    size: int = 0
    role: str = "use"


def baked_addresses(graph, problems: list | None = None) -> list:
    """Every :class:`Baked` address of ``graph``, its inner graphs included (see the module
    docstring): one walk, each node's ``sites()`` (``cuGraphKernelNodeGetParams``,
    ``cudaGraphMemcpyNodeGetParams`` ... as each node reads its own). Nodes that cannot be
    read are appended to ``problems`` as ``"not audited"`` findings when it is given."""
    out = []
    for node, _depth, _owner in graph.table.walk():
        try:
            sites = node.sites()
        except PyCudaGraphError as exc:
            if problems is not None:
                problems.append(Finding(node, "sites", 0, "not audited", str(exc)))
            continue
        out += [Baked(node, s.place, s.address, s.arg, s.offset, s.side, s.size_hint, s.role)
                for s in sites]
    return out


def _graph_memory(baked) -> list:
    """(start, end, what) of the memory the graph's own nodes allocate."""
    return [(b.address, b.address + b.size, f"graph memory of {b.node!r}")
            for b in baked if b.role == "alloc"]


def _released(b: Baked, seen: dict, owners) -> Finding | None:
    """A :class:`Finding` for an address the driver no longer knows that lay in a device
    allocation when the graph was captured or audited (None otherwise)."""
    was = seen.get(b.address)
    if was is None or owners.find(b.address).status == "graph":
        return None
    start, size = was
    return Finding(b.node, b.place, b.address, "freed",
                   f"was in a {size}-byte device allocation at 0x{start:x} when the graph was "
                   "captured; that memory was released to the driver")


def _judge(b: Baked, info: PointerInfo, owners, here: int, seen: dict) -> Finding | None:
    if info.memory == "unregistered":
        found = _released(b, seen, owners)
        if found is not None:
            return found
        if b.arg is not None:
            return None  # a number in a kernel slot, or an address the driver forgot
        if b.side == _HOST_SIDE:
            return Finding(b.node, b.place, b.address, "pageable host",
                           "pageable host memory: the copy is staged and not asynchronous; "
                           "use pinned memory (PinnedBuffer, pin_memory())")
        return Finding(b.node, b.place, b.address, "freed", "no allocation at this address")
    if info.memory == "device" and info.device != here:
        return Finding(b.node, b.place, b.address, "other device",
                       f"allocated on device {info.device}, the graph runs on device {here}")
    if info.memory == _PINNED:
        return None
    owner = owners.find(b.address)
    where = f"in a {info.size}-byte allocation at 0x{info.start:x}: {owner.what}"
    if owner.status == "live":
        return Finding(b.node, b.place, b.address, "not kept alive",
                       f"{where}; the graph does not keep it (cap.keep(obj))")
    if owner.status in ("freed", "unknown"):
        return Finding(b.node, b.place, b.address, "freed", where)
    return None


def audit(graph) -> list[Finding]:
    """The problems of every address ``graph`` bakes in (see the module docstring):
    ``cuPointerGetAttributes`` per distinct address, plus the reads of
    :func:`baked_addresses`. No launch is needed. The allocation of each address found in
    one is remembered for later audits of the graph."""
    from ..frameworks.owners import OwnerIndex
    findings: list[Finding] = []
    baked = baked_addresses(graph, findings)
    owners = OwnerIndex(graph.keepalive(), _graph_memory(baked))
    here = ensure_device()
    seen = seen_ranges(graph)
    infos: dict = {}
    for b in baked:
        if b.role != "use":
            continue
        info = infos.get(b.address)
        if info is None:
            info = infos[b.address] = pointer_info(b.address)
            remember(graph, b.address, info)
        found = _judge(b, info, owners, here, seen)
        if found is not None:
            findings.append(found)
    return findings


def memory(graph) -> dict:
    """What ``graph`` pins: ``"pinned_bytes"`` (the bytes of the distinct device
    allocations its addresses fall in), ``"allocations"`` (how many), ``"graph_pool_bytes"``
    (what its capture pools hold: ``"torch"`` and ``"cupy"`` under ``"graph_pool"``).
    ``cuPointerGetAttributes`` per distinct address."""
    from ..frameworks.pools import CapturePool
    from .._lifetime import contents
    seen: dict = {}
    for b in baked_addresses(graph):
        if b.role != "use" or b.address in seen:
            continue
        seen[b.address] = pointer_info(b.address)
    allocations = {(i.start, i.size) for i in seen.values()
                   if i.memory in ("device", "managed") and i.size}
    pools = {id(o): o for o in contents(graph.keepalive()) if isinstance(o, CapturePool)}
    by_framework = {"torch": 0, "cupy": 0}
    for pool in pools.values():
        for name, n in pool.reserved_bytes().items():
            by_framework[name] += n
    return {"pinned_bytes": sum(size for _, size in allocations),
            "allocations": len(allocations),
            "graph_pool_bytes": sum(by_framework.values()),
            "graph_pool": by_framework}
