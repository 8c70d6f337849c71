"""The checks of each type of node of a graph file's manifest (:mod:`.file_schema`), on
top of the field checks (:mod:`.file_checks`). No CUDA call.

A kernel node, the bulk of most graphs, is taken in place when it has the usual shape
and every field holds (a few type and range tests, no call per field); at the first doubt
the field-by-field check runs and names what is wrong. Both accept exactly the same nodes.
"""

from __future__ import annotations

from binascii import a2b_hex as _unhex

from .checks import I63, MAX_NODES, U32, U48, FieldChecks

__all__ = ["NodeChecks", "NODE_TYPES", "COND_BODIES"]

#: conditional kind -> (fewest, most) bodies
COND_BODIES = {"if": (1, 1), "if_else": (2, 2), "while": (1, 1), "switch": (1, 1024)}
_GRID, _SHARED = (1 << 31) - 1, 1 << 24
_PROPS = ("normal", "streaming", "persisting")
_ATTRIBUTES = ("priority", "cluster", "cooperative", "mem_sync_domain", "device_updatable",
               "access_policy")


def _extent_3d(width, height, depth, pitch, rows, pos) -> int | None:
    """The end of a copy's box in its buffer (None when pitch or rows cannot hold it)."""
    x, y, z = pos
    ok = pitch >= x + width and rows >= y + height
    return ((z + depth - 1) * rows + y + height - 1) * pitch + x + width if ok else None


class _Unusual(Exception):
    """A field the quick path of a check does not take: the full check follows."""


