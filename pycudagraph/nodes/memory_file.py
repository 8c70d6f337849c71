"""The graph-file records of the memory nodes: copies, memsets, graph allocations and frees
(the record protocol of :mod:`.file_records`)."""

from __future__ import annotations

from .._cuda import call, rt
from .file_records import FileRecord

__all__ = ["MemcpyFile", "MemsetFile", "MemAllocFile", "MemFreeFile"]

_U48 = 1 << 48


class MemcpyFile(FileRecord):
    """A copy: 1D (``memcpy``) or a 2D/3D box (``memcpy_3d``)."""

    __slots__ = ()
    file_types = ("memcpy", "memcpy_3d")
    file_shape = {"memcpy": (("dst", "src", "nbytes"), ()),
                  "memcpy_3d": (("dst", "src", "width", "height", "depth", "dst_pitch",
                                 "src_pitch", "dst_rows", "src_rows", "dst_pos", "src_pos"), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """Read with ``cudaGraphMemcpyNodeGetParams``; copies with CUDA arrays are refused."""
        p = call(rt.cudaGraphMemcpyNodeGetParams, self.handle)
        if int(p.srcArray) or int(p.dstArray):
            out.refuse(where, "a copy to or from a CUDA array, which graph files cannot hold")
        e, sp, dp = p.extent, p.srcPos, p.dstPos
        dst, src = int(p.dstPtr.ptr), int(p.srcPtr.ptr)
        if e.height == 1 and e.depth == 1 and not (sp.y or sp.z or dp.y or dp.z):
            return {"dst": out.address(dst + dp.x, where, "dst"),
                    "src": out.address(src + sp.x, where, "src"), "nbytes": int(e.width)}
        rec = {"type": "memcpy_3d", "dst": out.address(dst, where, "dst"),
               "src": out.address(src, where, "src"), "width": int(e.width),
               "height": int(e.height), "depth": int(e.depth)}
        for side, ptr, pos in (("dst", p.dstPtr, dp), ("src", p.srcPtr, sp)):
            rows = int(ptr.ysize) if e.depth > 1 else max(int(ptr.ysize), pos.y + int(e.height))
            rec.update({f"{side}_pitch": int(ptr.pitch), f"{side}_rows": rows,
                        f"{side}_pos": [int(pos.x), int(pos.y), int(pos.z)]})
        return rec

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """The copy's sizes and box against the memory its references leave. No CUDA call."""
        if n["type"] == "memcpy":
            nbytes = c.int_(n["nbytes"], (where, ".nbytes"), 1, _U48)
            for side in ("dst", "src"):
                left = c.ref(n[side], (where, ".", side))
                if nbytes > left:
                    c.fail((where, ".", side), f"{nbytes} bytes do not fit the {left} bytes left")
            return
        w = c.int_(n["width"], (where, ".width"), 1, _U48)
        h = c.int_(n["height"], (where, ".height"), 1, _U48)
        d = c.int_(n["depth"], (where, ".depth"), 1, _U48)
        for side in ("dst", "src"):
            left = c.ref(n[side], (where, ".", side))
            pitch = c.int_(n[f"{side}_pitch"], (where, ".", side, "_pitch"), 1, _U48)
            rows = c.int_(n[f"{side}_rows"], (where, ".", side, "_rows"), 1, _U48)
            x, y, z = c.ints(n[f"{side}_pos"], (where, ".", side, "_pos"), 3, 0, _U48)
            fits = pitch >= x + w and rows >= y + h
            if not fits or ((z + d - 1) * rows + y + h - 1) * pitch + x + w > left:
                c.fail((where, ".", side), f"the box does not fit the {left} bytes left")

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddMemcpyNode1D`` (``cudaGraphAddMemcpyNode`` for a box) on the bound memory."""
        if n["type"] == "memcpy":
            return graph.add_memcpy(into.memory(n["dst"]), into.memory(n["src"]), n["nbytes"],
                                    deps)
        layout = {k: n[k] for k in ("dst_pitch", "src_pitch", "dst_rows", "src_rows")}
        return graph.add_memcpy_3d(into.memory(n["dst"]), into.memory(n["src"]), n["width"],
                                   n["height"], n["depth"], deps, dst_pos=tuple(n["dst_pos"]),
                                   src_pos=tuple(n["src_pos"]), **layout)


class MemsetFile(FileRecord):
    """A memset: destination, value, element size, count, height, pitch."""

    __slots__ = ()
    file_types = ("memset",)
    file_shape = {"memset": (("dst", "value", "element_size", "count", "height", "pitch"), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """Read with ``cudaGraphMemsetNodeGetParams``."""
        p = self.params
        return {"dst": out.address(p.dst, where, "dst"), "value": p.value,
                "element_size": p.element_size, "count": p.count, "height": p.height,
                "pitch": p.pitch}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """Element size, value, extent against the memory its reference leaves. No CUDA call."""
        es = n["element_size"]
        if isinstance(es, bool) or not isinstance(es, int) or es not in (1, 2, 4):
            c.fail((where, ".element_size"), f"{es!r} is not 1, 2 or 4")
        c.int_(n["value"], (where, ".value"), 0, (1 << (8 * es)) - 1)
        count = c.int_(n["count"], (where, ".count"), 1, _U48)
        height = c.int_(n["height"], (where, ".height"), 1, _U48)
        pitch = c.int_(n["pitch"], (where, ".pitch"), 0, _U48)
        if height > 1 and pitch < count * es:
            c.fail((where, ".pitch"), f"{pitch} is smaller than a row ({count * es} bytes)")
        left = c.ref(n["dst"], (where, ".dst"))
        need = count * es + (height - 1) * pitch
        if need > left:
            c.fail((where, ".dst"), f"{need} bytes do not fit the {left} bytes left")

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddMemsetNode`` on the bound memory."""
        return graph.add_memset(into.memory(n["dst"]), n["value"], n["count"],
                                n["element_size"], n["height"],
                                n["pitch"] if n["height"] > 1 else None, deps)


class MemAllocFile(FileRecord):
    """A graph allocation: its size; the memory it hands out is what ``{"alloc": id}``
    references point into."""

    __slots__ = ()
    file_types = ("mem_alloc",)
    file_shape = {"mem_alloc": (("nbytes",), ())}

    def file_declare(self, out) -> None:
        """Its memory (``cudaGraphMemAllocNodeGetParams``)."""
        p = self.params
        out.declare_allocation(self, p["ptr"], p["nbytes"])

    def to_record(self, out, where, nid: int) -> dict:
        """Its size (``cudaGraphMemAllocNodeGetParams``)."""
        out.allocated(self, nid)
        return {"nbytes": self.params["nbytes"]}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """Its size; later records may point into it. No CUDA call."""
        c.allocs[nid] = c.int_(n["nbytes"], (where, ".nbytes"), 1, _U48)

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddMemAllocNode``; later records point into the new memory."""
        node = graph.add_mem_alloc(n["nbytes"], deps)
        into.allocated(n["id"], node.ptr, n["nbytes"])
        return node


class MemFreeFile(FileRecord):
    """A graph free: the allocation node whose memory it frees."""

    __slots__ = ()
    file_types = ("mem_free",)
    file_shape = {"mem_free": (("alloc",), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """The saved allocation it frees (``cudaGraphMemFreeNodeGetParams``)."""
        ptr = self.params["ptr"]
        alloc = out.freed(ptr)
        if alloc is None:
            out.refuse(where, f"frees 0x{ptr:x}, which no mem_alloc node before it allocated")
        return {"alloc": alloc}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """An allocation record made before it. No CUDA call."""
        a = c.int_(n["alloc"], (where, ".alloc"), 0, c.MAX_NODES)
        if a not in c.allocs:
            c.fail((where, ".alloc"), f"node {a} is not a mem_alloc node made before this one")

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddMemFreeNode`` of the rebuilt allocation."""
        return graph.add_mem_free(into.allocation(n["alloc"])[0], deps)
