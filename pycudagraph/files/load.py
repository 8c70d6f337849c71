"""``pcg.load``: rebuild a saved graph in the current context, with no compile and no capture.

The file is read and checked first (:mod:`.archive`, :mod:`.schema`); then, before any
node is made: the slots are bound (:mod:`.slots`), every host function name and (with
``resolve``) every kernel pycudagraph did not compile is looked up, and the modules are
loaded from the stored images (``cudaLibraryLoadData``): the CUBIN when it fits this GPU,
else the PTX (compiled by the driver), else a :class:`GraphFileError` naming both
architectures. The loader knows no node type: each record is rebuilt by the class that
owns its type (:func:`.schema.record_classes`, its ``from_record``), with the ordinary
builders, so the graph is an ordinary :class:`~pycudagraph.Graph`: instantiate it, update
it, ``set_arg`` its nodes, save it again.
"""

from __future__ import annotations

import struct

import numpy as np

from .._cuda import call, check, context, dr, fast, rt, versions
from .._cuda.bulk import RECORD_WORDS, arg_length, spans, used_kernels
from ..compile.kernel import Kernel
from ..compile.program import Module, device_arch
from ..errors import GraphFileError, PyCudaGraphError
from ..nodes.deferred_nodes import add_run, deferrable
from ..nodes.kernel_file import reader
from .modules import image_plan, load_module, parse_arch
from .schema import record_classes
from .slot_sites import file_sites
from .slots import Address, DeviceView, HeldBytes, bind_slots
from .archive import decode, gc_paused, read_file
from .bulk_format import RUN, RUN_RECORD, Runs, by_name, named_kernels
from ..graph.graph import Graph
from .host_registry import host_fn
from ..runtime.values import path_arg

__all__ = ["load", "load_with_sites", "image_plan", "parse_arch"]  # (those two live in .modules)

_U64 = struct.Struct("<Q")
#: Runs of at least this many kernel records are added with no object per node (made on
#: first use): below it, the whole-run params and checks cost more than the objects save
#: (about 0.1 ms a run against 0.4-1 us a node, measured on the driver stub and an H200).
DEFER_FROM = 128


