"""``Graph.save``: walk a graph (and its bodies and child graphs) into a graph file.

The walk knows no node type: each node's class writes its own record (its fields plus its
sites as relocations; :mod:`pycudagraph.nodes.file_records`), with the helpers here: an
address as a slot or allocation and offset, a conditional handle, an event's slot, an
inner graph, a kernel's entry in the file's kernel table (the CUBIN and PTX of each module
pycudagraph compiled, as sections of the file, one per module, and its signature). A
kernel pycudagraph did not compile (captured from a library) is saved by its function
name: the loading process resolves it (``pcg.load(..., resolve=)``), and the save warns
which nodes. A node whose class names no file type refuses the save, naming it.

An address that belongs to no slot refuses the save, naming the node and the argument:
a pointer parameter of our kernels; in the bytes of a struct argument, or of any argument
of a captured kernel, an 8-byte aligned value the driver knows as device memory
(``cuMemGetAddressRange``). Other values are kept as they are.
"""

from __future__ import annotations

import bisect
import warnings

from ..compile.program import Module, device_arch
from ..compile.ptx import is_elf
from ..compile.signature import parse_params
from ..errors import GraphFileError, GraphFileWarning
from .schema import FORMAT
from .archive import VERSION, encode, write_file
from .bulk_format import pack, version_of
from .slots import Slots, is_device_address, json_value
from .host_registry import host_fn_name
from ..graph.introspect import topological_order

__all__ = ["save_graph"]

_FATBIN = b"\x50\xed\x55\xba"


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
    """The writer the node classes write their records with (the helpers named in
    :mod:`pycudagraph.nodes.file_records`)."""

    def __init__(self, slots, numbers=frozenset()):
        self.slots = Slots(slots)
        self.numbers = numbers  # values kept as numbers though device memory holds them
        self.sections: list = []
        self.modules: list = []
        self.kernels: list = []
        self._module_ids: dict = {}
        self._kernel_ids: dict = {}
        self.kernel_objs: dict = {}  # kernel index -> the Kernel (those pycudagraph compiled)
        self.next_id = 0
        self.alloc_ids: dict = {}  # allocating node -> id, once saved
        self.allocs: list = []  # (start, end, node) of every allocation of the graph
        self.starts: list = []  # the allocations' starts, sorted
        self.handles: dict = {}  # handle value -> ConditionalHandle (every conditional node's)
        self.handle_ids: dict = {}  # handle value -> id, once declared
        self.stack: list = []  # (graph handle int, graph dict) of the graphs being walked
        self.foreign: list = []  # (node id, kernel name) of kernels resolved at load
        self.refuse = _refuse
        self.json = json_value
        self.host_fn_name = host_fn_name

    # the walk ------------------------------------------------------------------------

    def run(self, graph) -> dict:
        import pycudagraph
        for node, _, _ in graph.table.walk():  # what records may refer to, before any
            declare = getattr(node, "file_declare", None)
            if declare is not None:
                declare(self)
        self.allocs.sort(key=lambda r: r[0])
        self.starts = [r[0] for r in self.allocs]
        root = self.graph(graph, "the graph")
        return {"format": FORMAT, "writer": f"pycudagraph {pycudagraph.__version__}",
                "arch": device_arch(), "slots": self.slots.table, "modules": self.modules,
                "kernels": self.kernels, "root": root}

    def graph(self, g, where: str) -> dict:
        """A graph's record: its handles, its nodes in topological order, its edges."""
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
        types = getattr(n, "file_types", ())
        if not types:
            _refuse(where, f"a {n.type} node, which graph files cannot hold")
        out = {"id": nid, "type": types[0]}
        out.update(n.to_record(self, _Where(where, n), nid))
        return out

    # what records refer to -------------------------------------------------------------

    def declare_allocation(self, node, start: int, nbytes: int) -> None:
        """Memory ``node`` hands out: addresses in it are saved as that node + offset."""
        self.allocs.append((start, start + nbytes, node))

    def declare_handle(self, handle) -> None:
        """A conditional handle of the graph: argument bytes equal to it are that handle."""
        self.handles.setdefault(handle.value, handle)

    def allocated(self, node, nid: int) -> None:
        """``node``'s record is written with id ``nid``: later records may point into it."""
        self.alloc_ids[node] = nid

    def freed(self, ptr: int):
        """The id of the saved allocation starting at ``ptr``, or None."""
        for start, _, node in self.allocs:
            if start == ptr and node in self.alloc_ids:
                return self.alloc_ids[node]
        return None

    def is_handle(self, value: int) -> bool:
        return value in self.handles

    def is_device_address(self, value: int) -> bool:
        return value not in self.numbers and is_device_address(value)

    def find(self, addr: int, where: str):
        ref = self.slots.find(addr)
        if ref is not None:
            return ref
        i = bisect.bisect_right(self.starts, addr) - 1
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

    def event(self, ev, where: str) -> str:
        name = self.slots.events.get(int(getattr(ev, "handle", ev)))
        if name is None:
            _refuse(where, "its event is in no slot: pass it in slots={name: event}")
        return name

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

    def kernel_entry(self, kern, sizes: list, where: str):
        """The index of ``kern`` in the file's kernels, its module's images saved once;
        None for a kernel whose module has no image to save (it is resolved at load)."""
        if not (isinstance(kern.module, Module) and kern.module.cubin):
            return None
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
            self.kernel_objs[ki] = kern
        return ki

    def foreign_entry(self, name: str, sizes: list, nid: int) -> int:
        """The index of a kernel pycudagraph did not compile, saved by name (node ``nid``
        needs a resolver at load)."""
        self.foreign.append((nid, name))
        ki = self._kernel_ids.get(name)
        if ki is None:
            self.kernels.append({"name": name, "module": None, "signature": None, "sizes": sizes})
            ki = self._kernel_ids[name] = len(self.kernels) - 1
        return ki


def save_graph(graph, path, slots=None, numbers=frozenset()) -> None:
    """Write ``graph`` to ``path`` (see :meth:`pycudagraph.Graph.save`).

    ``numbers``: values a by-value argument holds that are saved as numbers even where they
    lie in device memory (``cuMemGetAddressRange``): bytes a library left unfilled, which a
    second capture showed to differ (``pcg.graphed``'s save). An address a pointer parameter
    holds is never one."""
    saver = _Saver(slots, frozenset(numbers))
    manifest, sections = pack(saver.run(graph), saver.sections, saver.kernel_objs)
    write_file(path, encode(manifest, sections, version_of(manifest, VERSION)))
    if saver.foreign:
        names = sorted({name for _, name in saver.foreign})
        ids = ", ".join(str(i) for i, _ in saver.foreign)
        warnings.warn(GraphFileWarning(
            f"{path}: kernel node(s) {ids} run kernels pycudagraph did not compile ("
            f"{', '.join(names)}); pcg.load(path, resolve=...) needs a resolver for them"),
            stacklevel=3)
