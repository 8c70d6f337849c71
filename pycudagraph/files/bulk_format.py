"""The binary part of a graph file (format 2): kernel nodes as fixed records.

A kernel node with no attributes set and no conditional handle among its arguments is
not a JSON record when its kernel is one pycudagraph compiled (its signature in the file:
the loaded kernel packs its arguments alike) or one saved by name (a library's kernel,
found by a resolver at load). A run of such nodes of one kind, one after another in a
graph's node list, is one entry ``{"id": first id, "type": "kernel_run", "count": n,
"first": its first record}`` standing for n nodes (ids ``id`` ... ``id + n - 1``), and each
node is a record in four sections the manifest's ``"bulk"`` names (``{"records", "args",
"deps", "relocs"}``: section indices; integers little-endian):

``KREC``  48 bytes per node: u32 kernel index, grid[3], block[3], shared memory, argument
          offset and length in ``KARG``, first and count of its dependencies in ``KDEP``.
``KARG``  each node's arguments: as its kernel's layout packs them (the argument slots of
          the launch buffer) for a kernel pycudagraph compiled, its parameters' bytes one
          after another (``"sizes"``) for one saved by name; the kernel entry's ``"block"``
          is their length.
``KDEP``  u32: a node's dependencies inside its run, as positions in the run (each before
          the node). Edges from or to nodes outside the run stay in the graph's edge list.
``KREL``  24 bytes per address: u32 record, u32 byte in its argument block, u32 kind (0: a
          slot, 1: an allocation node), u32 the slot (its index among the slot names in
          sorted order) or the allocation node's id, u64 offset in it; sorted by record
          and byte, none overlapping.

:func:`pack` turns a format-1 manifest (what the saver writes) into this; :func:`check`
checks the sections (in the manifest check, before anything is trusted); :class:`Runs`
gives a loader each run's records with its addresses written in (one numpy pass).
Records of kernels saved by name make a file of format 3 (:func:`version_of`): a reader of
format 2 refuses it as a newer version rather than as a damaged file.
No CUDA call in this module.
"""

from __future__ import annotations

import numpy as np

from .._cuda import fast
from .._cuda.bulk import RECORD, spans
from ..nodes.registry import REGISTRY

__all__ = ["RUN", "RUN_RECORD", "RECORD", "RELOC", "TAGS", "BY_NAME_VERSION", "pack",
           "version_of", "named_records", "named_kernels", "by_name",
           "check_sections", "check_run", "check_runs", "Runs"]

RUN = "kernel_run"
#: the file type of the records a run stands for
RUN_RECORD = "kernel"
#: the format of a file holding records of kernels saved by name
BY_NAME_VERSION = (3, 0)
RELOC = np.dtype([("record", "<u4"), ("at", "<u4"), ("kind", "<u4"), ("target", "<u4"),
                  ("offset", "<u8")])
#: the sections, by the manifest's "bulk" key
TAGS = {"records": "KREC", "args": "KARG", "deps": "KDEP", "relocs": "KREL"}
_GRID, _SHARED = (1 << 31) - 1, 1 << 24
#: the most each of a record's grid[3], block[3] and shared memory may be
_HIGHEST = np.array([_GRID] * 3 + [1024] * 3 + [_SHARED], np.int64)[:, None]


# save ----------------------------------------------------------------------------------

