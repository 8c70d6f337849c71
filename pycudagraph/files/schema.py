"""The manifest of a graph file, and its check: every field's type and range, and every
reference (slots, kernels, modules, sections, allocation nodes, conditional handles) before
a loader trusts any of it. No CUDA call: the whole format is testable on a CPU.

The manifest (format 2.0; docs/graph_files.md shows an example)::

    {"format": "pycudagraph.graph", "writer": str, "arch": "sm_90",
     "slots":   {name: {"kind": "device" | "host" | "event", "nbytes": int}},
     "modules": [{"name": str, "arch": str, "cubin": section | null, "ptx": section | null}],
     "kernels": [{"name": str, "module": index | null (resolved at load),
                  "signature": str | null, "sizes": [bytes of each parameter]}],
     "root":    {"handles": [{"id", "default"}], "nodes": [...], "edges": [[from, to, port]]}}

Nodes are in topological order (an edge goes from an earlier to a later node: no cycle
can be written), with ``"id"`` 0, 1, 2 ... in creation order (a node's bodies right after
it) and ``"type"``. The rest of a node's record is its class's to say: the class that
owns the type (:func:`record_classes`) checks it (its ``check_record``,
:mod:`pycudagraph.nodes.file_records`). An address is
``{"slot": name, "offset": n}`` or ``{"alloc": id, "offset": n}``; a kernel argument is
``{"hex": its bytes, "relocs": [[byte, reference], ...]}``, where a reference may also be
``{"handle": id}``. Format 2 adds ``"bulk"`` (the binary kernel records' sections), a
kernel entry's ``"block"`` and ``{"id", "type": "kernel_run", "count", "first"}`` entries in
a node list, each standing for ``count`` kernel nodes (:mod:`.bulk_format`); format 3
lets those records be of kernels saved by name (a ``"block"`` on an entry with no module:
the sum of its ``"sizes"``); a format-1 file is a format-2 file without them, and is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..nodes.registry import REGISTRY
from .bulk_format import RUN, by_name, check_run, check_runs, check_sections, named_kernels
from .checks import MAX_NODES, U32, U48, FieldChecks

__all__ = ["FORMAT", "PORTS", "SLOT_KINDS", "Checked", "check_manifest", "record_classes"]

FORMAT = "pycudagraph.graph"
PORTS = ("default", "programmatic", "launch_completion")
SLOT_KINDS = ("device", "host", "event")
_MAX_DEPTH, _PARAM_SPACE = 32, 32764


def record_classes() -> dict:
    """``{file type: node class}``: every type a graph file may hold, each owned by the
    class of the registry (:data:`~pycudagraph.nodes.registry.REGISTRY`) that names it in
    its ``file_types``. No CUDA call."""
    return {t: cls for cls in REGISTRY.values() for t in getattr(cls, "file_types", ())}


@dataclass(frozen=True)
class Checked:
    """What a check of a manifest found besides "valid": ``members``, the number of
    members of all the objects it checked (the reader compares it with the text: a
    repeated key makes it fall short), and ``kernel_args``, each kernel node's arguments
    as bytes (``{node id: [bytes, ...]}``, the hex decoded once, before relocation)."""

    members: int
    kernel_args: dict = field(repr=False)
    #: the binary kernel records' arrays (:mod:`.bulk_format`), or None
    bulk: tuple | None = field(default=None, repr=False)


class _Checker(FieldChecks):
    """The walk over a manifest: its top level, then each graph's handles, nodes (in
    order, ids counted) and edges. A node or edge list of the usual shape is taken with a
    few tests in place; anything else goes through the checks that name what is wrong."""

    def __init__(self, tags: list, lenient: bool, sections=None):
        super().__init__(tags, lenient)
        self.sections = sections  # (tag, bytes) per section: the bulk sections are read
        self.bulk = None  # the bulk sections' arrays and the next record a run takes
        self.manifest_kernels: list = []
        self.classes = record_classes()
        self.next_id = 0
        self.handle_ids: set = set()
        self.kernel_sizes: list = []
        self.args: dict = {}  # kernel node id -> its arguments' bytes

    # top level ----------------------------------------------------------------------

    def manifest(self, m) -> None:
        self.obj(m, "manifest", ("format", "writer", "arch", "slots", "modules", "kernels", "root"),
                 ("bulk",))
        if m["format"] != FORMAT:
            self.fail("format", f"{m['format']!r} is not {FORMAT!r}")
        self.str_(m["writer"], "writer", 256, empty=True)
        self.str_(m["arch"], "arch", 64, empty=True)
        slots = m["slots"]
        if not isinstance(slots, dict) or len(slots) > 4096:
            self.fail("slots", "expected an object of at most 4096 slots")
        for name, s in slots.items():
            where = ("slots[", repr(name), "]")
            self.str_(name, where, 256)
            self.obj(s, where, ("kind", "nbytes"))
            kind = self.choice(s["kind"], (where, ".kind"), SLOT_KINDS)
            self.int_(s["nbytes"], (where, ".nbytes"), 0, 0 if kind == "event" else U48)
        self.members += len(slots)
        self.slots = slots
        self.memory = {name: s["nbytes"] for name, s in slots.items() if s["kind"] != "event"}
        modules = self.list_(m["modules"], "modules", 4096)
        for i, mod in enumerate(modules):
            where = ("modules[", i, "]")
            self.obj(mod, where, ("name", "arch", "cubin", "ptx"))
            self.str_(mod["name"], (where, ".name"))
            self.str_(mod["arch"], (where, ".arch"), 64, empty=True)
            cubin = self.section(mod["cubin"], (where, ".cubin"), "CUBN")
            if self.section(mod["ptx"], (where, ".ptx"), "PTX_") is None and cubin is None:
                self.fail(where, "has neither a CUBIN nor PTX")
        for i, k in enumerate(self.list_(m["kernels"], "kernels", 1 << 16)):
            where = ("kernels[", i, "]")
            self.obj(k, where, ("name", "module", "signature", "sizes"), ("block",))
            if "block" in k:
                self.int_(k["block"], (where, ".block"), 0, _PARAM_SPACE)
            self.str_(k["name"], (where, ".name"))
            if k["module"] is not None:
                self.int_(k["module"], (where, ".module"), 0, len(modules) - 1)
            if k["signature"] is not None:
                self.str_(k["signature"], (where, ".signature"), 1 << 16, empty=True)
                if k["module"] is None:
                    self.fail(where, "a signature belongs to a kernel with a module")
            sizes = self.list_(k["sizes"], (where, ".sizes"), 4096)
            for j, n in enumerate(sizes):
                self.int_(n, (where, ".sizes[", j, "]"), 1, _PARAM_SPACE)
            if sum(sizes) > _PARAM_SPACE:
                self.fail((where, ".sizes"),
                          f"{sum(sizes)} bytes of parameters (at most {_PARAM_SPACE})")
            if "block" in k and by_name(k) and k["block"] != sum(sizes):
                self.fail((where, ".block"), f"{k['block']} bytes for a kernel saved by name, "
                                              f"whose parameters take {sum(sizes)}")
            self.kernel_sizes.append(sizes)
        self.manifest_kernels = m["kernels"]
        if "bulk" in m:
            if self.sections is None:
                self.fail("bulk", "the file's sections were not given to the check")
            self.bulk = _Bulk(check_sections(self, m["bulk"], self.sections),
                              named_kernels(m["kernels"]))
        self.graph(m["root"], "root", frozenset(), 0)
        if self.bulk is not None and self.bulk.next != len(self.bulk.arrays[0]):
            self.fail("bulk.records", f"records {self.bulk.next}.. belong to no kernel run")
        if self.bulk is not None:
            check_runs(self, self.bulk)

    def graph(self, g, where, handles, depth: int) -> None:
        """Check a graph; ``handles``: the handle ids declared by the graphs around it."""
        if depth > _MAX_DEPTH:
            self.fail(where, f"graphs nest more than {_MAX_DEPTH} deep")
        self.obj(g, where, ("handles", "nodes", "edges"))
        own = set()
        for i, h in enumerate(self.list_(g["handles"], (where, ".handles"), 4096)):
            w = (where, ".handles[", i, "]")
            self.obj(h, w, ("id", "default"))
            hid = self.int_(h["id"], (w, ".id"), 0, U32)
            if hid in self.handle_ids:
                self.fail(w, f"handle id {hid} is declared twice")
            if h["default"] is not None:
                self.int_(h["default"], (w, ".default"), 0, U32)
            self.handle_ids.add(hid)
            own.add(hid)
        visible = handles | own if own else handles
        nodes = self.list_(g["nodes"], (where, ".nodes"), MAX_NODES)
        classes, count = self.classes, len(nodes)
        for i, n in enumerate(nodes):
            nid = self.next_id
            try:  # a node of a known type with the next id: its fields are checked next
                t = n["type"]
                if t == RUN and type(t) is str and n["id"] == nid and type(nid) is int:
                    stands = check_run(self, n, (where, ".nodes[", i, "] (", t, ")"), nid,
                                       self.bulk)
                    self.next_id, count = nid + stands, count + stands - 1
                    if self.next_id > MAX_NODES:
                        self.fail((where, ".nodes[", i, "]"), f"more than {MAX_NODES} nodes")
                    continue
                cls = classes.get(t) if type(t) is str else None
                usual = cls is not None and n["id"] == nid < MAX_NODES and type(n["id"]) is int
            except (LookupError, TypeError):
                usual = False
            if usual:
                self.next_id = nid + 1
                cls.check_record(self, n, (where, ".nodes[", i, "] (", t, ")"), visible, depth,
                                 nid)
            else:
                self.node(n, (where, ".nodes[", i, "]"), visible, depth)
        self.edges(self.list_(g["edges"], (where, ".edges"), 1 << 24), where, count)

    def edges(self, edges: list, where, count: int) -> None:
        try:  # as written: in increasing order, so none is listed twice
            pa = pb = -1
            for a, b, port in edges:
                if not (int is type(a) is type(b) and 0 <= a < b < count and port in PORTS
                        and (a > pa or (a == pa and b > pb))):
                    break
                pa, pb = a, b
            else:
                return
        except (TypeError, ValueError):
            pass
        seen = set()
        for i, e in enumerate(edges):
            w = (where, ".edges[", i, "]")
            self.list_(e, w, 3, 3)
            a = self.int_(e[0], (w, "[0]"), 0, max(count - 2, 0))
            b = self.int_(e[1], (w, "[1]"), a + 1, count - 1)
            self.choice(e[2], (w, "[2]"), PORTS)
            if (a, b) in seen:
                self.fail(w, f"the edge {a} -> {b} is listed twice")
            seen.add((a, b))

    # nodes --------------------------------------------------------------------------

    def node(self, n, where, handles, depth: int) -> None:
        if not isinstance(n, dict) or "type" not in n or "id" not in n:
            self.fail(where, "a node needs 'id' and 'type'")
        t = n["type"]
        cls = self.classes.get(t) if isinstance(t, str) else None
        if cls is None:
            self.fail(where, f"unknown node type {t!r}")
        nid = self.int_(n["id"], (where, ".id"), self.next_id, self.next_id)
        self.next_id += 1
        if self.next_id > MAX_NODES:
            self.fail(where, f"more than {MAX_NODES} nodes")
        cls.check_record(self, n, (where, " (", t, ")"), handles, depth, nid)


class _Bulk:
    """The bulk sections' arrays (records, argument bytes, deps, relocations), per kernel
    whether it is saved by name, the next record a kernel run takes, the runs seen
    (``(first, count, where, node id)``) and whether any relocation is into an allocation."""

    def __init__(self, arrays, named):
        self.arrays, self.named, self.next = arrays, named, 0
        self.runs: list = []
        rel = arrays[3]
        self.allocated = bool(len(rel) and (rel["kind"] == 1).any())


def check_manifest(manifest, tags, lenient: bool = False, sections=None) -> Checked:
    """Check a decoded manifest against the format; :class:`GraphFileError` naming the field
    (``manifest: root.nodes[3] (kernel).args[1].hex: ...``) otherwise. No CUDA call.

    Parameters
    ----------
    manifest : dict
    tags : sequence of str
        The tag of each section of the file (section 0 is the manifest).
    lenient : bool
        Allow unknown fields (the file was written by a newer minor version).
    sections : sequence of (tag, bytes), optional
        The file's sections: the binary kernel records (format 2) are checked with the
        manifest (:mod:`.bulk_format`).

    Returns
    -------
    Checked
        The members counted and the kernel arguments' bytes.
    """
    checker = _Checker(list(tags), lenient, sections)
    checker.manifest(manifest)
    return Checked(checker.members, checker.args,
                   checker.bulk.arrays if checker.bulk is not None else None)
