"""``Graph.save``: walk a graph (and its bodies and child graphs) into a graph file.

Every node becomes its type and parameters in the manifest (:mod:`.file_schema`), every
kernel pycudagraph compiled its module's CUBIN and PTX (sections of the file, one per
module) plus its signature, and every device address a slot's name and offset. A kernel
pycudagraph did not compile (captured from a library) is saved by its function name: the
loading process resolves it (``pcg.load(..., resolve=)``), and the save warns which nodes.

An address that belongs to no slot refuses the save, naming the node and the argument:
a pointer parameter of our kernels; in the bytes of a struct argument, or of any argument
of a captured kernel, an 8-byte aligned value the driver knows as device memory
(``cuMemGetAddressRange``). Other values are kept as they are.
"""

from __future__ import annotations

import bisect
import struct
import warnings

from .._cuda import call, rt
from ..compile.kernel import kernel_for_function
from ..compile.program import Module, device_arch
from ..compile.ptx import is_elf
from ..compile.signature import parse_params
from ..errors import CudaError, GraphFileError, GraphFileWarning, NotSupportedError
from ..nodes.attributes import ATTRIBUTES
from .schema import COND_BODIES, FORMAT
from .archive import encode, write_file
from .slots import Slots, is_device_address, json_value
from .host_registry import host_fn_name
from ..graph.introspect import topological_order

__all__ = ["save_graph"]

_U64 = struct.Struct("<Q")
_FATBIN = b"\x50\xed\x55\xba"
#: attribute values a fresh node has: not written
_UNSET = {"priority": [0], "cluster": [(0, 0, 0), (1, 1, 1)], "cooperative": [False],
          "access_policy": [None], "mem_sync_domain": ["default"], "device_updatable": [False]}


def _refuse(where: str, what: str):
    raise GraphFileError(f"save: {where}: {what}")


class _Where:
    """Where a node is, for messages: described (a CUDA call or two) only when shown."""

    __slots__ = ("text", "node")

    def __init__(self, text: str, node):
        self.text, self.node = text, node

    def __str__(self) -> str:
        try:
            return f"{self.text} ({self.node.describe()})"
        except Exception:  # noqa: BLE001 - the message must not fail
            return f"{self.text} ({self.node.type})"


