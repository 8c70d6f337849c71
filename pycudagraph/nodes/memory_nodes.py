"""Memory nodes: 1D copies, memsets, and graph-owned allocations and frees."""

from __future__ import annotations

from dataclasses import dataclass

from .._cuda import call, context, rt
from ..errors import ArgumentError, PyCudaGraphError
from ..runtime.pointers import device_pointer
from ..runtime.values import int_arg
from .base import Node, NodeType, operand_dict
from .copy_params import GRAPH_ALLOCATIONS, copy3d_params, memcpy_args, memset_params
from .facets import Site
from .memory_file import MemAllocFile, MemcpyFile, MemFreeFile, MemsetFile

__all__ = ["MemcpyNode", "MemcpyParams", "MemsetNode", "MemsetParams", "MemAllocNode",
           "MemFreeNode"]

_KIND_NAMES = {0: "host->host", 1: "host->device", 2: "device->host", 3: "device->device",
               4: "default"}
#: A copy's direction -> the memory its (src, dst) point at (:data:`~.facets.SIDES`).
_KIND_SIDES = {"host->host": ("host", "host"), "host->device": ("host", "device"),
               "device->host": ("device", "host"), "device->device": ("device", "device")}
_FLAT_COPY_FIELDS = frozenset({"dst", "src", "nbytes"})
_MEMSET_FIELDS = frozenset({"dst", "value", "element_size", "count", "height", "pitch"})


@dataclass(frozen=True)
class MemcpyParams:
    dst: int
    src: int
    nbytes: int
    kind: str
    height: int = 1
    depth: int = 1


@dataclass(frozen=True)
class MemsetParams:
    dst: int
    value: int
    element_size: int
    count: int
    height: int
    pitch: int


