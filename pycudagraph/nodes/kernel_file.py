"""A kernel node's record in a graph file (the protocol of :mod:`.file_records`).

``{"kernel": index into the file's kernels, "grid", "block", "shared_mem", "args":
[{"hex": bytes, "relocs": [[byte, reference], ...]}], "attributes"?}``: each argument's
bytes with its addresses as relocations. Which bytes are addresses: a pointer parameter
of a kernel pycudagraph compiled (it must lie in a slot), a conditional handle, and in the
bytes of a struct argument or of any argument of a kernel pycudagraph did not compile,
every 8-byte aligned value that lies in a slot or allocation (a value the driver knows as
device memory but in no slot refuses the save; other values are numbers and stay).

A kernel node of the usual shape is checked in place, with a few type and range tests
per field and no call (:meth:`KernelFile.usual_kernel`); at the first doubt the field by
field check runs and names what is wrong. Both accept exactly the same records.
"""

from __future__ import annotations

import struct
from binascii import a2b_hex as _unhex

import numpy as np

from ..compile.kernel import kernel_for_function
from ..errors import CudaError, NotSupportedError
from .arg_slots import pointer_slots
from .attributes import ATTRIBUTES, AccessPolicyWindow
from .file_records import FileRecord, record_text

__all__ = ["KernelFile", "Unusual", "KERNEL_FIELDS", "reader", "value"]

_U64 = struct.Struct("<Q")
_GRID, _SHARED = (1 << 31) - 1, 1 << 24
_PROPS = ("normal", "streaming", "persisting")
_ATTRIBUTES = ("priority", "cluster", "cooperative", "mem_sync_domain", "device_updatable",
               "access_policy")
#: attribute values a fresh node has: not written
_UNSET = {"priority": [0], "cluster": [(0, 0, 0), (1, 1, 1)], "cooperative": [False],
          "access_policy": [None], "mem_sync_domain": ["default"], "device_updatable": [False]}
#: a kernel record's fields
KERNEL_FIELDS = ("id", "type", "kernel", "grid", "block", "shared_mem", "args")


class Unusual(Exception):
    """A field the quick path of a check does not take: the full check follows."""


def reader(p):
    """``(unpack, kind)`` of a kernel parameter: ``unpack(data)[0]`` is the value of its
    bytes when no relocation applies (None for bytes values: structs, vectors, bfloat16)."""
    if p.kind in ("struct", "vector", "bfloat16"):
        return None, p.kind
    return struct.Struct("<" + ("Q" if p.kind in ("pointer", "handle") else p.fmt)).unpack, p.kind


def value(kind: str, data: bytes, keep: list, unpack=None, into=None):
    """A kernel argument's bytes as the value its parameter (of ``kind``, ``unpack`` from
    :func:`reader`) packs to the same bytes, keeping ``keep`` alive (``into``'s
    ``address`` and ``held_bytes`` make the objects that do)."""
    if kind == "pointer":
        v = _U64.unpack(data)[0]
        return into.address_value(v, keep) if keep else v
    if kind == "handle":
        return keep[0] if keep else _U64.unpack(data)[0]
    if kind in ("struct", "vector"):
        return into.held_bytes(data, keep) if into is not None else data
    if kind == "bfloat16":
        bits = struct.unpack("<H", data)[0]
        return float(np.array([bits << 16], np.uint32).view(np.float32)[0])
    return unpack(data)[0]