class _Loader:
    """The loader the node classes rebuild their records with (the helpers named in
    :mod:`pycudagraph.nodes.file_records`)."""

    def __init__(self, gf, bind, resolve, source: str):
        self.gf, self.m, self.source = gf, gf.manifest, source
        self.resolve = resolve
        self.bound = bind_slots(self.m["slots"], bind)
        self.modules: dict = {}
        self.kernels: list = []
        self.readers: list = []  # per kernel: (unpack, kind) per parameter, or None
        self.args = gf.kernel_args  # node id -> argument bytes, decoded by the check
        self.pointers: dict = {}  # (slot, offset) -> the address a pointer argument takes
        self.kept: dict = {}  # id -> bound object a plain-int pointer of the graph now built uses
        self.handles: dict = {}
        self.allocs: dict = {}
        self.needs: dict = {}  # "host" / "kernel" -> [(node id, name)]
        self.device = ""
        self.classes = record_classes()
        self.host_fn = host_fn
        self.address_value = Address
        self.held_bytes = HeldBytes
        self.runs = Runs(gf.bulk, sorted(self.m["slots"])) if gf.bulk is not None else None
        self.named = None  # (positions, records) of the records of kernels saved by name
        self.funcs: dict = {}  # kernel index -> its CUfunction, for runs added with no objects
        self.named_runs: list = []  # (first record, its nodes) of each run of kernels saved by name

    def fail(self, what: str):
        raise GraphFileError(f"{self.source}: {what}")

    # before any node ------------------------------------------------------------------

    def need(self, kind: str, nid: int, name: str) -> None:
        """Node ``nid`` needs ``name`` from this process: a host function, a kernel."""
        self.needs.setdefault(kind, []).append((nid, name))

    def foreign_kernel(self, index: int):
        """The name of kernel ``index`` of the file when pycudagraph did not compile it
        (a resolver finds it), else None."""
        e = self.m["kernels"][index]
        return e["name"] if by_name(e) else None

    def find_needs(self, gd) -> None:
        for n in gd["nodes"]:
            if n["type"] == RUN:  # its kernels saved by name need a resolver
                if not self.any_named:  # (none in the file: no run needs one)
                    continue
                first = n["first"]
                used, at = np.unique(self.runs.r["kernel"][first:first + n["count"]],
                                     return_index=True)
                for k, pos in zip(used.tolist(), at.tolist()):
                    name = self.foreign_kernel(k)
                    if name is not None:
                        self.need("kernel", n["id"] + pos, name)
                continue
            cls = self.classes[n["type"]]
            cls.record_needs(n, self)
            for inner in cls.record_graphs(n):
                self.find_needs(inner)

    def check_needs(self) -> None:
        """Every host function registered, a resolver if needed. No CUDA call."""
        self.needs = {}
        self.any_named = any(by_name(k) for k in self.m["kernels"])
        self.find_needs(self.m["root"])
        hosts, foreign = self.needs.get("host", []), self.needs.get("kernel", [])
        if hosts:
            names = sorted({name for _, name in hosts})
            self.fail(f"host node(s) {', '.join(str(i) for i, _ in hosts)} run "
                      f"{', '.join(map(repr, names))}, not registered in this process: call "
                      "pcg.register_host_fn(name, fn) before pcg.load")
        if foreign and self.resolve is None:
            names = sorted({name for _, name in foreign})
            self.fail(f"kernel node(s) {', '.join(str(i) for i, _ in foreign)} run kernels "
                      f"pycudagraph did not compile ({', '.join(names)}): pass "
                      "resolve=lambda name: function_handle")

    def prepare(self) -> None:
        """Everything before the first node: host functions and resolver checked, then
        every module loaded once and every kernel found (``cudaLibraryLoadData``,
        ``cudaLibraryGetKernel``)."""
        self.check_needs()
        context.ensure_device()
        self.device = device_arch()
        self.use([self.kernel(i, k) for i, k in enumerate(self.m["kernels"])])

    def use(self, kernels: list) -> None:
        """Build with ``kernels``: per kernel of the manifest, a :class:`Kernel` or the
        ``CUfunction`` of one pycudagraph did not compile (an int). No CUDA call."""
        self.kernels = kernels
        self.kernel_tuple = tuple(kernels)
        self.readers = [[reader(p) for p in k.layout.params] if isinstance(k, Kernel) else None
                        for k in kernels]

    def build(self) -> Graph:
        """The graph, node by node with the ordinary builders."""
        return self.graph(self.m["root"])

    def module(self, i: int) -> Module:
        mod = self.modules.get(i)
        if mod is None:
            e = self.m["modules"][i]
            cubin = self.gf.section(e["cubin"], "CUBN") if e["cubin"] is not None else None
            ptx = self.gf.section(e["ptx"], "PTX_") if e["ptx"] is not None else b""
            try:
                mod = self.modules[i] = load_module(e["name"], e["arch"], cubin, ptx, self.device)
            except GraphFileError as exc:
                self.fail(str(exc))
        return mod

    def kernel(self, i: int, e: dict):
        if by_name(e):
            return self.function(e["name"], e["sizes"])
        try:
            k = self.module(e["module"]).get_kernel(e["name"], e["signature"])
            sizes = [p.size for p in k.layout.params]
        except GraphFileError:
            raise
        except PyCudaGraphError as exc:
            self.fail(f"kernel {e['name']!r}: {exc}")
        if sizes != e["sizes"]:
            self.fail(f"kernel {e['name']!r}: its parameters are {sizes} bytes in the image, "
                      f"{e['sizes']} in the manifest")
        if "block" in e and arg_length(k) != e["block"]:
            self.fail(f"kernel {e['name']!r}: its arguments take {arg_length(k)} bytes here, "
                      f"{e['block']} in the file")
        return k

    def function(self, name: str, sizes: list) -> int:
        """The ``CUfunction`` the resolver gives for ``name``, checked: its name
        (``cuFuncGetName``); the sizes are checked when the node is added."""
        try:
            obj = self.resolve(name)
        except Exception as exc:  # noqa: BLE001 - the resolver's failure, named
            self.fail(f"resolve({name!r}) raised {type(exc).__name__}: {exc}")
        if isinstance(obj, Kernel):
            func = obj.function()
        elif isinstance(obj, dr.CUkernel):
            func = int(call(dr.cuKernelGetFunction, obj))
        elif isinstance(obj, (dr.CUfunction, int)) and not isinstance(obj, bool) and int(obj):
            func = int(obj)
        else:
            self.fail(f"resolve({name!r}) returned {obj!r}: expected a CUfunction (an int or "
                      "cuda.bindings.driver.CUfunction), a CUkernel or a pcg.Kernel")
        got = check.decode(call(dr.cuFuncGetName, dr.CUfunction(func)))
        if got != name:
            self.fail(f"resolve({name!r}) returned the function {got!r}")
        return func

    # the graph ---------------------------------------------------------------------

    def graph(self, gd: dict):
        """A new graph built from a graph record (a child graph's, the root)."""
        g = Graph()
        self.fill(g, gd)
        return g

    def fill(self, g, gd: dict) -> None:
        """Build a graph record's handles, nodes and edges into ``g`` (a new graph, a body)."""
        for h in gd["handles"]:
            self.handles[h["id"]] = g.conditional_handle(h["default"])
        deps_of, ported, nodes = {}, [], []
        for a, b, port in gd["edges"]:
            if port == "default":
                deps_of.setdefault(b, []).append(a)
            else:
                ported.append((a, b, port))
        classes, outer, self.kept = self.classes, self.kept, {}
        for nd in gd["nodes"]:
            j = len(nodes)
            if nd["type"] == RUN:
                self.run(g, nd, nodes, deps_of)
                continue
            deps = [_node(g, nodes[i]) for i in deps_of.get(j, ())]
            try:
                nodes.append(classes[nd["type"]].from_record(g, deps, nd, self))
            except GraphFileError:
                raise
            except (PyCudaGraphError, ValueError, TypeError) as exc:
                self.fail(f"node {nd['id']} ({nd['type']}): {exc}")
        kept, self.kept = self.kept, outer
        if kept and g.table is not None:  # (None: a recording stand-in of the tests)
            g.table.ledger.keep_also(*kept.values())  # the graph, and its execs, keep them
        for a, b, port in ported:
            try:
                g.add_dependency(_node(g, nodes[a]), _node(g, nodes[b]), port)
            except PyCudaGraphError as exc:
                self.fail(f"the {port} edge {gd['nodes'][a]['id']} -> {gd['nodes'][b]['id']}: {exc}")

    def run(self, g, nd: dict, nodes: list, deps_of: dict) -> None:
        """A run of kernel nodes from the binary records (one ``cuGraphAddKernelNode`` each:
        for kernels pycudagraph compiled, a long run (:data:`DEFER_FROM`) with no object
        made per node where its kernels allow it
        (:func:`~pycudagraph.nodes.deferred_nodes.add_run`: ``nodes`` gets their handles,
        the table makes a node's object on first use), else ``fast.add_kernel_nodes``;
        :meth:`by_name` for those saved by name), then the edges into it from nodes before
        the run (one ``cudaGraphAddDependencies`` for them all)."""
        first, count, j = nd["first"], nd["count"], len(nodes)
        recs, args, deps = self.runs.run(first, count, self.bound, self.allocs, self.kept)
        kt = self.kernel_tuple
        try:
            if by_name(self.m["kernels"][int(recs["kernel"][0])]):  # a run holds one kind
                nodes.extend(self.by_name(g, recs, args, deps, first))
            elif (count >= DEFER_FROM and check.tracer is None
                  and deferrable(kt, (used := used_kernels(recs))[0])):
                nodes.extend(add_run(g.table, kt, self.funcs, recs, deps, args, used))
            else:  # (a trace open shows the nodes' calls one by one)
                nodes.extend(fast.add_kernel_nodes(g, kt, recs, args, deps, file_checked=True))
            if deps_of:  # (none when every edge into the run is inside it: a chain)
                frm, to = [], []
                for b in range(j, j + count):
                    for a in deps_of.get(b, ()):
                        frm.append(_handle(nodes[a]))
                        to.append(_handle(nodes[b]))
                if frm:  # the file's check put each edge once, from an earlier node to a
                    # later one (schema.py): no cycle or duplicate to look for, one call
                    versions.graph_add_dependencies(g.table.raw, frm, to)
        except GraphFileError:
            raise
        except (PyCudaGraphError, ValueError, TypeError) as exc:
            self.fail(f"kernel nodes {nd['id']}..{nd['id'] + count - 1}: {exc}")

    def by_name(self, g, recs, args, deps, first: int) -> list:
        """The nodes of records ``first`` ... of kernels saved by name, in order, built by
        the kernel record's class: with no trace open, from the file's records of such
        kernels checked and their params structs written once for the whole file
        (:meth:`function_records`: the argument sizes checked once per function against
        ``cuFuncGetParamInfo``), one ``cuGraphAddKernelNode`` per record with no Python
        work per call; with a trace open node by node (``build_function``), which the trace
        shows field by field."""
        cls, table = self.classes[RUN_RECORD], g.table
        entries = self.m["kernels"]
        if check.tracer is None:
            at, named = self.function_records()
            made = named.add(table, int(np.searchsorted(at, first)), len(recs))
            self.named_runs.append((first, made))
            return made
        build, made = cls.build_function, []
        data = memoryview(args)
        cuts = {}
        words = np.ascontiguousarray(recs).view("<u4").reshape(len(recs), RECORD_WORDS).tolist()
        for k, g0, g1, g2, b0, b1, b2, shared, off, length, df, dc in words:
            cut = cuts.get(k)
            if cut is None:
                cut = cuts[k] = spans(entries[k]["sizes"])
            block_bytes = data[off:off + length]
            made.append(build(table, [made[d] for d in deps[df:df + dc].tolist()], self.kernels[k],
                              (g0, g1, g2), (b0, b1, b2), shared,
                              [block_bytes[a:b] for a, b in cut]))
        self.named_runs.append((first, made))
        return made

    def function_records(self) -> tuple:
        """``(positions, records)``: the file's records of kernels saved by name (their
        positions among all records, and the record class's ``run_records`` of them),
        made at the first run that needs them. Their argument bytes are the loader's
        (:class:`.bulk_format.Runs`): each run's addresses are written in before it is added."""
        if self.named is None:
            entries, r = self.m["kernels"], self.runs.r
            at = np.flatnonzero(named_kernels(entries)[r["kernel"].astype(np.int64)])
            recs = r if len(at) == len(r) else r[at]
            used = set(recs["kernel"].tolist())
            self.named = at, self.classes[RUN_RECORD].run_records(
                {k: int(self.kernels[k]) for k in used}, {k: entries[k]["sizes"] for k in used},
                recs, self.runs.args, self.runs.d, {k: repr(entries[k]["name"]) for k in used})
        return self.named

    # what records refer to -----------------------------------------------------------

    def handle(self, hid: int):
        """The conditional handle made for the file's handle ``hid``."""
        return self.handles[hid]

    def event(self, name: str):
        """The event bound to an event slot."""
        return self.bound[name].obj

    def allocated(self, nid: int, ptr: int, nbytes: int) -> None:
        """The allocation record ``nid`` was rebuilt at ``ptr``."""
        self.allocs[nid] = (ptr, nbytes)

    def allocation(self, nid: int) -> tuple:
        """``(ptr, nbytes)`` of the rebuilt allocation record ``nid``."""
        return self.allocs[nid]

    def target(self, ref: dict):
        """(value, object to keep alive or None) of a reference."""
        if "slot" in ref:
            b = self.bound[ref["slot"]]
            return b.addr + ref["offset"], b.obj
        if "alloc" in ref:
            return self.allocs[ref["alloc"]][0] + ref["offset"], None
        h = self.handles[ref["handle"]]
        return h.value, h

    def memory(self, ref: dict):
        """What a copy or memset takes for a reference: the bound buffer or a view in it."""
        if "slot" in ref:
            return self.bound[ref["slot"]].view(ref["offset"])
        ptr, nbytes = self.allocs[ref["alloc"]]
        return DeviceView(None, ptr + ref["offset"], nbytes - ref["offset"])

    def sites(self, nd: dict) -> dict:
        """``{place: memory}`` of a generic record's sites (:meth:`memory` of each)."""
        return {place: self.memory(ref) for place, ref in nd["sites"]}

    def relocated(self, data: bytes, relocs: list):
        """(argument bytes with every relocation written in, the objects they keep alive)."""
        data, keep = bytearray(data), []
        for at, ref in relocs:
            value, obj = self.target(ref)
            _U64.pack_into(data, at, value)
            if obj is not None:
                keep.append(obj)
        return bytes(data), keep

    def pointer(self, relocs: list):
        """The value of a pointer argument relocated to one place: a plain int (the
        compiled add packs it with no Python call), its bound buffer kept by the graph
        being built as a whole (:meth:`fill`); an :class:`Address` keeping its object
        alive for a place that is not a slot (a conditional handle's), else an int."""
        ref = relocs[0][1]
        if "slot" not in ref:
            value, obj = self.target(ref)
            return Address(value, [obj]) if obj is not None else value
        key = (ref["slot"], ref["offset"])
        got = self.pointers.get(key)
        if got is None:
            b = self.bound[key[0]]
            got = self.pointers[key] = (b.addr + key[1], b.obj)
        if got[1] is not None:
            self.kept[id(got[1])] = got[1]
        return got[0]