class MemcpyNode(Node, MemcpyFile):
    """A memory copy node (``cudaGraphAddMemcpyNode1D``)."""

    type = NodeType.MEMCPY
    exec_call = "cudaGraphExecMemcpyNodeSetParams1D"
    __slots__ = ()

    @classmethod
    def build(cls, table, deps, dst, src, nbytes=None) -> "MemcpyNode":
        """``cudaGraphAddMemcpyNode1D``; direction and size checked from the objects."""
        d, s, n, kind = memcpy_args(dst, src, nbytes)
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddMemcpyNode1D, table.raw, raw_deps, nd, d, s, n, kind)
        return table.register(cls(table, int(raw)), dst, src)

    @classmethod
    def build_3d(cls, table, deps, dst, src, width, height=1, depth=1, **layout) -> "MemcpyNode":
        """``cudaGraphAddMemcpyNode`` with a checked ``cudaMemcpy3DParms``
        (:func:`~pycudagraph.nodes.copy_params.copy3d_params`)."""
        p = copy3d_params(dst, src, width, height, depth, **layout)
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddMemcpyNode, table.raw, raw_deps, nd, p)
        return table.register(cls(table, int(raw)), dst, src)

    @property
    def params(self) -> MemcpyParams:
        """Read with ``cudaGraphMemcpyNodeGetParams``."""
        p = call(rt.cudaGraphMemcpyNodeGetParams, self.handle)
        ext = p.extent
        return MemcpyParams(int(p.dstPtr.ptr) + p.dstPos.x, int(p.srcPtr.ptr) + p.srcPos.x,
                            int(ext.width), _KIND_NAMES.get(int(p.kind), str(p.kind)),
                            int(ext.height), int(ext.depth))

    def set_params(self, dst=None, src=None, nbytes=None) -> None:
        """Change the copy in its graph (``cudaGraphMemcpyNodeSetParams1D``); the size
        stays as it was unless ``nbytes`` is given.

        Parameters
        ----------
        dst, src : buffer, array or pointer, optional
        nbytes : int, optional
        """
        cur = self.params
        kept = self._table.kept(self) or (cur.dst, cur.src)
        dst_obj = kept[0] if dst is None else dst
        src_obj = kept[1] if src is None else src
        d, s, n, kind = memcpy_args(dst_obj, src_obj, cur.nbytes if nbytes is None else nbytes)
        call(rt.cudaGraphMemcpyNodeSetParams1D, self.handle, d, s, n, kind)
        self._table.register(self, dst_obj, src_obj)

    def set_params_3d(self, dst, src, width: int, height: int = 1, depth: int = 1,
                      **layout) -> None:
        """Make the node a 2D/3D copy in its graph (``cudaGraphMemcpyNodeSetParams``)."""
        p = copy3d_params(dst, src, width, height, depth, **layout)
        call(rt.cudaGraphMemcpyNodeSetParams, self.handle, p)
        self._table.register(self, dst, src)

    def exec_set(self, rec, dst=None, src=None, nbytes=None) -> None:
        """``cudaGraphExecMemcpyNodeSetParams1D``; sizes checked as when adding."""
        cur = rec.held("memcpy")
        if cur is None:
            p = rec.taken(self).params
            kept = rec.source or (p.dst, p.src)
            cur = (kept[0], kept[1], p.nbytes)
        new_dst = cur[0] if dst is None else dst
        new_src = cur[1] if src is None else src
        n = cur[2] if nbytes is None else nbytes  # the size stays unless given
        d, s, n, kind = memcpy_args(new_dst, new_src, n)
        call(rt.cudaGraphExecMemcpyNodeSetParams1D, rec.exec_raw, rec.node.handle, d, s, n, kind)
        rec.hold("memcpy", new_dst, new_src, n)

    def exec_set_3d(self, rec, dst, src, width: int, height: int = 1, depth: int = 1,
                     **layout) -> None:
        """``cudaGraphExecMemcpyNodeSetParams`` with a checked ``cudaMemcpy3DParms``. CUDA
        documents ``cudaErrorInvalidValue`` when the node's original or new operands are
        multidimensional."""
        p = copy3d_params(dst, src, width, height, depth, **layout)
        call(rt.cudaGraphExecMemcpyNodeSetParams, rec.exec_raw, rec.node.handle, p)
        rec.hold("memcpy", dst, src, width * height * depth)

    def describe(self) -> str:
        """One line: direction and bytes (``cudaGraphMemcpyNodeGetParams``)."""
        p = self.params
        return f"memcpy {p.kind} {p.nbytes * p.height * p.depth} B"

    # Facets (:mod:`pycudagraph.nodes.facets`) ---------------------------------------

    can_disable = True
    in_conditional_body = True

    @property
    def exec_fields(self) -> frozenset:
        """``dst``, ``src``, ``nbytes`` for a 1D copy (``cudaGraphExecMemcpyNodeSetParams1D``);
        none for a 2D/3D one, which an exec cannot change (``cudaGraphMemcpyNodeGetParams``)."""
        p = self.params
        return _FLAT_COPY_FIELDS if p.height == 1 and p.depth == 1 else frozenset()

    def fields(self) -> dict:
        """``dst``, ``src``, ``nbytes``, ``height``, ``depth``, ``kind`` (the direction)
        (``cudaGraphMemcpyNodeGetParams``)."""
        p = self.params
        return {"dst": p.dst, "src": p.src, "nbytes": p.nbytes, "height": p.height,
                "depth": p.depth, "kind": p.kind}

    def sites(self) -> list:
        """The source and destination, each with the bytes copied and the side of memory
        the direction names (``"any"`` for ``cudaMemcpyDefault``)
        (``cudaGraphMemcpyNodeGetParams``)."""
        p = self.params
        src_side, dst_side = _KIND_SIDES.get(p.kind, ("any", "any"))
        n = p.nbytes * p.height * p.depth
        return [Site("src", 0, p.src, n, side=src_side), Site("dst", 0, p.dst, n, side=dst_side)]

    def write_site(self, rec, site, address: int) -> None:
        """``address`` as the exec's copy source or destination
        (``cudaGraphExecMemcpyNodeSetParams1D``, through :meth:`exec_set`)."""
        if not isinstance(site, Site) or site.place not in ("src", "dst"):
            raise ArgumentError(f"a memcpy node has no site {site!r} (src, dst)")
        self.exec_set(rec, **{site.place: address})

    def exec_operands(self, changes: dict) -> dict:
        """A new ``dst`` / ``src`` as the objects the node kept (so the exec keeps them too)
        where it kept them, else the address. No CUDA call."""
        kept = self._table.kept(self) if {"dst", "src"} & set(operand_dict(changes)) else ()
        if len(kept) < 2:
            return changes
        out = dict(changes)
        for i, key in enumerate(("dst", "src")):
            if key in out:
                out[key] = kept[i]
        return out

    def work(self) -> tuple:
        """``("memcpy", bytes copied)`` (``cudaGraphMemcpyNodeGetParams``); the bytes None
        where they cannot be read."""
        try:
            p = self.params
        except PyCudaGraphError:
            return "memcpy", None
        return "memcpy", int(p.nbytes * p.height * p.depth)


