"""The memory a graph touches, as allocations, and a host copy of it to start every trial from.

Both tools of this wing run a graph (or part of it) many times and compare what comes out,
so every run must start from the same bytes. What a graph can read or write is what its
nodes bake in: each node's :meth:`~pycudagraph.nodes.base.Node.sites` (kernel argument
slots, copy sides, memset destinations), over the one walk, so child graphs and
conditional bodies count for the node that holds them. A kernel slot says where memory
starts, never how far the kernel reads, so the unit here is the whole allocation an address
lies in (``cuPointerGetAttributes``: range start and size), a :class:`Region`. Memory the
graph allocates itself (a ``mem_alloc`` node's) is left out: each run allocates it anew.

:class:`Snapshot` copies every region to the host once (``cudaMemcpy``) and writes it back
before each run. Events the nodes record or wait for are found in their
:meth:`~pycudagraph.nodes.base.Node.fields` (any value that is an event), so a graph file
can name them as slots.
"""

from __future__ import annotations

import bisect
import ctypes
from dataclasses import dataclass

import numpy as np

from .._cuda import call, ensure_device, rt
from ..errors import PyCudaGraphError
from ..files.slots import DeviceView
from ..inspect.ranges import pointer_info

__all__ = ["Region", "top_sites", "graph_regions", "merge_regions", "site_spans", "Snapshot",
           "graph_events", "slot_objects", "device_synchronize"]

_DEFAULT = rt.cudaMemcpyKind.cudaMemcpyDefault
#: Memory kinds of :class:`~pycudagraph.inspect.ranges.PointerInfo` kept as device regions.
_DEVICE_KINDS = ("device", "managed")
#: The memory kind of pinned or registered host memory (a ``PointerInfo``'s).
_PINNED = "host"


@dataclass(frozen=True)
class Region:
    """One allocation a graph touches: ``start``, ``size`` (bytes), ``kind`` (``"device"``
    or ``"host"``: pinned host memory) and ``name``, its slot name in a graph file."""

    start: int
    size: int
    kind: str
    name: str = ""

    @property
    def end(self) -> int:
        return self.start + self.size

    def holds(self, address: int) -> bool:
        return self.start <= address < self.end


def top_sites(graph) -> dict:
    """``{top-level node: [Site, ...]}``: the sites of each node of ``graph`` and of every
    node inside it (its child graph, its bodies), over the one walk; a node whose sites
    cannot be read has none. ``cuGraphKernelNodeGetParams`` & co. as each node reads its
    own; no call for nodes built here."""
    out: dict = {}
    top = None
    for node, depth, _owner in graph.table.walk():
        if depth == 0:
            top = node
            out[top] = []
        try:
            out[top].extend(node.sites())
        except PyCudaGraphError:
            continue
    return out


def merge_regions(found) -> list:
    """``(start, size, kind)`` triples as sorted, non-overlapping :class:`Region` s, named
    ``m0``, ``m1`` ... (overlaps and repeats joined into one). No CUDA call."""
    merged: list = []
    for start, size, kind in sorted(found):
        if merged and start < merged[-1][0] + merged[-1][1] and merged[-1][2] == kind:
            s0, n0, _ = merged[-1]
            merged[-1] = (s0, max(n0, start + size - s0), kind)
        else:
            merged.append((start, size, kind))
    return [Region(s, n, k, f"m{i}") for i, (s, n, k) in enumerate(merged)]


def graph_regions(graph, sites: dict | None = None) -> list:
    """Every allocation the nodes of ``graph`` point into (see the module docstring), as
    sorted :class:`Region` s; ``cuPointerGetAttributes`` once per distinct address.
    Addresses the driver knows nothing of (numbers in kernel arguments, freed memory) and
    the graph's own allocations are left out."""
    sites = top_sites(graph) if sites is None else sites
    ensure_device()
    own = [(s.address, s.address + s.size_hint) for ss in sites.values() for s in ss
           if s.role == "alloc"]
    found, seen = set(), set()
    for ss in sites.values():
        for s in ss:
            a = s.address
            if s.role != "use" or a in seen or any(lo <= a < hi for lo, hi in own):
                continue
            seen.add(a)
            info = pointer_info(a)
            if info.memory in _DEVICE_KINDS and info.size:
                found.add((info.start, info.size, "device"))
            elif info.memory == _PINNED:
                if info.size:
                    found.add((info.start, info.size, "host"))
                elif s.size_hint:
                    found.add((a, s.size_hint, "host"))
    return merge_regions(found)


