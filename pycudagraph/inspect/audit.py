"""Every device address a graph bakes in, mapped to its allocation and owner:
``g.audit()`` and ``g.memory()``.

A graph holds addresses in its kernel arguments (every 8-byte aligned slot of every
argument, inside by-value structs too), its copies (``src``, ``dst``) and memsets
(``dst``), in its own nodes and in child graphs and conditional bodies.
:func:`baked_addresses` lists them; :func:`audit` asks the driver what each is
(``cuPointerGetAttributes``: memory type, device, allocation range) and
:class:`~pycudagraph.frameworks.owners.OwnerIndex` who owns it, and reports each problem as
a :class:`Finding`:

================== =================================================================
``freed``          no live object owns the memory (it went back to a pool or to the
                   driver): a later allocation may get it, and a replay then reads or
                   writes someone else's data
``not kept alive`` a live tensor, array or buffer owns it, but the graph does not keep
                   that object: drop it and the memory is free for others
``other device``   the memory lives on another device than the graph's
``pageable host``  a copy reads or writes pageable host memory (not pinned)
``not audited``    a node whose addresses could not be read (its arguments are passed
                   in ``extra``, or its bodies need a newer driver)
================== =================================================================

A kernel argument slot holds an address only by convention: slots whose value is no
allocation the driver knows are taken for numbers and skipped, so a number that happens
to equal an address inside a live allocation is the one false reading left.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .._cuda import dr, ensure_device, error_for
from ..errors import NotSupportedError, PyCudaGraphError
from ..nodes import (ChildGraphNode, ConditionalNode, KernelNode, MemAllocNode, MemcpyNode,
                     MemsetNode)
from ..nodes.captured_args import CapturedArgs

__all__ = ["Finding", "Baked", "PointerInfo", "walk_nodes", "pointer_slots",
           "baked_addresses", "pointer_info", "audit", "memory"]

_U64 = struct.Struct("<Q")
_A = dr.CUpointer_attribute
_ATTRS = [_A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          _A.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, _A.CU_POINTER_ATTRIBUTE_RANGE_SIZE,
          _A.CU_POINTER_ATTRIBUTE_IS_MANAGED]
_MEMORY = {1: "host", 2: "device", 3: "device", 4: "managed"}
#: Values below this are never taken for addresses (small numbers, flags).
_LOWEST = 1 << 16


@dataclass(frozen=True)
class Finding:
    """One problem with an address a graph bakes in.

    Attributes
    ----------
    node : Node
        The node holding the address.
    place : str
        Where in the node: ``"arg 2"`` (``"arg 2 +16"`` for a slot 16 bytes into a
        struct argument), ``"src"``, ``"dst"``.
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
    """One address a node holds: the node, the place, the value; for a kernel slot, the
    argument index and the slot's byte offset in it; the copy side's kind."""

    node: object
    place: str
    address: int
    arg: int | None = None
    offset: int = 0
    side: str = "device"  # "host" for the host side of a copy, "any" when unknown


@dataclass(frozen=True)
class PointerInfo:
    """What the driver knows of an address (``cuPointerGetAttributes``): ``memory`` is
    ``"device"``, ``"host"`` (pinned or registered), ``"managed"`` or ``"unregistered"``
    (pageable host memory, freed memory, or no address at all)."""

    memory: str
    device: int
    start: int
    size: int


def walk_nodes(graph, inside_child: bool = False):
    """(node, inside a child graph) for every node of ``graph``, its child graphs and
    conditional bodies (``cudaGraphGetNodes``, ``cudaGraphChildGraphNodeGetGraph``,
    ``cudaGraphNodeGetParams`` for captured conditional nodes). A conditional node whose
    bodies cannot be read is yielded, its bodies skipped."""
    for node in graph.nodes:
        yield node, inside_child
        if isinstance(node, ChildGraphNode):
            yield from walk_nodes(node.child, True)
        elif isinstance(node, ConditionalNode):
            try:
                bodies = node.bodies
            except NotSupportedError:
                continue
            for body in bodies:
                yield from walk_nodes(body, inside_child)


def pointer_slots(data: bytes, offset: int):
    """(byte offset in ``data``, value) of each 8-byte slot of an argument whose address
    in the parameter buffer (``offset`` + position) is 8-byte aligned."""
    for k in range((-offset) % 8, len(data) - 7, 8):
        yield k, _U64.unpack_from(data, k)[0]


def _place(arg: int, k: int, size: int) -> str:
    return f"arg {arg}" if size <= 8 else f"arg {arg} +{k}"


def baked_addresses(graph, problems: list | None = None):
    """Every :class:`Baked` address of ``graph`` (see the module docstring): kernel
    argument slots (``cuGraphKernelNodeGetParams``, ``cuFuncGetParamInfo``), copy sides
    (``cudaGraphMemcpyNodeGetParams``), memset destinations
    (``cudaGraphMemsetNodeGetParams``). Nodes that cannot be read are appended to
    ``problems`` as ``"not audited"`` findings when it is given."""
    for node, _inside in walk_nodes(graph):
        if isinstance(node, KernelNode):
            try:
                args = CapturedArgs.of(node)
            except PyCudaGraphError as exc:
                if problems is not None:
                    problems.append(Finding(node, "args", 0, "not audited", str(exc)))
                continue
            for i, (offset, size) in enumerate(args.info):
                for k, v in pointer_slots(args.get(i), offset):
                    if v >= _LOWEST:
                        yield Baked(node, _place(i, k, size), v, i, k)
        elif isinstance(node, MemcpyNode):
            p = node.params
            src_side, _, dst_side = p.kind.partition("->") if "->" in p.kind else ("any", "", "any")
            yield Baked(node, "src", p.src, side=src_side)
            yield Baked(node, "dst", p.dst, side=dst_side)
        elif isinstance(node, MemsetNode):
            yield Baked(node, "dst", node.params.dst)
        elif isinstance(node, ConditionalNode) and problems is not None:
            try:
                node.bodies
            except NotSupportedError as exc:
                problems.append(Finding(node, "bodies", 0, "not audited", str(exc)))


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


def _graph_memory(graph) -> list:
    out = []
    for node, _ in walk_nodes(graph):
        if isinstance(node, MemAllocNode):
            p = node.params
            out.append((p["ptr"], p["ptr"] + p["nbytes"], f"graph memory of {node!r}"))
    return out


def _judge(b: Baked, info: PointerInfo, owners, here: int) -> Finding | None:
    if info.memory == "unregistered":
        if b.arg is not None:
            return None  # a number in a kernel slot, or an address the driver forgot
        if b.side == "host":
            return Finding(b.node, b.place, b.address, "pageable host",
                           "pageable host memory: the copy is staged and not asynchronous; "
                           "use pinned memory (PinnedBuffer, pin_memory())")
        return Finding(b.node, b.place, b.address, "freed", "no allocation at this address")
    if info.memory == "device" and info.device != here:
        return Finding(b.node, b.place, b.address, "other device",
                       f"allocated on device {info.device}, the graph runs on device {here}")
    if info.memory == "host":
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
    :func:`baked_addresses`. No launch is needed."""
    from ..frameworks.owners import OwnerIndex
    findings: list[Finding] = []
    baked = list(baked_addresses(graph, findings))
    owners = OwnerIndex(graph.keepalive(), _graph_memory(graph))
    here = ensure_device()
    infos: dict = {}
    for b in baked:
        info = infos.get(b.address)
        if info is None:
            info = infos[b.address] = pointer_info(b.address)
        found = _judge(b, info, owners, here)
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
        if b.address in seen:
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