class KernelFile(FileRecord):
    """The record of a kernel node: see the module."""

    __slots__ = ()
    file_types = ("kernel",)
    file_shape = {"kernel": (KERNEL_FIELDS[2:], ("attributes",))}

    # save ------------------------------------------------------------------------------

    def to_record(self, out, where, nid: int) -> dict:
        """Grid, block, shared memory, arguments with their relocations, attributes:
        no CUDA call for a node built here (``cuGraphKernelNodeGetParams`` for one read back),
        ``cudaGraphKernelNodeGetAttribute`` per attribute, ``cuMemGetAddressRange`` for
        struct and captured arguments."""
        kern = self.kernel or kernel_for_function(self.function)
        p = self.params
        args = self.arg_bytes
        sizes = [len(b) for _, b in args]
        ki = out.kernel_entry(kern, sizes, where) if kern is not None else None
        if ki is not None:
            params = kern.layout.params
        else:
            ki, params = out.foreign_entry(self.mangled_name, sizes, nid), [None] * len(args)
        rec = {"kernel": ki, "grid": list(p.grid), "block": list(p.block),
               "shared_mem": int(p.shared_mem),
               "args": [_arg(out, where, i, off, data, q)
                        for i, ((off, data), q) in enumerate(zip(args, params))]}
        attrs = _attributes(self, out, where)
        if attrs:
            rec["attributes"] = attrs
        return rec

    # check -----------------------------------------------------------------------------

    @classmethod
    def bulk_record(cls, n, kernels: list, loaded: dict) -> bool:
        """A kernel record travels as a binary record when it sets no launch attributes,
        each of its addresses points into a slot or an allocation node, and its kernel is
        either one pycudagraph compiled (a module and a signature, held by the saver) or
        one saved by name (a library's: its arguments are its parameters' bytes one after
        another). No CUDA call."""
        if "attributes" in n:
            return False
        ki = n["kernel"]
        entry = kernels[ki]
        if entry["module"] is not None and (entry["signature"] is None or ki not in loaded):
            return False
        return all("slot" in ref or "alloc" in ref for a in n["args"] for _, ref in a["relocs"])

    @classmethod
    def check_record(cls, c, n, where, handles, depth: int, nid: int) -> None:
        """The record in place when of the usual shape, else field by field. No CUDA call."""
        try:
            c.args[nid] = cls.usual_kernel(c, n, handles)
        except (Unusual, LookupError, TypeError, ValueError, AttributeError):
            c.obj(n, where, KERNEL_FIELDS, ("attributes",))
            c.args[nid] = cls.checked_kernel(c, n, where, handles)
        if "attributes" in n:
            _check_attributes(c, n["attributes"], (where, ".attributes"))

    @staticmethod
    def usual_kernel(c, n, handles) -> list:
        """The argument bytes of a kernel record of the usual shape, every field valid,
        taken with a few type and range tests per field. No CUDA call. Raises at the first
        doubt: Unusual, or what a field of another type raises (LookupError, TypeError,
        ValueError, AttributeError); :meth:`checked_kernel` then names what is wrong."""
        k, grid, block = n["kernel"], n["grid"], n["block"]
        shared, args = n["shared_mem"], n["args"]
        (g0, g1, g2), (b0, b1, b2) = grid, block
        sizes = c.kernel_sizes[k]
        if not ((len(n) == 7 or (len(n) == 8 and "attributes" in n))  # id, type and those
                and type(k) is int and k >= 0 and type(grid) is list and type(block) is list
                and type(args) is list and len(args) == len(sizes)
                and type(shared) is int and 0 <= shared <= _SHARED
                and int is type(g0) is type(g1) is type(g2) is type(b0) is type(b1) is type(b2)
                and 1 <= g0 <= _GRID and 1 <= g1 <= _GRID and 1 <= g2 <= _GRID
                and b0 >= 1 and b1 >= 1 and b2 >= 1 and b0 * b1 * b2 <= 1024):
            raise Unusual
        out, memory, members = [], c.memory, len(n) + 2 * len(args)
        for a, size in zip(args, sizes):
            text, relocs = a["hex"], a["relocs"]
            if (len(a) != 2 or type(text) is not str or len(text) != 2 * size
                    or type(relocs) is not list):
                raise Unusual
            out.append(_unhex(text))  # hex digits only (bytes.fromhex would skip white space)
            end = 0  # (8 bytes apart in at most 32764: never more than 4096 relocations)
            for at, v in relocs:
                if type(at) is not int or not end <= at <= size - 8:
                    raise Unusual
                if len(v) == 1:  # {"handle": id}
                    h = v["handle"]
                    if type(h) is not int or h not in handles:
                        raise Unusual
                    members += 1
                elif len(v) == 2 and "slot" in v:  # {"slot": name, "offset": n}
                    off = v["offset"]
                    if type(off) is not int or not 0 <= off <= memory[v["slot"]]:
                        raise Unusual
                    members += 2
                elif c.left(v) is not None:  # {"alloc": id, "offset": n}
                    members += 2
                else:
                    raise Unusual
                end = at + 8
        c.members += members
        return out

    @staticmethod
    def checked_kernel(c, n, where, handles) -> list:
        """Check a kernel record field by field, naming what is wrong; its argument bytes.
        No CUDA call."""
        k = c.int_(n["kernel"], (where, ".kernel"), 0, len(c.kernel_sizes) - 1)
        c.ints(n["grid"], (where, ".grid"), 3, 1, _GRID)
        block = c.ints(n["block"], (where, ".block"), 3, 1, 1024)
        if block[0] * block[1] * block[2] > 1024:
            c.fail((where, ".block"), f"{block} is more than 1024 threads")
        c.int_(n["shared_mem"], (where, ".shared_mem"), 0, _SHARED)
        sizes = c.kernel_sizes[k]
        args = c.list_(n["args"], (where, ".args"), 4096, len(sizes))
        return [_check_arg(c, a, (where, ".args[", i, "]"), sizes[i], handles)
                for i, a in enumerate(args)]

    # load ------------------------------------------------------------------------------

    @classmethod
    def record_view(cls, n, kernels: list) -> tuple:
        """``(label, details, args)`` of a kernel record (format 1) as a page shows it
        (:meth:`FileRecord.record_view <pycudagraph.nodes.file_records.FileRecord.record_view>`):
        the kernel's name (the label), its launch fields, each argument's bytes with the
        references its relocations hold. No CUDA call."""
        name = kernels[n["kernel"]]["name"]
        details = [[key, record_text(n[key])] for key in n
                   if key not in ("id", "type", "kernel", "args")]
        args = [[f"arg {i}", a["hex"], "; ".join(f"byte {b}: {record_text(ref)}"
                                                  for b, ref in a["relocs"])]
                for i, a in enumerate(n["args"])]
        return name, details, args

    @classmethod
    def record_needs(cls, n, into) -> None:
        """A resolver for a kernel pycudagraph did not compile. No CUDA call."""
        name = into.foreign_kernel(n["kernel"])
        if name is not None:
            into.need("kernel", n["id"], name)

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """A compiled kernel through ``graph.add_kernel``, its arguments as the values its
        parameters pack to the same bytes; a kernel pycudagraph did not compile through
        ``cls.build_function`` (``cls``: the registry's kernel class), bytes by index: both
        ``cuGraphAddKernelNode`` (and ``cudaGraphKernelNodeSetAttribute`` per attribute)."""
        k, readers = into.kernels[n["kernel"]], into.readers[n["kernel"]]
        grid, block, data = tuple(n["grid"]), tuple(n["block"]), into.args[n["id"]]
        if readers is None:  # a function pycudagraph did not compile: bytes by index
            raw = [into.relocated(d, a["relocs"]) if a["relocs"] else (d, ())
                   for d, a in zip(data, n["args"])]
            node = cls.build_function(graph.table, deps, k, grid, block, n["shared_mem"],
                                      [d for d, _ in raw], [o for _, keep in raw for o in keep])
            for name, v in _load_attributes(n, into).items():
                node.set_attribute(name, v)
            return node
        args = []
        for (unpack, kind), d, a in zip(readers, data, n["args"]):
            relocs = a["relocs"]
            if not relocs:
                args.append(unpack(d)[0] if unpack is not None else value(kind, d, [], into=into))
            elif kind == "pointer" and len(relocs) == 1 and relocs[0][0] == 0 and len(d) == 8:
                args.append(into.pointer(relocs))
            else:
                args.append(value(kind, *into.relocated(d, relocs), unpack, into))
        if "attributes" in n:
            return graph.add_kernel(k, grid, block, args, n["shared_mem"], deps,
                                    **_load_attributes(n, into))
        return graph.add_kernel(k, grid, block, args, n["shared_mem"], deps)