class NodeChecks(FieldChecks):
    """One method per node type (:data:`NODE_TYPES`): ``(node, where, handles declared
    around it, depth, id)``; a kernel node's argument bytes go to ``args``."""

    kernel_sizes: list  # each kernel's parameter sizes (the manifest's "kernels")
    args: dict  # kernel node id -> its arguments' bytes

    def kernel(self, n, where, handles, depth, nid) -> None:
        try:
            self.args[nid] = self.usual_kernel(n, handles)
        except (_Unusual, LookupError, TypeError, ValueError, AttributeError):
            self.obj(n, where, _KERNEL_FIELDS, ("attributes",))
            self.args[nid] = self.checked_kernel(n, where, handles)
        if "attributes" in n:
            self.attributes(n["attributes"], (where, ".attributes"))

    def usual_kernel(self, n, handles) -> list:
        """The argument bytes of a kernel node of the usual shape, every field valid,
        taken with a few type and range tests per field and no call. Raises at the first
        doubt: _Unusual, or what a field of another type raises (LookupError, TypeError,
        ValueError, AttributeError); :meth:`checked_kernel` then names what is wrong."""
        k, grid, block = n["kernel"], n["grid"], n["block"]
        shared, args = n["shared_mem"], n["args"]
        (g0, g1, g2), (b0, b1, b2) = grid, block
        sizes = self.kernel_sizes[k]
        if not ((len(n) == 7 or (len(n) == 8 and "attributes" in n))  # id, type and those
                and type(k) is int and k >= 0 and type(grid) is list and type(block) is list
                and type(args) is list and len(args) == len(sizes)
                and type(shared) is int and 0 <= shared <= _SHARED
                and int is type(g0) is type(g1) is type(g2) is type(b0) is type(b1) is type(b2)
                and 1 <= g0 <= _GRID and 1 <= g1 <= _GRID and 1 <= g2 <= _GRID
                and b0 >= 1 and b1 >= 1 and b2 >= 1 and b0 * b1 * b2 <= 1024):
            raise _Unusual
        out, memory, members = [], self.memory, len(n) + 2 * len(args)
        for a, size in zip(args, sizes):
            text, relocs = a["hex"], a["relocs"]
            if (len(a) != 2 or type(text) is not str or len(text) != 2 * size
                    or type(relocs) is not list):
                raise _Unusual
            out.append(_unhex(text))  # hex digits only (bytes.fromhex would skip white space)
            end = 0  # (8 bytes apart in at most 32764: never more than 4096 relocations)
            for at, v in relocs:
                if type(at) is not int or not end <= at <= size - 8:
                    raise _Unusual
                if len(v) == 1:  # {"handle": id}
                    h = v["handle"]
                    if type(h) is not int or h not in handles:
                        raise _Unusual
                    members += 1
                elif len(v) == 2 and "slot" in v:  # {"slot": name, "offset": n}
                    off = v["offset"]
                    if type(off) is not int or not 0 <= off <= memory[v["slot"]]:
                        raise _Unusual
                    members += 2
                elif self.left(v) is not None:  # {"alloc": id, "offset": n}
                    members += 2
                else:
                    raise _Unusual
                end = at + 8
        self.members += members
        return out

    def checked_kernel(self, n, where, handles) -> list:
        """Check a kernel node field by field, naming what is wrong; its argument bytes."""
        count = len(self.kernel_sizes)
        k = self.int_(n["kernel"], (where, ".kernel"), 0, count - 1)
        self.ints(n["grid"], (where, ".grid"), 3, 1, _GRID)
        block = self.ints(n["block"], (where, ".block"), 3, 1, 1024)
        if block[0] * block[1] * block[2] > 1024:
            self.fail((where, ".block"), f"{block} is more than 1024 threads")
        self.int_(n["shared_mem"], (where, ".shared_mem"), 0, _SHARED)
        sizes = self.kernel_sizes[k]
        args = self.list_(n["args"], (where, ".args"), 4096, len(sizes))
        return [self.arg(a, (where, ".args[", i, "]"), sizes[i], handles)
                for i, a in enumerate(args)]

    def arg(self, a, w, size: int, handles) -> bytes:
        """Check one argument ``{"hex", "relocs"}`` of a ``size``-byte parameter; its bytes."""
        self.obj(a, w, ("hex", "relocs"))
        text = self.str_(a["hex"], (w, ".hex"), 2 * size)
        if len(text) != 2 * size:
            self.fail((w, ".hex"), f"{len(text) // 2} bytes for a {size}-byte parameter")
        try:
            data = _unhex(text)
        except ValueError:  # (white space too: bytes.fromhex would skip it)
            self.fail((w, ".hex"), "is not hexadecimal")
        end = 0
        for j, r in enumerate(self.list_(a["relocs"], (w, ".relocs"), 4096)):
            rw = (w, ".relocs[", j, "]")
            self.list_(r, rw, 2, 2)
            at = self.int_(r[0], (rw, "[0]"), end, size - 8)
            self.ref(r[1], (rw, "[1]"), handles)
            end = at + 8
        return data

    def attributes(self, attrs, w) -> None:
        self.obj(attrs, w, (), _ATTRIBUTES)
        if "priority" in attrs:
            self.int_(attrs["priority"], (w, ".priority"), -(1 << 31), (1 << 31) - 1)
        if "cluster" in attrs:
            self.ints(attrs["cluster"], (w, ".cluster"), 3, 1, 1024)
        for flag in ("cooperative", "device_updatable"):
            if flag in attrs and not isinstance(attrs[flag], bool):
                self.fail((w, ".", flag), f"expected true or false, got {attrs[flag]!r}")
        if "mem_sync_domain" in attrs:
            self.choice(attrs["mem_sync_domain"], (w, ".mem_sync_domain"), ("default", "remote"))
        if "access_policy" in attrs:
            w = (w, ".access_policy")
            ap = self.obj(attrs["access_policy"], w, ("base", "nbytes", "hit_ratio", "hit", "miss"))
            left = self.ref(ap["base"], (w, ".base"))
            self.int_(ap["nbytes"], (w, ".nbytes"), 1, left)
            r = ap["hit_ratio"]
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
                self.fail((w, ".hit_ratio"), f"{r!r} is not a number in [0, 1]")
            self.choice(ap["hit"], (w, ".hit"), _PROPS)
            self.choice(ap["miss"], (w, ".miss"), _PROPS)

    def memcpy(self, n, where, handles, depth, nid) -> None:
        nbytes = self.int_(n["nbytes"], (where, ".nbytes"), 1, U48)
        for side in ("dst", "src"):
            left = self.ref(n[side], (where, ".", side))
            if nbytes > left:
                self.fail((where, ".", side), f"{nbytes} bytes do not fit the {left} bytes left")

    def memcpy_3d(self, n, where, handles, depth, nid) -> None:
        w = self.int_(n["width"], (where, ".width"), 1, U48)
        h = self.int_(n["height"], (where, ".height"), 1, U48)
        d = self.int_(n["depth"], (where, ".depth"), 1, U48)
        for side in ("dst", "src"):
            left = self.ref(n[side], (where, ".", side))
            pitch = self.int_(n[f"{side}_pitch"], (where, ".", side, "_pitch"), 1, U48)
            rows = self.int_(n[f"{side}_rows"], (where, ".", side, "_rows"), 1, U48)
            pos = self.ints(n[f"{side}_pos"], (where, ".", side, "_pos"), 3, 0, U48)
            end = _extent_3d(w, h, d, pitch, rows, pos)
            if end is None or end > left:
                self.fail((where, ".", side), f"the box does not fit the {left} bytes left")

    def memset(self, n, where, handles, depth, nid) -> None:
        es = n["element_size"]
        if isinstance(es, bool) or not isinstance(es, int) or es not in (1, 2, 4):
            self.fail((where, ".element_size"), f"{es!r} is not 1, 2 or 4")
        self.int_(n["value"], (where, ".value"), 0, (1 << (8 * es)) - 1)
        count = self.int_(n["count"], (where, ".count"), 1, U48)
        height = self.int_(n["height"], (where, ".height"), 1, U48)
        pitch = self.int_(n["pitch"], (where, ".pitch"), 0, U48)
        if height > 1 and pitch < count * es:
            self.fail((where, ".pitch"), f"{pitch} is smaller than a row ({count * es} bytes)")
        left = self.ref(n["dst"], (where, ".dst"))
        need = count * es + (height - 1) * pitch
        if need > left:
            self.fail((where, ".dst"), f"{need} bytes do not fit the {left} bytes left")

    def host(self, n, where, handles, depth, nid) -> None:
        self.str_(n["fn"], (where, ".fn"), 256)
        for i, a in enumerate(self.list_(n["args"], (where, ".args"), 256)):
            self.value(a, (where, ".args[", i, "]"), 0)

    def value(self, v, where, depth: int) -> None:
        if depth > 8:
            self.fail(where, "host arguments nest more than 8 deep")
        if v is None or isinstance(v, (bool, float)):
            return
        if isinstance(v, int):
            self.int_(v, where, -I63, I63 - 1)
        elif isinstance(v, str):
            self.str_(v, where, 1 << 16, empty=True)
        elif isinstance(v, list):
            for i, x in enumerate(self.list_(v, where, 4096)):
                self.value(x, (where, "[", i, "]"), depth + 1)
        else:
            self.fail(where, f"a host argument cannot be a {type(v).__name__}")

    def empty(self, n, where, handles, depth, nid) -> None:  # nothing but id and type
        pass

    def event(self, n, where, handles, depth, nid) -> None:
        name = n["event"]
        slot = self.slots.get(name) if isinstance(name, str) else None
        if slot is None or slot["kind"] != "event":
            self.fail((where, ".event"), f"{name!r} is not an event slot")

    def mem_alloc(self, n, where, handles, depth, nid) -> None:
        self.allocs[nid] = self.int_(n["nbytes"], (where, ".nbytes"), 1, U48)

    def mem_free(self, n, where, handles, depth, nid) -> None:
        a = self.int_(n["alloc"], (where, ".alloc"), 0, MAX_NODES)
        if a not in self.allocs:
            self.fail((where, ".alloc"), f"node {a} is not a mem_alloc node made before this one")

    def child_graph(self, n, where, handles, depth, nid) -> None:
        self.graph(n["graph"], (where, ".graph"), frozenset(), depth + 1)

    def conditional(self, n, where, handles, depth, nid) -> None:
        kind = self.choice(n["kind"], (where, ".kind"), tuple(COND_BODIES))
        h = self.int_(n["handle"], (where, ".handle"), 0, U32)
        if h not in handles:
            self.fail((where, ".handle"), f"handle {h} is not declared by this graph or one "
                      "around it")
        lo, hi = COND_BODIES[kind]
        bodies = self.list_(n["bodies"], (where, ".bodies"), hi)
        if len(bodies) < lo:
            self.fail((where, ".bodies"),
                      f"a {kind} node has {lo} to {hi} bodies, not {len(bodies)}")
        for i, b in enumerate(bodies):
            self.graph(b, (where, ".bodies[", i, "]"), handles, depth + 1)


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
_KERNEL_FIELDS = ("id", "type") + NODE_TYPES["kernel"][0]
