"""``pcg.load``: rebuild a saved graph in the current context, with no compile and no capture.

The file is read and checked first (:mod:`.files`, :mod:`.file_schema`); then, before any
node is made: the slots are bound (:mod:`.file_slots`), every host function name and
(with ``resolve``) every kernel pycudagraph did not compile is looked up, and the modules
are loaded from the stored images (``cudaLibraryLoadData``): the CUBIN when it fits this
GPU, else the PTX (compiled by the driver), else a :class:`GraphFileError` naming both
architectures. The graph is then built with the ordinary builders, so it is an ordinary
:class:`~pycudagraph.Graph`: instantiate it, update it, ``set_arg`` its nodes, save it again.
"""

from __future__ import annotations

import struct

import numpy as np

from .._cuda import call, check, context, dr
from ..compile.kernel import Kernel
from ..compile.program import Module, device_arch
from ..errors import GraphFileError, PyCudaGraphError
from ..nodes.attributes import AccessPolicyWindow
from ..nodes.captured_kernel import CapturedKernelNode
from .modules import image_plan, load_module, parse_arch
from .schema import NODE_TYPES
from .slots import Address, DeviceView, HeldBytes, bind_slots
from .archive import gc_paused, read_file
from ..graph.graph import Graph
from .host_registry import host_fn
from ..runtime.values import path_arg

__all__ = ["load", "image_plan", "parse_arch"]  # (those two live in .file_modules)

_U64 = struct.Struct("<Q")


def _reader(p):
    """``(unpack, kind)`` of a kernel parameter: ``unpack(data)[0]`` is the value of its
    bytes when no relocation applies (None for bytes values: structs, vectors, bfloat16)."""
    if p.kind in ("struct", "vector", "bfloat16"):
        return None, p.kind
    return struct.Struct("<" + ("Q" if p.kind in ("pointer", "handle") else p.fmt)).unpack, p.kind


def _value(kind: str, data: bytes, keep: list, unpack=None):
    """A kernel argument's bytes as the value its parameter (of ``kind``, ``unpack`` from
    :func:`_reader`) packs to the same bytes, keeping ``keep`` alive."""
    if kind == "pointer":
        v = _U64.unpack(data)[0]
        return Address(v, keep) if keep else v
    if kind == "handle":
        return keep[0] if keep else _U64.unpack(data)[0]
    if kind in ("struct", "vector"):
        return HeldBytes(data, keep)
    if kind == "bfloat16":
        bits = struct.unpack("<H", data)[0]
        return float(np.array([bits << 16], np.uint32).view(np.float32)[0])
    return unpack(data)[0]


