"""``python -m pycudagraph info PATH``: what a graph file (``Graph.save``) or a saved graphed
callable (``f.save``, a folder) holds, read and checked as a load checks it, with no GPU and
no CUDA call: nothing in the file is run, no kernel is loaded, no memory is allocated.

For a graph file: its format, writer and architecture, its nodes by type (kernel nodes
split into those compiled from the file's modules and those saved by name, found in a
library when loaded), its kernels most used first (with what a library kernel's name says
it computes), its modules and its slots (what ``pcg.load(bind=...)`` must give).

For a saved callable: where it was saved (the GPU, its architecture, the frameworks'
versions), each key (its file, input arrays, nodes and library kernels; every file of the
size and SHA-256 the index says and checked whole), the bindings the loading process binds
by name, the capture pools and workspaces it makes anew, and the library kernels it must
find by name.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from ..compile.cxx_names import mangled_operation, short_kernel_name
from ..errors import GraphFileError
from ..files import archive
from ..files.bulk_format import RUN, named_kernels
from ..files.schema import record_classes
from ..frameworks.graphed_index import INDEX, check_key_files, read_index, slot_kind
from ..frameworks.graphed_templates import describe_key
from ..inspect.page_model import short_bytes

__all__ = ["describe_path", "describe_graph_file", "describe_saved"]

_LISTED = 12  # slots or keys listed one per line; the rest are counted


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def node_counts(manifest: dict, record_kernels=None) -> tuple[Counter, int]:
    """``(nodes by type, graphs nested in nodes)`` of a checked manifest, the nodes of every
    nested graph (each node class's ``record_graphs``) counted too. A run of binary kernel
    records counts as that many nodes (``record_kernels``: each record's kernel index, from
    the file's records section): ``kernel`` (a kernel of the file's modules) or ``library
    kernel`` (saved by name). No CUDA call."""
    kinds, nested = Counter(), 0
    named, classes = named_kernels(manifest["kernels"]), record_classes()
    stack = [manifest["root"]]
    while stack:
        g = stack.pop()
        for nd in g["nodes"]:
            if nd["type"] == RUN:
                ks = record_kernels[nd["first"]:nd["first"] + nd["count"]]
                by_name_here = int(named[ks.astype(np.int64)].sum())
                kinds["library kernel"] += by_name_here
                kinds["kernel"] += len(ks) - by_name_here
                continue
            kinds[nd["type"]] += 1
            inner = classes[nd["type"]].record_graphs(nd)  # a child graph's, a conditional's
            nested += len(inner)
            stack.extend(inner)
    return +kinds, nested  # (+: no zero counts)


def _graph_summary(gf) -> tuple[Counter, int]:
    return node_counts(gf.manifest, gf.bulk[0]["kernel"] if gf.bulk is not None else None)


def describe_graph_file(path) -> str:
    """What the graph file at ``path`` holds (see the module docstring). Raises
    :class:`~pycudagraph.GraphFileError` for a file a load refuses. No CUDA call."""
    p = Path(path)
    gf = archive.read_file(p)
    m = gf.manifest
    kinds, nested = _graph_summary(gf)
    named = int(named_kernels(m["kernels"]).sum())
    own = len(m["kernels"]) - named
    lines = [f"graph file: {p} ({short_bytes(p.stat().st_size)}, format "
             f"{gf.version[0]}.{gf.version[1]}, written by {m['writer'] or 'an unnamed writer'} "
             f"for {m['arch'] or 'no architecture'})",
             f"  nodes: {sum(kinds.values())} ({_counts(kinds) or 'none'})"
             + (f"; {nested} graph(s) nested in nodes" if nested else ""),
             f"  kernels: {len(m['kernels'])} ({_kernel_origins(own, named)})"]
    lines.extend(_kernel_uses(gf))
    for mod in m["modules"]:
        has = [t for t, i in (("CUBIN", mod["cubin"]), ("PTX", mod["ptx"])) if i is not None]
        lines.append(f"  module {mod['name']!r} ({mod['arch'] or 'any architecture'}): "
                     f"{' and '.join(has)}")
    lines.extend(_slots(m["slots"]))
    lines.append("  checked as a load checks it (header, SHA-256, manifest, records); nothing "
                 "was run")
    return "\n".join(lines)


_KERNELS_LISTED = 8


def _kernel_uses(gf) -> list[str]:
    """Lines for the kernels of a file's binary records, most records first: each by its
    readable name, with what a library kernel's name says it computes. No lines for a
    file with no binary records (format 1: every node a JSON record)."""
    if gf.bulk is None or not len(gf.bulk[0]):
        return []
    kernels = gf.manifest["kernels"]
    uses = Counter(gf.bulk[0]["kernel"].tolist())
    out = []
    for k, n in uses.most_common(_KERNELS_LISTED):
        name = kernels[k]["name"]
        operation = mangled_operation(name)
        out.append(f"    {short_kernel_name(name)}{f' ({operation})' if operation else ''}: "
                   f"{n} node(s)")
    if len(uses) > _KERNELS_LISTED:
        out.append(f"    ... {len(uses) - _KERNELS_LISTED} more")
    return out


def _kernel_origins(own: int, named: int) -> str:
    parts = [f"{own} from the file's modules"] if own else []
    if named:
        parts.append(f"{named} saved by name, found in a library when loaded")
    return ", ".join(parts) or "none"


def _slots(slots: dict) -> list[str]:
    """Lines for a file's slots: their count and bytes by kind, then the first few."""
    if not slots:
        return ["  slots: none (pcg.load needs no bind=)"]
    kinds = Counter(s["kind"] for s in slots.values())
    memory = sum(s["nbytes"] for s in slots.values())
    out = [f"  slots: {len(slots)} ({_counts(kinds)}; {short_bytes(memory)}), each bound by "
           "pcg.load(bind={name: buffer})"]
    for name, s in list(slots.items())[:_LISTED]:
        out.append(f"    {name}  {s['kind']}  {short_bytes(s['nbytes'])}")
    if len(slots) > _LISTED:
        out.append(f"    ... {len(slots) - _LISTED} more")
    return out


def describe_saved(folder) -> str:
    """What the saved graphed callable in ``folder`` holds (see the module docstring).
    Raises :class:`~pycudagraph.GraphFileError` for a folder ``load_graphed`` refuses
    before it makes anything. No CUDA call."""
    ix = read_index(folder)
    data = check_key_files(ix, Path(folder))
    keys = ix["keys"]
    versions = ", ".join(f"{k} {v}" for k, v in ix["versions"].items() if v) or "no framework"
    lines = [f"saved graphed callable: {folder} (format {ix['format']} "
             f"{ix['version'][0]}.{ix['version'][1]}, written by {ix['writer']})",
             f"  saved from: {ix['function']} on {ix['gpu']} ({ix['arch']}); {versions}",
             f"  keys: {len(keys)}, {short_bytes(sum(len(b) for b in data.values()))} of graph "
             "files, each of the size and SHA-256 the index says and checked whole"]
    for i, rec in enumerate(keys):  # every file checked whole, the first few listed
        kinds, _ = _graph_summary(archive.decode(data[rec["file"]],
                                                 str(Path(folder) / rec["file"])))
        if i < _LISTED:
            lines.append(f"    {describe_key(rec)}: {sum(kinds.values())} nodes, "
                         f"{len(rec['kernels'])} library kernel(s)")
    if len(keys) > _LISTED:
        lines.append(f"    ... {len(keys) - _LISTED} more")
    b = ix["bindings"]
    kinds = Counter(slot_kind(name)[1].split(":", 1)[0] for name in b)
    lines.append(f"  bindings: {len(b)} ({_counts(kinds) or 'none'}; "
                 f"{short_bytes(sum(x['nbytes'] for x in b.values()))}), bound by name when loaded")
    for p, pool in enumerate(ix["pools"]):
        lines.append(f"  pool {p} ({pool['framework']}): {short_bytes(sum(pool['segments']))} in "
                     f"{len(pool['segments'])} segment(s), one allocation made when loaded")
    if ix["workspaces"]:
        lines.append(f"  workspaces: {len(ix['workspaces'])} "
                     f"({short_bytes(sum(ix['workspaces']))}), made anew, zeroed")
    names = set().union(*(rec["kernels"] for rec in keys)) if keys else set()
    sets = {frozenset(rec["kernels"]) for rec in keys if rec["kernels"]}
    lines.append(f"  library kernels to find by name when loaded: {len(names)} "
                 f"({len(sets)} distinct set(s) among the keys)")
    if keys:
        lines.append(f"  the page of a key: python -m pycudagraph show "
                     f"{Path(folder) / keys[0]['file']}")
    return "\n".join(lines)


def describe_path(path) -> str:
    """:func:`describe_saved` for a folder, :func:`describe_graph_file` for a file."""
    p = Path(path)
    if p.is_dir():
        if not (p / INDEX).is_file():
            raise GraphFileError(f"{p}: a folder with no {INDEX}: not a saved graphed callable "
                                 "(f.save writes one); info takes a graph file or such a folder")
        return describe_saved(p)
    if not p.exists():
        raise GraphFileError(f"{p}: no such file or folder")
    return describe_graph_file(p)
