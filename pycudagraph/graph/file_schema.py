"""The manifest of a graph file, and its check: every field's type and range, and every
reference (slots, kernels, modules, sections, allocation nodes, conditional handles) before
a loader trusts any of it. No CUDA call: the whole format is testable on a CPU.

The manifest (format 1.0; docs/graph_files.md shows an example)::

    {"format": "pycudagraph.graph", "writer": str, "arch": "sm_90",
     "slots":   {name: {"kind": "device" | "host" | "event", "nbytes": int}},
     "modules": [{"name": str, "arch": str, "cubin": section | null, "ptx": section | null}],
     "kernels": [{"name": str, "module": index | null (resolved at load),
                  "signature": str | null, "sizes": [bytes of each parameter]}],
     "root":    {"handles": [{"id", "default"}], "nodes": [...], "edges": [[from, to, port]]}}

Nodes are in topological order (an edge goes from an earlier to a later node: no cycle
can be written), with ``"id"`` 0, 1, 2 ... in creation order (a node's bodies right after
it) and ``"type"``; :data:`NODE_TYPES` lists each type's fields. An address is
``{"slot": name, "offset": n}`` or ``{"alloc": id, "offset": n}``; a kernel argument is
``{"hex": its bytes, "relocs": [[byte, reference], ...]}``, where a reference may also be
``{"handle": id}``.
"""

from __future__ import annotations

from ..errors import GraphFileError

__all__ = ["FORMAT", "PORTS", "COND_BODIES", "SLOT_KINDS", "NODE_TYPES", "check_manifest"]

FORMAT = "pycudagraph.graph"
PORTS = ("default", "programmatic", "launch_completion")
#: conditional kind -> (fewest, most) bodies
COND_BODIES = {"if": (1, 1), "if_else": (2, 2), "while": (1, 1), "switch": (1, 1024)}
SLOT_KINDS = ("device", "host", "event")
_U32, _U48, _I63 = (1 << 32) - 1, 1 << 48, 1 << 63
_MAX_DEPTH, _MAX_NODES, _MAX_NAME, _PARAM_SPACE = 32, 1 << 21, 4096, 32764
_PROPS = ("normal", "streaming", "persisting")
_ATTRIBUTES = ("priority", "cluster", "cooperative", "mem_sync_domain", "device_updatable",
               "access_policy")


def _extent_3d(width, height, depth, pitch, rows, pos) -> int | None:
    """The end of a copy's box in its buffer (None when pitch or rows cannot hold it)."""
    x, y, z = pos
    ok = pitch >= x + width and rows >= y + height
    return ((z + depth - 1) * rows + y + height - 1) * pitch + x + width if ok else None