def _arg(out, where, i: int, offset: int, data: bytes, param) -> dict:
    """One argument's record: its bytes and its addresses as relocations."""
    what = f"argument {i}" + (f" '{param.name}'" if param is not None else "")
    relocs = []
    kind = param.kind if param is not None else None
    if kind in ("pointer", "handle") and len(data) == 8:
        v = _U64.unpack(data)[0]
        if kind == "handle" and param.ctype != "cudaGraphConditionalHandle":
            out.refuse(where, f"{what} is a {param.ctype}, which a graph file cannot hold")
        if kind == "handle":
            relocs.append([0, out.handle(v, where)])
        elif v:
            relocs.append([0, out.address(v, where, what)])
    elif kind is None and len(data) == 8 and out.is_handle(_U64.unpack(data)[0]):
        relocs.append([0, out.handle(_U64.unpack(data)[0], where)])
    elif kind in (None, "struct", "vector"):
        for k, v in pointer_slots(data, offset):
            ref = out.find(v, where) if v else None
            if ref is not None:
                relocs.append([k, ref])
            elif v and out.is_device_address(v):
                out.refuse(where, f"{what} holds device address 0x{v:x} (at byte {k}), which "
                                  "belongs to no slot: pass its buffer in slots={name: buffer}")
    return {"hex": data.hex(), "relocs": relocs}