def _memset_view(p) -> MemsetParams:
    return MemsetParams(int(p.dst), int(p.value), int(p.elementSize), int(p.width),
                        int(p.height), int(p.pitch))


class MemsetNode(Node, MemsetFile):
    """A memset node (``cudaGraphAddMemsetNode``)."""

    type = NodeType.MEMSET
    exec_call = "cudaGraphExecMemsetNodeSetParams"
    __slots__ = ()

    @classmethod
    def build(cls, table, deps, dst, value, count, element_size=1, height=1,
             pitch=None) -> "MemsetNode":
        """``cudaGraphAddMemsetNode``; value, sizes and the destination's extent checked."""
        p = memset_params(None, dst, value, count, element_size, height, pitch)
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddMemsetNode, table.raw, raw_deps, nd, p)
        return table.register(cls(table, int(raw)), dst)

    @property
    def params(self) -> MemsetParams:
        """Read with ``cudaGraphMemsetNodeGetParams``."""
        return _memset_view(call(rt.cudaGraphMemsetNodeGetParams, self.handle))

    def set_params(self, dst=None, value=None, count=None, element_size=None,
                   height=None, pitch=None) -> None:
        """Change the memset in its graph (``cudaGraphMemsetNodeSetParams``); the new
        extent is checked against the destination (the new one, or the one kept).

        Parameters
        ----------
        dst, value, count, element_size, height, pitch : optional
            As for :meth:`Graph.add_memset`; fields not given keep their values.
        """
        kept = (self._table.kept(self) or (None,))[0]
        p = memset_params(self.params, dst, value, count, element_size, height, pitch,
                          kept_dst=kept)
        call(rt.cudaGraphMemsetNodeSetParams, self.handle, p)
        if dst is not None:
            self._table.register(self, dst)

    def exec_set(self, rec, dst=None, value=None, count=None, element_size=None,
                  height=None, pitch=None) -> None:
        """``cudaGraphExecMemsetNodeSetParams``; fields not given keep their values; the
        extent is checked against the destination (the new one, or the one kept)."""
        cur = rec.held("memset")
        if cur is None:
            cur = (rec.taken(self).params, (rec.source or (None,))[0])
        p = memset_params(cur[0], dst, value, count, element_size, height, pitch,
                          kept_dst=cur[1])
        call(rt.cudaGraphExecMemsetNodeSetParams, rec.exec_raw, rec.node.handle, p)
        rec.hold("memset", _memset_view(p), dst if dst is not None else cur[1])

    def describe(self) -> str:
        """One line: bytes and value (``cudaGraphMemsetNodeGetParams``)."""
        p = self.params
        return f"memset {p.count * p.height * p.element_size} B value=0x{p.value:x}"

    # Facets (:mod:`pycudagraph.nodes.facets`) ---------------------------------------

    #: Everything :meth:`exec_set` takes (``cudaGraphExecMemsetNodeSetParams``).
    exec_fields = _MEMSET_FIELDS
    can_disable = True
    in_conditional_body = True

    def fields(self) -> dict:
        """``dst``, ``value``, ``element_size``, ``count``, ``height``, ``pitch``
        (``cudaGraphMemsetNodeGetParams``)."""
        p = self.params
        return {"dst": p.dst, "value": p.value, "element_size": p.element_size,
                "count": p.count, "height": p.height, "pitch": p.pitch}

    def sites(self) -> list:
        """The destination, with the bytes from it to the end of the last row written
        (``cudaGraphMemsetNodeGetParams``)."""
        p = self.params
        row = p.count * p.element_size
        return [Site("dst", 0, p.dst, row + (p.height - 1) * p.pitch if p.height > 1 else row)]

    def write_site(self, rec, site, address: int) -> None:
        """``address`` as the exec's memset destination (``cudaGraphExecMemsetNodeSetParams``,
        through :meth:`exec_set`; the extent is checked against it)."""
        if not isinstance(site, Site) or site.place != "dst":
            raise ArgumentError(f"a memset node has no site {site!r} (dst)")
        self.exec_set(rec, dst=address)

    def work(self) -> tuple:
        """``("memset", bytes set)`` (``cudaGraphMemsetNodeGetParams``); the bytes None where
        they cannot be read."""
        try:
            p = self.params
        except PyCudaGraphError:
            return "memset", None
        return "memset", int(p.count * p.height * p.element_size)