class _Packer:
    def __init__(self, manifest: dict, kernels: dict):
        self.m, self.kernels = manifest, kernels
        self.slot_index = {name: i for i, name in enumerate(sorted(manifest["slots"]))}
        self.recs: list = []
        self.args = bytearray()
        self.deps: list = []
        self.relocs: list = []
        self.blocks: dict = {}  # kernel index -> (block length, [argument positions])
        self.classes = {t: cls for cls in REGISTRY.values()
                        for t in getattr(cls, "file_types", ())}  # (schema.record_classes)

    def block(self, ki: int) -> tuple:
        """``(length, [each argument's position])`` of kernel ``ki``'s argument block."""
        got = self.blocks.get(ki)
        if got is None:
            entry = self.m["kernels"][ki]
            if by_name(entry):  # its parameters' bytes one after another
                got = (sum(entry["sizes"]), [a for a, _ in spans(entry["sizes"])])
            else:
                lay = self.kernels[ki].layout
                got = (lay.size - lay.values_offset, [o - lay.values_offset for o in lay.offsets])
            self.blocks[ki] = got
            entry["block"] = got[0]
        return got

    def graph(self, gd: dict) -> None:
        nodes, out, runs = gd["nodes"], [], {}  # runs: node position -> (run start, record)
        entries = self.m["kernels"]
        start = named = None  # named: the run's kernels are saved by name
        for j, n in enumerate(nodes):
            for inner in self.classes[n["type"]].record_graphs(n):
                self.graph(inner)
            if self.classes[n["type"]].bulk_record(n, entries, self.kernels):
                this = by_name(entries[n["kernel"]])
                if start is None or this != named:  # a run holds kernels of one kind
                    start, named = j, this
                    out.append({"id": n["id"], "type": RUN, "count": 0, "first": len(self.recs)})
                out[-1]["count"] += 1
                runs[j] = (start, len(self.recs))
                self.record(n)
            else:
                start = None
                out.append(n)
        if not runs:
            return
        inside: dict = {}
        edges = []
        for a, b, port in gd["edges"]:
            if port == "default" and b in runs and a in runs and runs[a][0] == runs[b][0]:
                inside.setdefault(b, []).append(a - runs[b][0])
            else:
                edges.append([a, b, port])
        for j, (s, r) in runs.items():
            got = sorted(inside.get(j, ()))
            self.recs[r][10:12] = [len(self.deps), len(got)]
            self.deps.extend(got)
        gd["nodes"], gd["edges"] = out, edges

    def record(self, n: dict) -> None:
        ki = n["kernel"]
        length, where = self.block(ki)
        base, r = len(self.args), len(self.recs)
        block = bytearray(length)
        for pos, a in zip(where, n["args"]):
            data = bytes.fromhex(a["hex"])
            block[pos:pos + len(data)] = data
            for at, ref in a["relocs"]:
                if "slot" in ref:
                    self.relocs.append((r, pos + at, 0, self.slot_index[ref["slot"]], ref["offset"]))
                else:
                    self.relocs.append((r, pos + at, 1, ref["alloc"], ref["offset"]))
        self.args += block
        self.recs.append([ki, *n["grid"], *n["block"], n["shared_mem"], base, length, 0, 0])


def by_name(entry: dict) -> bool:
    """Whether a kernel entry of the manifest is a kernel saved by name (no module)."""
    return entry["module"] is None


def named_kernels(kernels: list) -> np.ndarray:
    """Per kernel entry of a manifest, whether it is saved by name (a bool array)."""
    return np.array([by_name(k) for k in kernels] or [False])


def named_records(manifest: dict) -> bool:
    """Whether a packed manifest holds records of kernels saved by name (entries with no
    module and a ``"block"``)."""
    return "bulk" in manifest and any(by_name(k) and "block" in k
                                      for k in manifest.get("kernels", ()))


def version_of(manifest: dict, usual: tuple) -> tuple:
    """The format a packed manifest is written in: :data:`BY_NAME_VERSION` when it holds
    records of kernels saved by name (:func:`named_records`), else ``usual``."""
    return BY_NAME_VERSION if named_records(manifest) else usual


def pack(manifest: dict, sections: list, kernels: dict) -> tuple:
    """``(manifest, sections)`` with the kernel nodes that can be records moved into the
    binary sections (see the module); ``kernels``: the Kernel of each kernel index
    pycudagraph compiled. Manifests with none are returned as they are."""
    p = _Packer(manifest, kernels)
    p.graph(manifest["root"])
    if not p.recs:
        return manifest, sections
    recs = np.array([tuple([r[0], r[1:4], r[4:7], *r[7:]]) for r in p.recs], RECORD)
    relocs = np.array(p.relocs, RELOC) if p.relocs else np.zeros(0, RELOC)
    sections = list(sections)
    bulk = {}
    for key, data in (("records", recs.tobytes()), ("args", bytes(p.args)),
                      ("deps", np.asarray(p.deps, "<u4").tobytes()),
                      ("relocs", relocs.tobytes())):
        sections.append((TAGS[key], data))
        bulk[key] = len(sections)
    manifest["bulk"] = bulk
    return manifest, sections


# check ---------------------------------------------------------------------------------

def _array(c, data: bytes, dtype, what: str) -> np.ndarray:
    if len(data) % dtype.itemsize:
        c.fail(("bulk.", what), f"the section is {len(data)} bytes, not a whole number of "
                                f"{dtype.itemsize}-byte entries: truncated or corrupt")
    return np.frombuffer(data, dtype)


