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

import hashlib
import re
import struct
import weakref

import numpy as np

from .._cuda import call, check, context, dr
from ..compile.kernel import Kernel
from ..compile.program import Module, device_arch
from ..errors import CudaError, GraphFileError, PyCudaGraphError
from ..nodes.attributes import AccessPolicyWindow
from ..nodes.captured_kernel import CapturedKernelNode
from .file_slots import Address, DeviceView, HeldBytes, bind_slots
from .files import read_file
from .graph import Graph
from .host_registry import host_fn
from ..runtime.values import path_arg

__all__ = ["load", "image_plan", "parse_arch"]

_U64 = struct.Struct("<Q")
#: sha256 of (name, kind, image) -> a loaded Module: graphs loaded from several files that
#: share a module share one cudaLibraryLoadData
_MODULES: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_ARCH = re.compile(r"(?:sm|compute)_(\d)(\d+)?([af]?)$")


def parse_arch(text: str):
    """``"sm_90a"`` -> ``(9, 0, "a")``; ``None`` when it is not an architecture name. No CUDA call."""
    m = _ARCH.match(text or "")
    if m is None:
        return None
    digits = m.group(1) + (m.group(2) or "")
    return int(digits[:-1] or 0), int(digits[-1]), m.group(3)


def _ptx_target(ptx: str) -> str:
    m = re.search(r"^\s*\.target\s+(\w+)", ptx, re.M)
    return m.group(1) if m else ""


def image_plan(arch: str, has_cubin: bool, ptx: str, device: str) -> list:
    """Which stored images to try on a GPU of architecture ``device``, in order: ``"cubin"``
    when a CUBIN for ``arch`` runs there (same major version, same or newer minor; exactly
    the same for an ``a`` CUBIN), then ``"ptx"`` when its ``.target`` is not newer than the
    GPU. Unknown architectures are tried. No CUDA call."""
    d = parse_arch(device)
    plan = []
    c = parse_arch(arch)
    if has_cubin and (c is None or d is None or (
            c[:2] == d[:2] if c[2] == "a" else (c[0] == d[0] and d[1] >= c[1]))):
        plan.append("cubin")
    t = parse_arch(_ptx_target(ptx)) if ptx else None
    if ptx and (t is None or d is None or (t[:2] == d[:2] if t[2] == "a" else d[:2] >= t[:2])):
        plan.append("ptx")
    return plan


class _Loader:
    def __init__(self, gf, bind, resolve, source: str):
        self.gf, self.m, self.source = gf, gf.manifest, source
        self.resolve = resolve
        self.bound = bind_slots(self.m["slots"], bind)
        self.modules: dict = {}
        self.kernels: list = []
        self.handles: dict = {}
        self.allocs: dict = {}
        self.device = ""

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

    def load_kernels(self) -> None:
        """Every module loaded and kernel found (``cudaLibraryLoadData``, ``cudaLibraryGetKernel``)."""
        self.device = device_arch()
        self.kernels = [self.kernel(i, k) for i, k in enumerate(self.m["kernels"])]

    def module(self, i: int) -> Module:
        mod = self.modules.get(i)
        if mod is not None:
            return mod
        e = self.m["modules"][i]
        cubin = self.gf.section(e["cubin"], "CUBN") if e["cubin"] is not None else None
        try:
            ptx = self.gf.section(e["ptx"], "PTX_").decode("utf-8") if e["ptx"] is not None else ""
        except UnicodeDecodeError:
            self.fail(f"module {e['name']!r}: its PTX is not UTF-8 text")
        plan = image_plan(e["arch"], cubin is not None, ptx, self.device)
        if not plan:
            have = (f"a CUBIN for {e['arch'] or 'an unknown architecture'}" if cubin else "no CUBIN")
            have += f" and PTX for {_ptx_target(ptx) or '?'}" if ptx else " and no PTX"
            self.fail(f"module {e['name']!r} has {have}; this GPU is {self.device}: save the "
                      "graph on (or compile it for) this architecture, or keep its PTX")
        errors = []
        for kind in plan:
            image = cubin if kind == "cubin" else ptx.encode("utf-8") + b"\0"
            key = hashlib.sha256(e["name"].encode() + kind.encode() + image).digest()
            mod = _MODULES.get(key)
            if mod is None:
                arch = e["arch"] if kind == "cubin" else _ptx_target(ptx)
                mod = Module(image, name=e["name"], arch=arch, ptx=ptx)
                try:
                    mod.handle  # noqa: B018 - cudaLibraryLoadData now, not at the first node
                except CudaError as exc:
                    errors.append(f"its {kind}: {exc}")
                    continue
                _MODULES[key] = mod
            self.modules[i] = mod
            return mod
        self.fail(f"module {e['name']!r}: this GPU ({self.device}) loads none of its images: "
                  + "; ".join(errors))

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
        for j, nd in enumerate(gd["nodes"]):
            deps = [nodes[i] for i in deps_of.get(j, ())]
            try:
                nodes.append(getattr(self, f"add_{nd['type']}")(g, nd, deps))
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

    @staticmethod
    def value(p, data: bytes, keep: list):
        """A kernel argument's bytes as the value its parameter packs to the same bytes."""
        kind = p.kind
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
        return struct.unpack("<" + p.fmt, data)[0]

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
        k = self.kernels[nd["kernel"]]
        raw = []
        for a in nd["args"]:
            data, keep = bytearray.fromhex(a["hex"]), []
            for at, ref in a["relocs"]:
                value, obj = self.target(ref)
                _U64.pack_into(data, at, value)
                if obj is not None:
                    keep.append(obj)
            raw.append((bytes(data), keep))
        grid, block, attrs = tuple(nd["grid"]), tuple(nd["block"]), self.attributes(nd)
        if isinstance(k, Kernel):
            args = [self.value(p, d, keep) for p, (d, keep) in zip(k.layout.params, raw)]
            return g.add_kernel(k, grid, block, args, nd["shared_mem"], deps, **attrs)
        node = CapturedKernelNode.build_function(g.table, deps, k, grid, block, nd["shared_mem"],
                                                 [d for d, _ in raw],
                                                 [o for _, keep in raw for o in keep])
        for name, value in attrs.items():
            node.set_attribute(name, value)
        return node

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
    gf = read_file(path)
    loader = _Loader(gf, bind, resolve, str(path))
    loader.check_needs()
    context.ensure_device()
    loader.load_kernels()
    g = Graph()
    loader.graph(g, gf.manifest["root"])
    return g
