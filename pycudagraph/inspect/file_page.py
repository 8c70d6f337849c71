"""The page's model of a graph file made from the file alone (``show FILE --model``): no GPU,
no CUDA call, nothing in the file run, no kernel loaded.

The model is the one :func:`~pycudagraph.inspect.page_model.graph_model` makes of a graph
in memory (:mod:`pycudagraph.inspect.page_model`), with the node paths a load of the file
would give (``3``, ``3/body/1``: each body named by its record's class,
``record_graph_names``). What a page made this way shows of each node is what
the file holds: a kernel node's name (saved by name or from which module), grid, block,
shared memory and each argument's bytes with the slot an address in them points into
(``slot x + 0x100``); another node's fields and the slots its addresses point into. It has
no times and no findings (nothing ran); its addresses are slots, not numbers.
"""

from __future__ import annotations

from ..compile.cxx_names import short_kernel_name
from ..files.bulk_format import RUN, by_name
from ..files.schema import record_classes
from ..nodes.file_records import record_text
from .page_model import decode_bytes, node_entry, with_mangled_name

__all__ = ["file_model"]

_SHOWN = 64  # bytes of an argument block shown in hex


class _FileModel:
    """Builds the model graph by graph (see the module docstring)."""

    def __init__(self, gf, title: str):
        m = gf.manifest
        self.m, self.classes = m, record_classes()
        self.model = {"title": title, "root": "root", "graphs": {}, "nodes": {},
                      "profile": None, "findings": 0}
        self.recs = self.args = self.deps = None
        self.relocs: dict = {}  # record -> [(byte, reference text)]
        if gf.bulk is not None:
            self.recs, self.args, self.deps, rel = gf.bulk
            names = sorted(m["slots"])  # (a relocation's target: a slot by its sorted index)
            for r, at, kind, target, offset in rel.tolist():  # as a JSON record's reference
                ref = {"slot": names[target]} if kind == 0 else {"alloc": target}
                self.relocs.setdefault(r, []).append((at, record_text({**ref, "offset": offset})))

    def graph(self, gd: dict, gid: str, prefix: str) -> None:
        ids, edges = [], []
        for nd in gd["nodes"]:
            if nd["type"] == RUN:
                base = len(ids)
                for r in range(nd["first"], nd["first"] + nd["count"]):
                    nid = f"{prefix}{len(ids)}"
                    ids.append(nid)
                    self.model["nodes"][nid] = self.record_node(r, nid)
                    rec = self.recs[r]
                    first, count = int(rec["dep_first"]), int(rec["dep_count"])
                    for d in self.deps[first:first + count].tolist():  # inside the run
                        edges.append([ids[base + d], nid, "default"])
                continue
            nid = f"{prefix}{len(ids)}"
            ids.append(nid)
            entry = self.model["nodes"][nid] = self.json_node(nd, nid)
            cls = self.classes[nd["type"]]
            for name, body in zip(cls.record_graph_names(nd), cls.record_graphs(nd)):
                bid = f"{nid}/{name}"
                entry["bodies"].append({"name": name, "graph": bid})
                self.graph(body, bid, f"{bid}/")
        edges.extend([ids[a], ids[b], port] for a, b, port in gd["edges"])
        self.model["graphs"][gid] = {"nodes": ids, "edges": edges}

    def kernel_details(self, k: int, grid, block, shared: int) -> list:
        entry = self.m["kernels"][k]
        if by_name(entry):
            where = "saved by name: found in a library when loaded"
        else:
            where = f"module {self.m['modules'][entry['module']]['name']!r}"
        return [["kernel", where], ["grid", "(%d, %d, %d)" % tuple(grid)],
                ["block", "(%d, %d, %d)" % tuple(block)], ["shared_mem", f"{shared} B"]]

    def record_node(self, r: int, nid: str) -> dict:
        """A kernel node of the file's binary records."""
        rec = self.recs[r]
        k = int(rec["kernel"])
        entry = self.m["kernels"][k]
        lo, n = int(rec["arg_offset"]), int(rec["arg_length"])
        block = bytes(self.args[lo:lo + n])
        relocs = self.relocs.get(r, [])
        args = []
        if by_name(entry):  # its parameters' bytes one after another
            at = 0
            for i, size in enumerate(entry["sizes"]):
                data = block[at:at + size]
                refs = [text for b, text in relocs if at <= b < at + size]
                args.append([f"arg {i}", data.hex(), "; ".join(refs) or decode_bytes(data)])
                at += size
        else:  # laid out by its signature: the block, and where its addresses point
            args.append(["bytes", block[:_SHOWN].hex() + (" ..." if n > _SHOWN else ""),
                         f"{n} bytes"])
            args.extend([f"byte {b}", text, ""] for b, text in relocs)
        details = self.kernel_details(k, rec["grid"].tolist(), rec["block"].tolist(),
                                      int(rec["shared_mem"]))
        name = entry["name"]
        return with_mangled_name(node_entry("kernel", short_kernel_name(name), nid, details, args),
                                 name)

    def json_node(self, nd: dict, nid: str) -> dict:
        """A node of a JSON record, as its class shows it (``record_view``)."""
        label, details, args = self.classes[nd["type"]].record_view(nd, self.m["kernels"])
        args = [[a, hexed, note or decode_bytes(bytes.fromhex(hexed))] for a, hexed, note in args]
        return with_mangled_name(node_entry(nd["type"], short_kernel_name(label), nid, details,
                                            args), label)


def file_model(gf, title: str = "graph file") -> dict:
    """The page's model (:mod:`~pycudagraph.inspect.page_model`) of a checked graph file
    (:func:`pycudagraph.files.archive.read_file`), from the file alone. No CUDA call."""
    fm = _FileModel(gf, title)
    fm.graph(gf.manifest["root"], "root", "")
    return fm.model