def _records_pass(r, args, d, rel, blocks, kernels: int, names: list, sizes) -> bool:
    """Whether every record and relocation passes the checks of :func:`check_sections`,
    in a few whole-array tests (one int64 copy of each table). True only when none of
    those checks would fail; False sends the sections through them, which name what is
    wrong. No CUDA call."""
    n = len(r)
    if not n:
        return not len(rel)
    w = np.ascontiguousarray(r.view("<u4").reshape(n, 12).T, np.int64)  # a row per field
    k, length = w[0], w[9]
    if k.max() >= kernels:
        return False
    if not ((length == blocks[k]).all() and (w[8] + length).max() <= len(args)
            and w[1:7].min() >= 1 and (w[1:8] <= _HIGHEST).all()
            and (w[4] * w[5] * w[6]).max() <= 1024
            and (w[10] + w[11]).max() <= len(d)):
        return False
    if not len(rel):
        return True
    ri, at, kind, target = np.ascontiguousarray(rel.view("<u4").reshape(len(rel), 6)[:, :4].T,
                                                np.int64)
    if not (ri.max() < n and kind.max() <= 1 and (at + 8 <= length[ri]).all()):
        return False
    if not (np.diff((ri << 32) | at) >= 8).all():  # in order, none overlapping
        return False
    if kind.any():  # allocations among them: the slot addresses alone
        slot = kind == 0
        target, offset = target[slot], rel["offset"][slot]
    else:
        offset = rel["offset"]
    if not len(target):
        return True
    if target.max() >= len(names):
        return False
    size = sizes[target]
    return bool(size.min() >= 0 and (offset <= size.astype(np.uint64)).all())


def records_pass(r, args, d, rel, blocks, kernels: int, names: list, sizes) -> bool:
    """:func:`_records_pass`, in one pass in compiled code where the extension is built
    (``_native.records_pass``, the same checks entry by entry), else with whole-array
    steps. No CUDA call."""
    if fast.records_pass is None:
        return _records_pass(r, args, d, rel, blocks, kernels, names, sizes)
    return fast.records_pass(r, len(args), len(d), rel, blocks, kernels, sizes, len(names))


def check_sections(c, bulk, sections) -> tuple:
    """Check the binary sections the manifest's ``bulk`` names; ``(records, args, deps,
    relocs)`` as arrays. ``c``: the manifest's checker (its kernels and slots checked).
    A quick pass over the whole tables (:func:`_records_pass`) takes valid sections; any
    doubt runs the checks one by one, which name the first record or relocation wrong."""
    c.obj(bulk, "bulk", tuple(TAGS))
    data = {key: sections[c.section(bulk[key], ("bulk.", key), tag)][1]
            for key, tag in TAGS.items()}
    r = _array(c, data["records"], RECORD, "records")
    d = _array(c, data["deps"], np.dtype("<u4"), "deps")
    rel = _array(c, data["relocs"], RELOC, "relocs")
    args = np.frombuffer(data["args"], np.uint8)
    blocks = np.array([k.get("block", -1) for k in c.manifest_kernels] or [0], np.int64)
    names = sorted(c.slots)
    sizes = np.array([c.memory.get(n, -1) for n in names] or [0], np.int64)
    if not records_pass(r, args, d, rel, blocks, len(c.manifest_kernels), names, sizes):
        _name_first_wrong(c, r, args, d, rel, blocks, names, sizes)
    return r, args, d, rel