class _Checker:
    def __init__(self, tags: list, lenient: bool):
        self.tags = tags
        self.lenient = lenient  # a newer minor version: unknown keys are allowed
        self.next_id = 0
        self.allocs: dict[int, int] = {}  # mem_alloc id -> nbytes
        self.handle_ids: set = set()
        self.slots: dict = {}
        self.kernel_sizes: list = []

    # primitives ---------------------------------------------------------------------

    @staticmethod
    def fail(where: str, what: str):
        raise GraphFileError(f"manifest: {where}: {what}")

    def obj(self, v, where: str, required, optional=()) -> dict:
        if not isinstance(v, dict):
            self.fail(where, f"expected an object, got {type(v).__name__}")
        missing = [k for k in required if k not in v]
        if missing:
            self.fail(where, f"missing {', '.join(missing)}")
        unknown = sorted(k for k in v if k not in required and k not in optional)
        if unknown and not self.lenient:
            self.fail(where, f"unknown field(s) {', '.join(unknown)}")
        return v

    def int_(self, v, where: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(where, f"expected an integer, got {type(v).__name__}")
        if not lo <= v <= hi:
            self.fail(where, f"{v} is outside [{lo}, {hi}]")
        return v

    def str_(self, v, where: str, most: int = _MAX_NAME, empty: bool = False) -> str:
        if not isinstance(v, str):
            self.fail(where, f"expected a string, got {type(v).__name__}")
        if len(v) > most or (not v and not empty):
            self.fail(where, f"a string of {len(v)} characters (1 to {most} allowed)")
        return v

    def list_(self, v, where: str, most: int, exact: int | None = None) -> list:
        if not isinstance(v, list):
            self.fail(where, f"expected a list, got {type(v).__name__}")
        if len(v) > most or (exact is not None and len(v) != exact):
            want = exact if exact is not None else f"at most {most}"
            self.fail(where, f"{len(v)} entries ({want} expected)")
        return v

    def ints(self, v, where: str, n: int, lo: int, hi: int) -> list:
        return [self.int_(x, f"{where}[{i}]", lo, hi)
                for i, x in enumerate(self.list_(v, where, n, n))]

    def choice(self, v, where: str, options) -> str:
        if v not in options or not isinstance(v, str):
            self.fail(where, f"{v!r} is not one of {', '.join(options)}")
        return v

    def section(self, v, where: str, tag: str):
        if v is None:
            return None
        i = self.int_(v, where, 1, len(self.tags) - 1)
        if self.tags[i] != tag:
            self.fail(where, f"section {i} is {self.tags[i]!r}, not {tag!r}")
        return i

    # references ----------------------------------------------------------------------

    def ref(self, v, where: str, handles=None) -> int | None:
        """Check an address (or, with ``handles``, a handle) reference; the bytes left
        from it to the end of its slot or allocation (``None`` for a handle)."""
        if isinstance(v, dict) and "handle" in v and handles is not None:
            self.obj(v, where, ("handle",))
            h = self.int_(v["handle"], f"{where}.handle", 0, _U32)
            if h not in handles:
                self.fail(where, f"handle {h} is not declared by this graph or one around it")
            return None
        if isinstance(v, dict) and "slot" in v:
            self.obj(v, where, ("slot", "offset"))
            name = v["slot"]
            slot = self.slots.get(name) if isinstance(name, str) else None
            if slot is None:
                self.fail(where, f"no slot named {name!r}")
            if slot["kind"] == "event":
                self.fail(where, f"slot {name!r} is an event, not memory")
            return slot["nbytes"] - self.int_(v["offset"], f"{where}.offset", 0, slot["nbytes"])
        if isinstance(v, dict) and "alloc" in v:
            self.obj(v, where, ("alloc", "offset"))
            a = self.int_(v["alloc"], f"{where}.alloc", 0, _MAX_NODES)
            if a not in self.allocs:
                self.fail(where, f"node {a} is not a mem_alloc node made before this one")
            return self.allocs[a] - self.int_(v["offset"], f"{where}.offset", 0, self.allocs[a])
        self.fail(where, "expected {'slot': name, 'offset': n} or {'alloc': id, 'offset': n}"
                  + (" or {'handle': id}" if handles is not None else ""))

    # top level ----------------------------------------------------------------------

    def manifest(self, m) -> None:
        self.obj(m, "manifest", ("format", "writer", "arch", "slots", "modules", "kernels", "root"))
        if m["format"] != FORMAT:
            self.fail("format", f"{m['format']!r} is not {FORMAT!r}")
        self.str_(m["writer"], "writer", 256, empty=True)
        self.str_(m["arch"], "arch", 64, empty=True)
        slots = m["slots"]
        if not isinstance(slots, dict) or len(slots) > 4096:
            self.fail("slots", "expected an object of at most 4096 slots")
        for name, s in slots.items():
            where = f"slots[{name!r}]"
            self.str_(name, where, 256)
            self.obj(s, where, ("kind", "nbytes"))
            kind = self.choice(s["kind"], f"{where}.kind", SLOT_KINDS)
            self.int_(s["nbytes"], f"{where}.nbytes", 0, 0 if kind == "event" else _U48)
        self.slots = slots
        modules = self.list_(m["modules"], "modules", 4096)
        for i, mod in enumerate(modules):
            where = f"modules[{i}]"
            self.obj(mod, where, ("name", "arch", "cubin", "ptx"))
            self.str_(mod["name"], f"{where}.name")
            self.str_(mod["arch"], f"{where}.arch", 64, empty=True)
            if (self.section(mod["cubin"], f"{where}.cubin", "CUBN") is None
                    and self.section(mod["ptx"], f"{where}.ptx", "PTX_") is None):
                self.fail(where, "has neither a CUBIN nor PTX")
        for i, k in enumerate(self.list_(m["kernels"], "kernels", 1 << 16)):
            where = f"kernels[{i}]"
            self.obj(k, where, ("name", "module", "signature", "sizes"))
            self.str_(k["name"], f"{where}.name")
            if k["module"] is not None:
                self.int_(k["module"], f"{where}.module", 0, len(modules) - 1)
            if k["signature"] is not None:
                self.str_(k["signature"], f"{where}.signature", 1 << 16, empty=True)
                if k["module"] is None:
                    self.fail(where, "a signature belongs to a kernel with a module")
            sizes = self.list_(k["sizes"], f"{where}.sizes", 4096)
            for j, n in enumerate(sizes):
                self.int_(n, f"{where}.sizes[{j}]", 1, _PARAM_SPACE)
            if sum(sizes) > _PARAM_SPACE:
                self.fail(f"{where}.sizes", f"{sum(sizes)} bytes of parameters (at most {_PARAM_SPACE})")
            self.kernel_sizes.append(sizes)
        self.graph(m["root"], "root", [], 0)

    def graph(self, g, where: str, handles: list, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.fail(where, f"graphs nest more than {_MAX_DEPTH} deep")
        self.obj(g, where, ("handles", "nodes", "edges"))
        own = set()
        for i, h in enumerate(self.list_(g["handles"], f"{where}.handles", 4096)):
            w = f"{where}.handles[{i}]"
            self.obj(h, w, ("id", "default"))
            hid = self.int_(h["id"], f"{w}.id", 0, _U32)
            if hid in self.handle_ids:
                self.fail(w, f"handle id {hid} is declared twice")
            if h["default"] is not None:
                self.int_(h["default"], f"{w}.default", 0, _U32)
            self.handle_ids.add(hid)
            own.add(hid)
        visible = handles + [own]
        nodes = self.list_(g["nodes"], f"{where}.nodes", _MAX_NODES)
        for i, node in enumerate(nodes):
            self.node(node, f"{where}.nodes[{i}]", visible, depth)
        seen = set()
        for i, e in enumerate(self.list_(g["edges"], f"{where}.edges", 1 << 24)):
            w = f"{where}.edges[{i}]"
            self.list_(e, w, 3, 3)
            a = self.int_(e[0], f"{w}[0]", 0, max(len(nodes) - 2, 0))
            b = self.int_(e[1], f"{w}[1]", a + 1, len(nodes) - 1)
            self.choice(e[2], f"{w}[2]", PORTS)
            if (a, b) in seen:
                self.fail(w, f"the edge {a} -> {b} is listed twice")
            seen.add((a, b))

    # nodes --------------------------------------------------------------------------

    def node(self, n, where: str, handles: list, depth: int) -> None:
        if not isinstance(n, dict) or "type" not in n or "id" not in n:
            self.fail(where, "a node needs 'id' and 'type'")
        t = n["type"]
        check = NODE_TYPES.get(t) if isinstance(t, str) else None
        if check is None:
            self.fail(where, f"unknown node type {t!r}")
        nid = self.int_(n["id"], f"{where}.id", self.next_id, self.next_id)
        self.next_id += 1
        if self.next_id > _MAX_NODES:
            self.fail(where, f"more than {_MAX_NODES} nodes")
        required, optional, method = check
        self.obj(n, f"{where} ({t})", ("id", "type") + required, optional)
        getattr(self, method)(n, f"{where} ({t})", handles, depth, nid)

    def kernel(self, n, where, handles, depth, nid) -> None:
        k = self.int_(n["kernel"], f"{where}.kernel", 0, len(self.kernel_sizes) - 1)
        self.ints(n["grid"], f"{where}.grid", 3, 1, (1 << 31) - 1)
        block = self.ints(n["block"], f"{where}.block", 3, 1, 1024)
        if block[0] * block[1] * block[2] > 1024:
            self.fail(f"{where}.block", f"{block} is more than 1024 threads")
        self.int_(n["shared_mem"], f"{where}.shared_mem", 0, 1 << 24)
        sizes = self.kernel_sizes[k]
        visible = set().union(*handles)
        for i, a in enumerate(self.list_(n["args"], f"{where}.args", 4096, len(sizes))):
            w = f"{where}.args[{i}]"
            self.obj(a, w, ("hex", "relocs"))
            text = self.str_(a["hex"], f"{w}.hex", 2 * sizes[i])
            if len(text) != 2 * sizes[i]:
                self.fail(f"{w}.hex", f"{len(text) // 2} bytes for a {sizes[i]}-byte parameter")
            try:
                bytes.fromhex(text)
            except ValueError:
                self.fail(f"{w}.hex", "is not hexadecimal")
            end = 0
            for j, r in enumerate(self.list_(a["relocs"], f"{w}.relocs", 4096)):
                rw = f"{w}.relocs[{j}]"
                self.list_(r, rw, 2, 2)
                at = self.int_(r[0], f"{rw}[0]", end, sizes[i] - 8)
                self.ref(r[1], f"{rw}[1]", visible)
                end = at + 8
        attrs = self.obj(n.get("attributes", {}), f"{where}.attributes", (), _ATTRIBUTES)
        w = f"{where}.attributes"
        if "priority" in attrs:
            self.int_(attrs["priority"], f"{w}.priority", -(1 << 31), (1 << 31) - 1)
        if "cluster" in attrs:
            self.ints(attrs["cluster"], f"{w}.cluster", 3, 1, 1024)
        for flag in ("cooperative", "device_updatable"):
            if flag in attrs and not isinstance(attrs[flag], bool):
                self.fail(f"{w}.{flag}", f"expected true or false, got {attrs[flag]!r}")
        if "mem_sync_domain" in attrs:
            self.choice(attrs["mem_sync_domain"], f"{w}.mem_sync_domain", ("default", "remote"))
        if "access_policy" in attrs:
            ap = self.obj(attrs["access_policy"], f"{w}.access_policy",
                          ("base", "nbytes", "hit_ratio", "hit", "miss"))
            left = self.ref(ap["base"], f"{w}.access_policy.base")
            self.int_(ap["nbytes"], f"{w}.access_policy.nbytes", 1, left)
            r = ap["hit_ratio"]
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
                self.fail(f"{w}.access_policy.hit_ratio", f"{r!r} is not a number in [0, 1]")
            self.choice(ap["hit"], f"{w}.access_policy.hit", _PROPS)
            self.choice(ap["miss"], f"{w}.access_policy.miss", _PROPS)

    def memcpy(self, n, where, handles, depth, nid) -> None:
        nbytes = self.int_(n["nbytes"], f"{where}.nbytes", 1, _U48)
        for side in ("dst", "src"):
            left = self.ref(n[side], f"{where}.{side}")
            if nbytes > left:
                self.fail(f"{where}.{side}", f"{nbytes} bytes do not fit the {left} bytes left")

    def memcpy_3d(self, n, where, handles, depth, nid) -> None:
        w = self.int_(n["width"], f"{where}.width", 1, _U48)
        h = self.int_(n["height"], f"{where}.height", 1, _U48)
        d = self.int_(n["depth"], f"{where}.depth", 1, _U48)
        for side in ("dst", "src"):
            left = self.ref(n[side], f"{where}.{side}")
            pitch = self.int_(n[f"{side}_pitch"], f"{where}.{side}_pitch", 1, _U48)
            rows = self.int_(n[f"{side}_rows"], f"{where}.{side}_rows", 1, _U48)
            pos = self.ints(n[f"{side}_pos"], f"{where}.{side}_pos", 3, 0, _U48)
            end = _extent_3d(w, h, d, pitch, rows, pos)
            if end is None or end > left:
                self.fail(f"{where}.{side}", f"the box does not fit the {left} bytes left")

    def memset(self, n, where, handles, depth, nid) -> None:
        es = n["element_size"]
        if isinstance(es, bool) or not isinstance(es, int) or es not in (1, 2, 4):
            self.fail(f"{where}.element_size", f"{es!r} is not 1, 2 or 4")
        self.int_(n["value"], f"{where}.value", 0, (1 << (8 * es)) - 1)
        count = self.int_(n["count"], f"{where}.count", 1, _U48)
        height = self.int_(n["height"], f"{where}.height", 1, _U48)
        pitch = self.int_(n["pitch"], f"{where}.pitch", 0, _U48)
        if height > 1 and pitch < count * es:
            self.fail(f"{where}.pitch", f"{pitch} is smaller than a row ({count * es} bytes)")
        left = self.ref(n["dst"], f"{where}.dst")
        need = count * es + (height - 1) * pitch
        if need > left:
            self.fail(f"{where}.dst", f"{need} bytes do not fit the {left} bytes left")

    def host(self, n, where, handles, depth, nid) -> None:
        self.str_(n["fn"], f"{where}.fn", 256)
        for i, a in enumerate(self.list_(n["args"], f"{where}.args", 256)):
            self.value(a, f"{where}.args[{i}]", 0)

    def value(self, v, where: str, depth: int) -> None:
        if depth > 8:
            self.fail(where, "host arguments nest more than 8 deep")
        if v is None or isinstance(v, (bool, float)):
            return
        if isinstance(v, int):
            self.int_(v, where, -_I63, _I63 - 1)
        elif isinstance(v, str):
            self.str_(v, where, 1 << 16, empty=True)
        elif isinstance(v, list):
            for i, x in enumerate(self.list_(v, where, 4096)):
                self.value(x, f"{where}[{i}]", depth + 1)
        else:
            self.fail(where, f"a host argument cannot be a {type(v).__name__}")

    def empty(self, n, where, handles, depth, nid) -> None:  # nothing but id and type
        pass

    def event(self, n, where, handles, depth, nid) -> None:
        name = n["event"]
        slot = self.slots.get(name) if isinstance(name, str) else None
        if slot is None or slot["kind"] != "event":
            self.fail(f"{where}.event", f"{name!r} is not an event slot")

    def mem_alloc(self, n, where, handles, depth, nid) -> None:
        self.allocs[nid] = self.int_(n["nbytes"], f"{where}.nbytes", 1, _U48)

    def mem_free(self, n, where, handles, depth, nid) -> None:
        a = self.int_(n["alloc"], f"{where}.alloc", 0, _MAX_NODES)
        if a not in self.allocs:
            self.fail(f"{where}.alloc", f"node {a} is not a mem_alloc node made before this one")

    def child_graph(self, n, where, handles, depth, nid) -> None:
        self.graph(n["graph"], f"{where}.graph", [], depth + 1)

    def conditional(self, n, where, handles, depth, nid) -> None:
        kind = self.choice(n["kind"], f"{where}.kind", tuple(COND_BODIES))
        h = self.int_(n["handle"], f"{where}.handle", 0, _U32)
        if not any(h in s for s in handles):
            self.fail(f"{where}.handle", f"handle {h} is not declared by this graph or one "
                      "around it")
        lo, hi = COND_BODIES[kind]
        bodies = self.list_(n["bodies"], f"{where}.bodies", hi)
        if len(bodies) < lo:
            self.fail(f"{where}.bodies", f"a {kind} node has {lo} to {hi} bodies, not {len(bodies)}")
        for i, b in enumerate(bodies):
            self.graph(b, f"{where}.bodies[{i}]", handles, depth + 1)


#: node type -> (required fields, optional fields, checker method)
NODE_TYPES = {
    "kernel": (("kernel", "grid", "block", "shared_mem", "args"), ("attributes",), "kernel"),
    "memcpy": (("dst", "src", "nbytes"), (), "memcpy"),
    "memcpy_3d": (("dst", "src", "width", "height", "depth", "dst_pitch", "src_pitch",
                   "dst_rows", "src_rows", "dst_pos", "src_pos"), (), "memcpy_3d"),
    "memset": (("dst", "value", "element_size", "count", "height", "pitch"), (), "memset"),
    "host": (("fn", "args"), (), "host"),
    "empty": ((), (), "empty"),
    "event_record": (("event",), (), "event"),
    "event_wait": (("event",), (), "event"),
    "mem_alloc": (("nbytes",), (), "mem_alloc"),
    "mem_free": (("alloc",), (), "mem_free"),
    "child_graph": (("graph",), (), "child_graph"),
    "conditional": (("kind", "handle", "bodies"), (), "conditional"),
}


def check_manifest(manifest, tags, lenient: bool = False) -> None:
    """Check a decoded manifest against the format; :class:`GraphFileError` naming the field
    (``manifest: root.nodes[3] (kernel).args[1].hex: ...``) otherwise. No CUDA call.

    Parameters
    ----------
    manifest : dict
    tags : sequence of str
        The tag of each section of the file (section 0 is the manifest).
    lenient : bool
        Allow unknown fields (the file was written by a newer minor version).
    """
    _Checker(list(tags), lenient).manifest(manifest)