class _Saver:
    def __init__(self, slots):
        self.slots = Slots(slots)
        self.sections: list = []
        self.modules: list = []
        self.kernels: list = []
        self._module_ids: dict = {}
        self._kernel_ids: dict = {}
        self.next_id = 0
        self.alloc_ids: dict = {}  # MemAllocNode -> id, once saved
        self.allocs: list = []  # (start, end, node) of every allocation of the graph
        self.handles: dict = {}  # handle value -> ConditionalHandle (every conditional node's)
        self.handle_ids: dict = {}  # handle value -> id, once declared
        self.stack: list = []  # (graph handle int, graph dict) of the graphs being walked
        self.foreign: list = []  # (node id, kernel name) of kernels resolved at load

    # the walk ------------------------------------------------------------------------

    def run(self, graph) -> dict:
        import pycudagraph
        self.scan(graph)
        self.allocs.sort(key=lambda r: r[0])
        root = self.graph(graph, "the graph")
        return {"format": FORMAT, "writer": f"pycudagraph {pycudagraph.__version__}",
                "arch": device_arch(), "slots": self.slots.table, "modules": self.modules,
                "kernels": self.kernels, "root": root}

    def scan(self, graph) -> None:
        """Every allocation and conditional handle of the graph and the graphs it holds."""
        for n in graph.nodes:
            t = str(n.type)
            if t == "mem_alloc":
                p = n.params
                self.allocs.append((p["ptr"], p["ptr"] + p["nbytes"], n))
            elif t == "child_graph":
                self.scan(n.child)
            elif t == "conditional" and n.kind in COND_BODIES:
                self.handles.setdefault(n.condition.value, n.condition)
                for body in n.bodies:
                    self.scan(body)

    def graph(self, g, where: str) -> dict:
        out = {"handles": [], "nodes": [], "edges": []}
        self.stack.append((int(g.handle), out))
        try:
            ports = g.edge_data
            order = topological_order(g.nodes, list(ports))
            index = {n: i for i, n in enumerate(order)}
            for i, n in enumerate(order):
                out["nodes"].append(self.node(n, f"{where}, node {i}"))
            out["edges"] = sorted([index[a], index[b], port] for (a, b), port in ports.items())
        finally:
            self.stack.pop()
        return out

    def node(self, n, where: str) -> dict:
        nid = self.next_id
        self.next_id += 1
        t = str(n.type)
        save = getattr(self, f"save_{t}", None)
        if save is None:
            _refuse(where, f"a {t} node, which graph files cannot hold")
        out = {"id": nid, "type": t}
        out.update(save(n, _Where(where, n), nid))
        return out

    # addresses and handles -----------------------------------------------------------

    def find(self, addr: int, where: str):
        ref = self.slots.find(addr)
        if ref is not None:
            return ref
        i = bisect.bisect_right([a[0] for a in self.allocs], addr) - 1
        if i >= 0 and addr < self.allocs[i][1]:
            start, _, node = self.allocs[i]
            if node not in self.alloc_ids:
                _refuse(where, f"0x{addr:x} is memory of a mem_alloc node that does not come "
                               "before it")
            return {"alloc": self.alloc_ids[node], "offset": addr - start}
        return None

    def address(self, addr: int, where: str, what: str) -> dict:
        ref = self.find(addr, where)
        if ref is None:
            _refuse(where, f"{what} holds 0x{addr:x}, which belongs to no slot: pass its buffer "
                           "in slots={name: buffer}")
        return ref

    def handle(self, value: int, where: str) -> dict:
        hid = self.handle_ids.get(value)
        if hid is None:
            h = self.handles.get(value)
            home = h.graph if h is not None else None
            target = self.stack[-1][1]
            for gh, gd in self.stack:
                try:
                    if home is not None and int(home.handle) == gh:
                        target = gd
                except Exception:  # noqa: BLE001 - a closed home graph: declare it here
                    pass
            hid = self.handle_ids[value] = len(self.handle_ids)
            default = h.default if h is not None else None
            target["handles"].append({"id": hid, "default": default})
        return {"handle": hid}

    # kernels -------------------------------------------------------------------------

    def module_entry(self, mod) -> int:
        mi = self._module_ids.get(id(mod))
        if mi is None:
            image, ptx = mod.cubin, mod.ptx or ""
            is_image = is_elf(image) or image[:4] == _FATBIN
            if not is_image and not ptx:  # a module loaded from PTX text
                ptx = image.rstrip(b"\0").decode("utf-8", "replace")
            entry = {"name": mod.name, "arch": mod.arch, "cubin": None, "ptx": None}
            if is_image:
                self.sections.append(("CUBN", image))
                entry["cubin"] = len(self.sections)
            if ptx:
                self.sections.append(("PTX_", ptx.encode("utf-8")))
                entry["ptx"] = len(self.sections)
            mi = self._module_ids[id(mod)] = len(self.modules)
            self.modules.append(entry)
        return mi

    def kernel_entry(self, kern, sizes: list, where: str) -> int:
        ki = self._kernel_ids.get(id(kern))
        if ki is None:
            params = kern.layout.params
            if [p.size for p in params] != sizes:
                _refuse(where, f"kernel {kern.name}: its signature's sizes "
                               f"{[p.size for p in params]} differ from the node's {sizes}")
            sig = ", ".join(f"{p.ctype} {p.name}" for p in params)
            try:
                same = [(p.ctype, p.kind) for p in parse_params(sig)] == [(p.ctype, p.kind) for p in params]
            except ValueError:
                same = False
            self.kernels.append({"name": kern.symbol, "module": self.module_entry(kern.module),
                                 "signature": sig if same else None, "sizes": sizes})
            ki = self._kernel_ids[id(kern)] = len(self.kernels) - 1
        return ki

    def foreign_entry(self, name: str, sizes: list) -> int:
        ki = self._kernel_ids.get(name)
        if ki is None:
            self.kernels.append({"name": name, "module": None, "signature": None, "sizes": sizes})
            ki = self._kernel_ids[name] = len(self.kernels) - 1
        return ki

    def save_kernel(self, n, where: str, nid: int) -> dict:
        kern = n.kernel or kernel_for_function(n.function)
        p = n.params
        args = n.arg_bytes
        sizes = [len(b) for _, b in args]
        if kern is not None and isinstance(kern.module, Module) and kern.module.cubin:
            ki = self.kernel_entry(kern, sizes, where)
            params = kern.layout.params
        else:
            name = n.mangled_name
            ki, params = self.foreign_entry(name, sizes), [None] * len(args)
            self.foreign.append((nid, name))
        out = {"kernel": ki, "grid": list(p.grid), "block": list(p.block),
               "shared_mem": int(p.shared_mem),
               "args": [self.arg(where, i, off, data, q)
                        for i, ((off, data), q) in enumerate(zip(args, params))]}
        attrs = self.attributes(n, where)
        if attrs:
            out["attributes"] = attrs
        return out

    def arg(self, where: str, i: int, offset: int, data: bytes, param) -> dict:
        what = f"argument {i}" + (f" '{param.name}'" if param is not None else "")
        relocs = []
        kind = param.kind if param is not None else None
        if kind in ("pointer", "handle") and len(data) == 8:
            v = _U64.unpack(data)[0]
            if kind == "handle" and param.ctype != "cudaGraphConditionalHandle":
                _refuse(where, f"{what} is a {param.ctype}, which a graph file cannot hold")
            if kind == "handle":
                relocs.append([0, self.handle(v, where)])
            elif v:
                relocs.append([0, self.address(v, where, what)])
        elif kind is None and len(data) == 8 and _U64.unpack(data)[0] in self.handles:
            relocs.append([0, self.handle(_U64.unpack(data)[0], where)])
        elif kind in (None, "struct", "vector"):
            for k in range(-offset % 8, len(data) - 7, 8):
                v = _U64.unpack_from(data, k)[0]
                ref = self.find(v, where) if v else None
                if ref is not None:
                    relocs.append([k, ref])
                elif v and is_device_address(v):
                    _refuse(where, f"{what} holds device address 0x{v:x} (at byte {k}), which "
                                   "belongs to no slot: pass its buffer in slots={name: buffer}")
        return {"hex": data.hex(), "relocs": relocs}

    def attributes(self, n, where: str) -> dict:
        out = {}
        for name in ATTRIBUTES:
            try:
                value = n.get_attribute(name)
            except (CudaError, NotSupportedError):
                continue
            if value in _UNSET[name]:
                continue
            if name == "access_policy":
                value = {"base": self.address(value.base, where, "the access policy window"),
                         "nbytes": value.nbytes, "hit_ratio": value.hit_ratio,
                         "hit": value.hit, "miss": value.miss}
            out[name] = list(value) if name == "cluster" else value
        return out

    # the other node types ------------------------------------------------------------

    def save_memcpy(self, n, where: str, nid: int) -> dict:
        p = call(rt.cudaGraphMemcpyNodeGetParams, n.handle)
        if int(p.srcArray) or int(p.dstArray):
            _refuse(where, "a copy to or from a CUDA array, which graph files cannot hold")
        e, sp, dp = p.extent, p.srcPos, p.dstPos
        dst, src = int(p.dstPtr.ptr), int(p.srcPtr.ptr)
        if e.height == 1 and e.depth == 1 and not (sp.y or sp.z or dp.y or dp.z):
            return {"dst": self.address(dst + dp.x, where, "dst"),
                    "src": self.address(src + sp.x, where, "src"), "nbytes": int(e.width)}
        out = {"type": "memcpy_3d", "dst": self.address(dst, where, "dst"),
               "src": self.address(src, where, "src"), "width": int(e.width),
               "height": int(e.height), "depth": int(e.depth)}
        for side, ptr, pos in (("dst", p.dstPtr, dp), ("src", p.srcPtr, sp)):
            rows = int(ptr.ysize) if e.depth > 1 else max(int(ptr.ysize), pos.y + int(e.height))
            out.update({f"{side}_pitch": int(ptr.pitch), f"{side}_rows": rows,
                        f"{side}_pos": [int(pos.x), int(pos.y), int(pos.z)]})
        return out

    def save_memset(self, n, where: str, nid: int) -> dict:
        p = n.params
        return {"dst": self.address(p.dst, where, "dst"), "value": p.value,
                "element_size": p.element_size, "count": p.count, "height": p.height,
                "pitch": p.pitch}

    def save_host(self, n, where: str, nid: int) -> dict:
        p = n.params
        fn = p["fn"]
        if not callable(fn):
            _refuse(where, "runs a C function (a host node not built with add_host), which a "
                           "graph file cannot hold")
        name = host_fn_name(fn)
        if name is None:
            _refuse(where, f"runs {getattr(fn, '__qualname__', fn)!r}, which is not registered: "
                           "call pcg.register_host_fn(name, fn) before saving")
        args = []
        for i, a in enumerate(p["args"]):
            value, ok = json_value(a)
            if not ok:
                _refuse(where, f"host argument {i} ({type(a).__name__}) is not a JSON value "
                               "(None, bool, int, float, str or lists of them)")
            args.append(value)
        return {"fn": name, "args": args}

    def save_empty(self, n, where: str, nid: int) -> dict:
        return {}

    def save_event_record(self, n, where: str, nid: int) -> dict:
        ev = n.event
        name = self.slots.events.get(int(getattr(ev, "handle", ev)))
        if name is None:
            _refuse(where, "its event is in no slot: pass it in slots={name: event}")
        return {"event": name}

    save_event_wait = save_event_record

    def save_mem_alloc(self, n, where: str, nid: int) -> dict:
        self.alloc_ids[n] = nid
        return {"nbytes": n.params["nbytes"]}

    def save_mem_free(self, n, where: str, nid: int) -> dict:
        ptr = n.params["ptr"]
        for start, _, node in self.allocs:
            if start == ptr and node in self.alloc_ids:
                return {"alloc": self.alloc_ids[node]}
        _refuse(where, f"frees 0x{ptr:x}, which no mem_alloc node before it allocated")

    def save_child_graph(self, n, where: str, nid: int) -> dict:
        return {"graph": self.graph(n.child, f"{where}, child graph")}

    def save_conditional(self, n, where: str, nid: int) -> dict:
        p = n.params
        if p.kind not in COND_BODIES:
            _refuse(where, "a conditional node of unknown kind (reading it needs CUDA 13.2)")
        return {"kind": p.kind, "handle": self.handle(p.handle.value, where)["handle"],
                "bodies": [self.graph(b, f"{where}, body {i}") for i, b in enumerate(p.bodies)]}


def save_graph(graph, path, slots=None) -> None:
    """Write ``graph`` to ``path`` (see :meth:`pycudagraph.Graph.save`)."""
    saver = _Saver(slots)
    manifest = saver.run(graph)
    write_file(path, encode(manifest, saver.sections))
    if saver.foreign:
        names = sorted({name for _, name in saver.foreign})
        ids = ", ".join(str(i) for i, _ in saver.foreign)
        warnings.warn(GraphFileWarning(
            f"{path}: kernel node(s) {ids} run kernels pycudagraph did not compile ("
            f"{', '.join(names)}); pcg.load(path, resolve=...) needs a resolver for them"),
            stacklevel=3)