def _attributes(node, out, where) -> dict:
    """The node's attributes that differ from a fresh node's
    (``cudaGraphKernelNodeGetAttribute``)."""
    rec = {}
    for name in ATTRIBUTES:
        try:
            v = node.get_attribute(name)
        except (CudaError, NotSupportedError):
            continue
        if v in _UNSET[name]:
            continue
        if name == "access_policy":
            v = {"base": out.address(v.base, where, "the access policy window"),
                 "nbytes": v.nbytes, "hit_ratio": v.hit_ratio, "hit": v.hit, "miss": v.miss}
        rec[name] = list(v) if name == "cluster" else v
    return rec


def _load_attributes(n: dict, into) -> dict:
    rec = dict(n.get("attributes", {}))
    if "cluster" in rec:
        rec["cluster"] = tuple(rec["cluster"])
    if "access_policy" in rec:
        ap = rec["access_policy"]
        rec["access_policy"] = AccessPolicyWindow(into.target(ap["base"])[0], ap["nbytes"],
                                                  float(ap["hit_ratio"]), ap["hit"], ap["miss"])
    return rec


def _check_arg(c, a, w, size: int, handles) -> bytes:
    """Check one argument ``{"hex", "relocs"}`` of a ``size``-byte parameter; its bytes."""
    c.obj(a, w, ("hex", "relocs"))
    text = c.str_(a["hex"], (w, ".hex"), 2 * size)
    if len(text) != 2 * size:
        c.fail((w, ".hex"), f"{len(text) // 2} bytes for a {size}-byte parameter")
    try:
        data = _unhex(text)
    except ValueError:  # (white space too: bytes.fromhex would skip it)
        c.fail((w, ".hex"), "is not hexadecimal")
    end = 0
    for j, r in enumerate(c.list_(a["relocs"], (w, ".relocs"), 4096)):
        rw = (w, ".relocs[", j, "]")
        c.list_(r, rw, 2, 2)
        at = c.int_(r[0], (rw, "[0]"), end, size - 8)
        c.ref(r[1], (rw, "[1]"), handles)
        end = at + 8
    return data


def _check_attributes(c, attrs, w) -> None:
    c.obj(attrs, w, (), _ATTRIBUTES)
    if "priority" in attrs:
        c.int_(attrs["priority"], (w, ".priority"), -(1 << 31), (1 << 31) - 1)
    if "cluster" in attrs:
        c.ints(attrs["cluster"], (w, ".cluster"), 3, 1, 1024)
    for flag in ("cooperative", "device_updatable"):
        if flag in attrs and not isinstance(attrs[flag], bool):
            c.fail((w, ".", flag), f"expected true or false, got {attrs[flag]!r}")
    if "mem_sync_domain" in attrs:
        c.choice(attrs["mem_sync_domain"], (w, ".mem_sync_domain"), ("default", "remote"))
    if "access_policy" in attrs:
        w = (w, ".access_policy")
        ap = c.obj(attrs["access_policy"], w, ("base", "nbytes", "hit_ratio", "hit", "miss"))
        left = c.ref(ap["base"], (w, ".base"))
        c.int_(ap["nbytes"], (w, ".nbytes"), 1, left)
        r = ap["hit_ratio"]
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
            c.fail((w, ".hit_ratio"), f"{r!r} is not a number in [0, 1]")
        c.choice(ap["hit"], (w, ".hit"), _PROPS)
        c.choice(ap["miss"], (w, ".miss"), _PROPS)