def _name_first_wrong(c, r, args, d, rel, blocks, names: list, sizes) -> None:
    """Each check of the records and relocations in turn; the first that fails raises,
    naming the record or relocation and what is wrong."""

    def first(bad, what) -> None:
        if len(bad) and bad.any():
            i = int(np.argmax(bad))
            c.fail(("bulk.records[", i, "]"), what(i))

    k = r["kernel"].astype(np.int64)
    first(k >= len(c.manifest_kernels), lambda i: f"kernel {k[i]} is not in the file's "
                                                  f"{len(c.manifest_kernels)} kernels")
    first(blocks[np.minimum(k, len(blocks) - 1)] < 0,
          lambda i: f"kernel {k[i]} has no argument block length")
    off, length = r["arg_offset"].astype(np.int64), r["arg_length"].astype(np.int64)
    first(off + length > len(args), lambda i: f"its arguments (bytes {off[i]}..{off[i] + length[i]}"
                                              f") run past the {len(args)} argument bytes")
    want = blocks[np.minimum(k, len(blocks) - 1)]
    first(length != want, lambda i: f"{length[i]} argument bytes; its kernel's take {want[i]}")
    g, b = r["grid"].astype(np.int64), r["block"].astype(np.int64)
    first(((g < 1) | (g > _GRID)).any(axis=1), lambda i: f"grid {g[i].tolist()} is outside [1, {_GRID}]")
    first((b < 1).any(axis=1) | (b > 1024).any(axis=1) | (b.prod(axis=1) > 1024),
          lambda i: f"block {b[i].tolist()} is not 1 to 1024 threads")
    first(r["shared_mem"] > _SHARED, lambda i: f"shared memory {r['shared_mem'][i]} is over {_SHARED}")
    df, dc = r["dep_first"].astype(np.int64), r["dep_count"].astype(np.int64)
    first(df + dc > len(d), lambda i: f"dependencies {df[i]}..{df[i] + dc[i]} run past the "
                                      f"{len(d)} in the deps section")
    if len(rel):
        ri = rel["record"].astype(np.int64)
        at = rel["at"].astype(np.int64)

        def bad_rel(bad, what) -> None:
            if bad.any():
                i = int(np.argmax(bad))
                c.fail(("bulk.relocs[", i, "]"), what(i))
        bad_rel(ri >= len(r), lambda i: f"record {ri[i]} is not one of the {len(r)} records")
        order = np.zeros(len(rel), bool)
        order[1:] = (ri[1:] < ri[:-1]) | ((ri[1:] == ri[:-1]) & (at[1:] < at[:-1] + 8))
        bad_rel(order, lambda i: "out of order or overlapping the one before")
        bad_rel(at + 8 > length[ri], lambda i: f"byte {at[i]} is not inside the record's "
                                               f"{length[ri[i]]} argument bytes")
        kind = rel["kind"]
        bad_rel(kind > 1, lambda i: f"kind {kind[i]} is not 0 (slot) or 1 (allocation)")
        tgt = rel["target"].astype(np.int64)
        slot = kind == 0
        bad_rel(slot & (tgt >= len(names)), lambda i: f"slot {tgt[i]} is not one of the "
                                                      f"{len(names)} slots")
        size = sizes[np.where(slot, np.minimum(tgt, len(sizes) - 1), 0)]
        bad_rel(slot & (size < 0), lambda i: f"slot {names[tgt[i]]!r} is an event, not memory")
        bad_rel(slot & (rel["offset"] > np.maximum(size, 0).astype(np.uint64)),
                lambda i: f"offset {rel['offset'][i]} is past the end of slot {names[tgt[i]]!r}")


def check_run(c, n, where, nid: int, state) -> int:
    """Check a run entry ``n`` (its first node's id ``nid``): the next records, in order;
    its allocation addresses to allocations made before it. Its kernels and dependencies
    are checked with every other run's when the walk is done (:func:`check_runs`).
    Returns how many nodes it stands for."""
    c.obj(n, where, ("id", "type", "count", "first"))
    if state is None:
        c.fail(where, "a kernel run, but the manifest has no bulk sections")
    r, _, d, rel = state.arrays
    count = c.int_(n["count"], (where, ".count"), 1, c.MAX_NODES)
    first = c.int_(n["first"], (where, ".first"), state.next, state.next)
    if first + count > len(r):
        c.fail(where, f"records {first}..{first + count} run past the {len(r)} records")
    state.next = first + count
    state.runs.append((first, count, where, nid))
    if state.allocated:  # (relocations into allocations: rare; what is made before counts)
        lo, hi = np.searchsorted(rel["record"], [first, first + count])
        part = rel[lo:hi]
        for e in part[part["kind"] == 1]:
            a, off = int(e["target"]), int(e["offset"])
            if a not in c.allocs or off > c.allocs[a]:
                c.fail(where, f"record {int(e['record'])} points into allocation {a} at offset "
                              f"{off}, which no earlier mem_alloc node makes")
    return count