def _node(g, x):
    """The node ``x`` of ``g`` stands for: itself, or (an int) the node of that handle."""
    return g.table.node(x) if type(x) is int else x


def _handle(x):
    """The raw handle of a node, or of a node handle given as an int."""
    return rt.cudaGraphNode_t(x) if type(x) is int else x.handle


def load(path, bind: dict | None = None, resolve=None) -> Graph:
    """Load a graph saved with :meth:`Graph.save <pycudagraph.Graph.save>`, in the current
    context, with no compile and no capture.

    Parameters
    ----------
    path : str or Path
    bind : dict
        ``{slot name: buffer or Event}``: one for every slot of the file, of the same kind
        (device memory, host memory, event) and at least the saved size. Every address the
        graph held in a slot becomes the same offset in the buffer bound to it.
    resolve : callable, optional
        ``resolve(function name) -> CUfunction`` (an int, ``cuda.bindings.driver.CUfunction``
        or ``CUkernel``, or a :class:`~pycudagraph.Kernel`) for kernels pycudagraph did not
        compile (captured from libraries); needed when the file has any.

    Returns
    -------
    Graph
        An ordinary graph: instantiate, update, ``set_arg``, save again.

    Raises
    ------
    GraphFileError
        A truncated, corrupted, foreign or newer-version file; a module this GPU cannot
        load (neither its CUBIN nor its PTX); a missing resolver or host function; a node
        CUDA refuses (named by its id).
    ArgumentError
        A slot not bound, bound twice, or bound to a buffer of the wrong kind or size.

    Notes
    -----
    Calls ``cudaLibraryLoadData`` per module (PTX is compiled by the driver, never by
    NVRTC), ``cudaLibraryGetKernel``, ``cudaGraphCreate`` and the node builders
    (``cuGraphAddKernelNode``, ``cudaGraphAddMemcpyNode1D``, ``cudaGraphAddMemsetNode``,
    ``cudaGraphAddHostNode``, ``cudaGraphConditionalHandleCreate``, ``cudaGraphAddNode``
    ...). Nothing in the file is executed on the host: the manifest is JSON, checked field
    by field before use.
    """
    return load_with_sites(path, bind, resolve)[0]


def load_with_sites(path, bind: dict | None = None, resolve=None, slots=(),
                    data: bytes | None = None) -> tuple:
    """``(graph, sites)``: :func:`load`, and where the file's relocations put the addresses
    of ``slots`` (slot names) in the nodes of its kernels saved by name
    (:func:`.slot_sites.file_sites`; None when no slot is asked for). ``data``: the file's
    bytes when the caller has read them already (checked here as a read file is)."""
    path = path_arg(path, "load: path")
    with gc_paused():
        gf = read_file(path) if data is None else decode(data, str(path))
        loader = _Loader(gf, bind, resolve, str(path))
        loader.prepare()
        graph = loader.build()
        if not slots or loader.runs is None:
            return graph, None
        return graph, file_sites(loader.runs, loader.m["kernels"], loader.named_runs,
                                 loader.bound, slots)