class MemAllocNode(Node, MemAllocFile):
    """A graph memory allocation node (``cudaGraphAddMemAllocNode``).

    :attr:`ptr` is the device address, valid from this node until a free node (or,
    with ``auto_free_on_launch``, until the next launch).
    """

    type = NodeType.MEM_ALLOC
    __slots__ = ("nbytes_at_build",)

    @classmethod
    def build(cls, table, deps, nbytes: int) -> "MemAllocNode":
        """``cudaGraphAddMemAllocNode`` of device memory on the current device."""
        if not 0 < int_arg(nbytes, "add_mem_alloc: nbytes") < 1 << 64:
            raise ArgumentError(f"add_mem_alloc needs a positive size (nbytes) below 2**64, "
                                f"got {nbytes}")
        raw_deps, nd = table.dep_list(deps)
        p = rt.cudaMemAllocNodeParams()
        p.poolProps.allocType = rt.cudaMemAllocationType.cudaMemAllocationTypePinned
        p.poolProps.location.type = rt.cudaMemLocationType.cudaMemLocationTypeDevice
        p.poolProps.location.id = context.ensure_device()
        p.bytesize = int(nbytes)
        raw = call(rt.cudaGraphAddMemAllocNode, table.raw, raw_deps, nd, p)
        node = cls(table, int(raw))
        node.nbytes_at_build = int(nbytes)
        GRAPH_ALLOCATIONS[int(p.dptr)] = node  # copies and memsets may name its memory
        return table.register(node)

    @property
    def params(self) -> dict:
        """``cudaGraphMemAllocNodeGetParams``: the address and size."""
        p = call(rt.cudaGraphMemAllocNodeGetParams, self.handle)
        return {"ptr": int(p.dptr), "nbytes": int(p.bytesize)}

    @property
    def ptr(self) -> int:
        """The device address of the allocation (``cudaGraphMemAllocNodeGetParams``)."""
        return self.params["ptr"]

    @property
    def nbytes(self) -> int:
        """The size in bytes (``cudaGraphMemAllocNodeGetParams``)."""
        return self.params["nbytes"]

    def describe(self) -> str:
        """One line: the size (``cudaGraphMemAllocNodeGetParams``)."""
        return f"mem_alloc {self.nbytes} B"

    def fields(self) -> dict:
        """``ptr`` and ``nbytes`` (``cudaGraphMemAllocNodeGetParams``)."""
        return dict(self.params)

    def sites(self) -> list:
        """The memory the node hands out, as the site ``"alloc"`` with role ``"alloc"``
        (other nodes' sites may point into it) (``cudaGraphMemAllocNodeGetParams``)."""
        p = self.params
        return [Site("alloc", 0, p["ptr"], p["nbytes"], role="alloc")]


class MemFreeNode(Node, MemFreeFile):
    """A graph memory free node (``cudaGraphAddMemFreeNode``)."""

    type = NodeType.MEM_FREE
    __slots__ = ()

    @classmethod
    def build(cls, table, deps, ptr_or_alloc_node) -> "MemFreeNode":
        """``cudaGraphAddMemFreeNode`` of a :class:`MemAllocNode`'s memory or its address."""
        target = ptr_or_alloc_node
        if isinstance(target, MemAllocNode):
            ptr = target.ptr
        elif target is None or isinstance(target, (bool, float, str, Node)):
            raise ArgumentError(f"add_mem_free: ptr_or_alloc_node must be a MemAllocNode or a "
                            f"device address, got {target!r} ({type(target).__name__})")
        else:
            ptr = device_pointer(target)
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddMemFreeNode, table.raw, raw_deps, nd, ptr)
        return table.register(cls(table, int(raw)))

    @property
    def params(self) -> dict:
        """``cudaGraphMemFreeNodeGetParams``: the address freed."""
        return {"ptr": int(call(rt.cudaGraphMemFreeNodeGetParams, self.handle))}

    def describe(self) -> str:
        """One line: the address freed (``cudaGraphMemFreeNodeGetParams``)."""
        return f"mem_free 0x{self.params['ptr']:x}"

    def fields(self) -> dict:
        """``ptr``: the graph allocation freed (``cudaGraphMemFreeNodeGetParams``). Not a
        site: it names memory a :class:`MemAllocNode` hands out, not memory it uses."""
        return dict(self.params)