class _Loader:
    def __init__(self, gf, bind, resolve, source: str):
        self.gf, self.m, self.source = gf, gf.manifest, source
        self.resolve = resolve
        self.bound = bind_slots(self.m["slots"], bind)
        self.modules: dict = {}
        self.kernels: list = []
        self.readers: list = []  # per kernel: (unpack, kind) per parameter, or None
        self.args = gf.kernel_args  # node id -> argument bytes, decoded by the check
        self.pointers: dict = {}  # (slot, offset) -> the Address a pointer argument takes
        self.handles: dict = {}
        self.allocs: dict = {}
        self.device = ""
        self.adders = {t: getattr(self, f"add_{t}") for t in NODE_TYPES}

    def fail(self, what: str):
        raise GraphFileError(f"{self.source}: {what}")

    # before any node ------------------------------------------------------------------

    def needs(self, gd, foreign: list, hosts: list) -> None:
        for n in gd["nodes"]:
            t = n["type"]
            if t == "kernel" and self.m["kernels"][n["kernel"]]["module"] is None:
                foreign.append((n["id"], self.m["kernels"][n["kernel"]]["name"]))
            elif t == "host" and host_fn(n["fn"]) is None:
                hosts.append((n["id"], n["fn"]))
            elif t == "child_graph":
                self.needs(n["graph"], foreign, hosts)
            elif t == "conditional":
                for b in n["bodies"]:
                    self.needs(b, foreign, hosts)

    def check_needs(self) -> None:
        """Every host function registered, a resolver if needed. No CUDA call."""
        foreign, hosts = [], []
        self.needs(self.m["root"], foreign, hosts)
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
        self.readers = [[_reader(p) for p in k.layout.params] if isinstance(k, Kernel) else None
                        for k in kernels]

    def build(self) -> Graph:
        """The graph, node by node with the ordinary builders."""
        g = Graph()
        self.graph(g, self.m["root"])
        return g

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
        if e["module"] is None:
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

    def graph(self, g, gd: dict) -> None:
        for h in gd["handles"]:
            self.handles[h["id"]] = g.conditional_handle(h["default"])
        deps_of, ported, nodes = {}, [], []
        for a, b, port in gd["edges"]:
            if port == "default":
                deps_of.setdefault(b, []).append(a)
            else:
                ported.append((a, b, port))
        adders = self.adders
        for j, nd in enumerate(gd["nodes"]):
            deps = [nodes[i] for i in deps_of.get(j, ())]
            try:
                nodes.append(adders[nd["type"]](g, nd, deps))
            except GraphFileError:
                raise
            except (PyCudaGraphError, ValueError, TypeError) as exc:
                self.fail(f"node {nd['id']} ({nd['type']}): {exc}")
        for a, b, port in ported:
            try:
                g.add_dependency(nodes[a], nodes[b], port)
            except PyCudaGraphError as exc:
                self.fail(f"the {port} edge {gd['nodes'][a]['id']} -> {gd['nodes'][b]['id']}: {exc}")

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
        """The value of a pointer argument relocated to one place: an :class:`Address`
        keeping its buffer alive (one per place, shared by the nodes), or an int."""
        ref = relocs[0][1]
        if "slot" not in ref:
            value, obj = self.target(ref)
            return Address(value, [obj]) if obj is not None else value
        key = (ref["slot"], ref["offset"])
        addr = self.pointers.get(key)
        if addr is None:
            b = self.bound[key[0]]
            addr = self.pointers[key] = Address(b.addr + key[1], [b.obj])
        return addr

    def attributes(self, nd: dict) -> dict:
        out = dict(nd.get("attributes", {}))
        if "cluster" in out:
            out["cluster"] = tuple(out["cluster"])
        if "access_policy" in out:
            ap = out["access_policy"]
            out["access_policy"] = AccessPolicyWindow(self.target(ap["base"])[0], ap["nbytes"],
                                                      float(ap["hit_ratio"]), ap["hit"], ap["miss"])
        return out

    def add_kernel(self, g, nd, deps):
        k, readers = self.kernels[nd["kernel"]], self.readers[nd["kernel"]]
        grid, block = nd["grid"], nd["block"]
        if readers is None:  # a function pycudagraph did not compile: bytes by index
            raw = [self.relocated(d, a["relocs"]) if a["relocs"] else (d, ())
                   for d, a in zip(self.args[nd["id"]], nd["args"])]
            node = CapturedKernelNode.build_function(g.table, deps, k, tuple(grid), tuple(block),
                                                     nd["shared_mem"], [d for d, _ in raw],
                                                     [o for _, keep in raw for o in keep])
            for name, value in self.attributes(nd).items():
                node.set_attribute(name, value)
            return node
        grid, block = tuple(grid), tuple(block)  # (n, 1, 1) takes add_kernel's compiled path
        args = []
        for (unpack, kind), data, a in zip(readers, self.args[nd["id"]], nd["args"]):
            relocs = a["relocs"]
            if not relocs:
                args.append(unpack(data)[0] if unpack is not None else _value(kind, data, []))
            elif kind == "pointer" and len(relocs) == 1 and relocs[0][0] == 0 and len(data) == 8:
                args.append(self.pointer(relocs))
            else:
                args.append(_value(kind, *self.relocated(data, relocs), unpack))
        if "attributes" in nd:
            return g.add_kernel(k, grid, block, args, nd["shared_mem"], deps,
                                **self.attributes(nd))
        return g.add_kernel(k, grid, block, args, nd["shared_mem"], deps)

    def add_memcpy(self, g, nd, deps):
        return g.add_memcpy(self.memory(nd["dst"]), self.memory(nd["src"]), nd["nbytes"], deps)

    def add_memcpy_3d(self, g, nd, deps):
        layout = {k: nd[k] for k in ("dst_pitch", "src_pitch", "dst_rows", "src_rows")}
        return g.add_memcpy_3d(self.memory(nd["dst"]), self.memory(nd["src"]), nd["width"],
                               nd["height"], nd["depth"], deps, dst_pos=tuple(nd["dst_pos"]),
                               src_pos=tuple(nd["src_pos"]), **layout)

    def add_memset(self, g, nd, deps):
        return g.add_memset(self.memory(nd["dst"]), nd["value"], nd["count"], nd["element_size"],
                            nd["height"], nd["pitch"] if nd["height"] > 1 else None, deps)

    def add_host(self, g, nd, deps):
        return g.add_host(host_fn(nd["fn"]), tuple(nd["args"]), deps)

    def add_empty(self, g, nd, deps):
        return g.add_empty(deps)

    def add_event_record(self, g, nd, deps):
        return g.add_event_record(self.bound[nd["event"]].obj, deps)

    def add_event_wait(self, g, nd, deps):
        return g.add_event_wait(self.bound[nd["event"]].obj, deps)

    def add_mem_alloc(self, g, nd, deps):
        node = g.add_mem_alloc(nd["nbytes"], deps)
        self.allocs[nd["id"]] = (node.ptr, nd["nbytes"])
        return node

    def add_mem_free(self, g, nd, deps):
        return g.add_mem_free(self.allocs[nd["alloc"]][0], deps)

    def add_child_graph(self, g, nd, deps):
        child = Graph()
        self.graph(child, nd["graph"])
        return g.add_child_graph(child, deps)

    def add_conditional(self, g, nd, deps):
        h, kind, bodies = self.handles[nd["handle"]], nd["kind"], nd["bodies"]
        node = (g.add_switch(h, len(bodies), deps) if kind == "switch"
                else getattr(g, f"add_{kind}")(h, deps))
        for body, bd in zip(node.bodies, bodies):
            self.graph(body, bd)
        return node


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
    path = path_arg(path, "load: path")
    with gc_paused():
        loader = _Loader(read_file(path), bind, resolve, str(path))
        loader.prepare()
        return loader.build()