def check_runs(c, state) -> None:
    """Every run :func:`check_run` saw (they cover the records in order), in whole-array
    steps: none mixes kernels saved by name with kernels pycudagraph compiled, and every
    dependency of a record is an earlier position of its run. The first run wrong is
    named, and the node."""
    r, _, d, _ = state.arrays
    if not state.runs:
        return
    firsts = np.array([run[0] for run in state.runs], np.int64)
    counts = np.array([run[1] for run in state.runs], np.int64)
    named = state.named[r["kernel"].astype(np.int64)].astype(np.int64)
    by_name = np.add.reduceat(named, firsts)
    mixed = (by_name > 0) & (by_name < counts)
    if mixed.any():
        c.fail(state.runs[int(np.argmax(mixed))][2],
               "a run mixes kernels saved by name with kernels pycudagraph compiled")
    dc = r["dep_count"].astype(np.int64)
    total = int(dc.sum())
    if not total:
        return
    position = np.arange(len(r)) - np.repeat(firsts, counts)  # each record's place in its run
    owner = np.repeat(position, dc)
    at = np.repeat(r["dep_first"].astype(np.int64) - (np.cumsum(dc) - dc), dc) + np.arange(total)
    late = d[at] >= owner
    if late.any():
        j = int(np.argmax(late))
        record = int(np.repeat(np.arange(len(r)), dc)[j])
        _, _, where, nid = state.runs[int(np.searchsorted(firsts, record, "right")) - 1]
        c.fail(where, f"node {nid + owner[j]} depends on position {d[at[j]]} of its run, "
                      "which is not before it")


class Runs:
    """A loader's view of the records: :meth:`run` gives a run's records and the argument
    bytes with its addresses written in."""

    def __init__(self, arrays, slot_names: list):
        self.r, args, self.d, self.rel = arrays
        self.args = np.array(args)  # a writable copy, written run by run
        self.names = slot_names
        # each relocation's place in the argument bytes: an 8-byte word at any byte (a
        # view with a stride of one byte), written in one step per run
        rel = self.rel
        self.pos = (self.r["arg_offset"][rel["record"]].astype(np.int64)
                    + rel["at"].astype(np.int64)) if len(rel) else None
        self.words = (np.ndarray((max(len(self.args) - 7, 0),), "<u8", self.args, 0, (1,))
                      if len(rel) else None)
        # a file whose relocations all point into slots (none into a graph allocation, made
        # as its node is added) has them all written at the first run, in one step
        self.slot_only = bool(len(rel)) and bool((rel["kind"] == 0).all())
        self.slot_objects: dict | None = None  # then: every bound object they point into

    def run(self, first: int, count: int, bound: dict, allocs: dict, kept: dict) -> tuple:
        """``(records, argument bytes, deps)`` of records ``first`` ... ``first + count - 1``;
        the bound buffers their slot addresses point into are added to ``kept`` (for a file
        whose relocations all point into slots, those of every run: a graph keeps what the
        file's runs point into)."""
        rel = self.rel
        if self.slot_only:
            if self.slot_objects is None:
                self.slot_objects = {}
                target = rel["target"].astype(np.int64)
                base = self._slot_bases(target, bound, self.slot_objects)
                self.words[self.pos] = base[target] + rel["offset"]
            kept.update(self.slot_objects)
        elif len(rel):
            lo, hi = np.searchsorted(rel["record"], (first, first + count)).tolist()
            if hi > lo:
                part = rel[lo:hi]
                target = part["target"].astype(np.int64)
                slot = part["kind"] == 0
                allocated = not slot.all()
                slot_base = self._slot_bases(target[slot] if allocated else target, bound, kept)
                if allocated:
                    made = set(target[~slot].tolist())
                    alloc_base = np.zeros(max(made) + 1, np.uint64)
                    for t in made:
                        alloc_base[t] = allocs[t][0]
                    base = np.where(slot, slot_base[np.where(slot, target, 0)],
                                    alloc_base[np.where(slot, 0, target)])
                else:
                    base = slot_base[target]
                self.words[self.pos[lo:hi]] = base + part["offset"]
        return self.r[first:first + count], self.args, self.d

    def _slot_bases(self, used, bound: dict, kept: dict):
        """Per slot index, the address of the buffer bound to it, for the slots ``used``
        names (the rest 0); the bound objects among them are added to ``kept``."""
        base = np.zeros(len(self.names) or 1, np.uint64)
        for t in np.flatnonzero(np.bincount(used)).tolist():  # (bincount: no sort)
            b = bound[self.names[t]]
            base[t] = b.addr
            if b.obj is not None:
                kept[id(b.obj)] = b.obj
        return base