def site_spans(sites: dict, regions: list) -> dict:
    """``{top-level node: [(start, end), ...]}``: the bytes each node may touch, as far as
    its sites tell. A site with a known size covers that many bytes; a kernel slot (size
    unknown) covers up to the next address any node names in the same region, or the
    region's end. No CUDA call."""
    starts = [r.start for r in regions]
    marks: dict = {}
    for ss in sites.values():
        for s in ss:
            if s.role == "use":
                marks.setdefault(_region_of(regions, starts, s.address), set()).add(s.address)
    ordered = {k: sorted(v) for k, v in marks.items()}
    out: dict = {}
    for node, ss in sites.items():
        spans = []
        for s in ss:
            if s.role != "use":
                continue
            if s.size_hint:
                spans.append((s.address, s.address + s.size_hint))
                continue
            r = _region_of(regions, starts, s.address)
            if r is None:
                spans.append((s.address, s.address + 1))
                continue
            later = ordered[r]
            i = bisect.bisect_right(later, s.address)
            spans.append((s.address, later[i] if i < len(later) else r.end))
        out[node] = spans
    return out


def _region_of(regions: list, starts: list, address: int):
    i = bisect.bisect_right(starts, address) - 1
    return regions[i] if i >= 0 and regions[i].holds(address) else None


def device_synchronize() -> None:
    """Wait for all work of the current device (``cudaDeviceSynchronize``)."""
    call(rt.cudaDeviceSynchronize)


class Snapshot:
    """A host copy of every :class:`Region` (``cudaMemcpy``, after
    ``cudaDeviceSynchronize`` so no queued work is still writing).

    Attributes
    ----------
    regions : list of Region
    data : list of numpy.ndarray
        One ``uint8`` array per region, as it was when the snapshot was taken.
    """

    def __init__(self, regions: list, data: list | None = None):
        self.regions = list(regions)
        self.data = self.read() if data is None else data

    @classmethod
    def load(cls, regions: list, path) -> "Snapshot":
        """The snapshot :meth:`save` wrote to ``path``, for ``regions``. No CUDA call."""
        raw = np.fromfile(path, np.uint8)
        if raw.size != sum(r.size for r in regions):
            raise PyCudaGraphError(f"{path}: {raw.size} bytes; the regions hold "
                                   f"{sum(r.size for r in regions)}")
        cuts = np.cumsum([r.size for r in regions])[:-1] if regions else []
        return cls(regions, list(np.split(raw, cuts)) if regions else [])

    @property
    def nbytes(self) -> int:
        return sum(r.size for r in self.regions)

    def read(self, addresses=None) -> list:
        """The regions' bytes now, as new host arrays (``cudaDeviceSynchronize``, then
        ``cudaMemcpy`` per region); ``addresses`` (one per region) reads the same sizes
        from elsewhere (the copies in another process)."""
        device_synchronize()
        out = []
        for r, a in zip(self.regions, addresses or [r.start for r in self.regions]):
            arr = np.empty(r.size, np.uint8)
            if r.size:
                call(rt.cudaMemcpy, arr.ctypes.data, a, r.size, _DEFAULT)
            out.append(arr)
        return out

    def restore(self, addresses=None) -> None:
        """Write the snapshot back (``cudaMemcpy`` per region, then ``cudaDeviceSynchronize``
        so streams that do not wait for the legacy stream see it); ``addresses`` as in
        :meth:`read`."""
        device_synchronize()
        for r, a, arr in zip(self.regions, addresses or [r.start for r in self.regions],
                             self.data):
            if r.size:
                call(rt.cudaMemcpy, a, arr.ctypes.data, r.size, _DEFAULT)
        device_synchronize()

    def save(self, path) -> None:
        """Write the bytes of every region, one after another, to ``path``. No CUDA call."""
        with open(path, "wb") as f:
            for arr in self.data:
                f.write(arr.tobytes())


class _RawEvent:
    """An event handle read back from the driver, as a graph file's slot takes it."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle


def graph_events(graph) -> list:
    """Every event a node of ``graph`` records or waits for (a field whose value is an
    event), once each, in walk order. ``cudaGraphEventRecordNodeGetEvent`` & co. for nodes
    read back from the driver."""
    found: dict = {}
    for node, _depth, _owner in graph.table.walk():
        try:
            values = node.fields().values()
        except PyCudaGraphError:
            continue
        for v in values:
            h = getattr(v, "handle", v)
            if isinstance(h, rt.cudaEvent_t) and int(h) not in found:
                found[int(h)] = v if h is not v else _RawEvent(h)
    return list(found.values())


def slot_objects(regions: list, events: list) -> dict:
    """``{slot name: object}`` for :meth:`Graph.save <pycudagraph.Graph.save>`: a view of
    each region (device memory as a :class:`~pycudagraph.files.slots.DeviceView`, pinned
    host memory as a numpy array over it) and each event, named ``e0``, ``e1`` ... No CUDA
    call."""
    slots: dict = {}
    for r in regions:
        if r.kind == "device":
            slots[r.name] = DeviceView(None, r.start, r.size)
        else:
            slots[r.name] = np.ctypeslib.as_array((ctypes.c_uint8 * r.size).from_address(r.start))
    for i, ev in enumerate(events):
        slots[f"e{i}"] = ev
    return slots
