"""Where a loaded graph file wrote the addresses of some of its slots, read from its
relocations instead of searched for in the nodes it built.

A graph file's kernels saved by name (a library's, captured) are binary records whose
argument bytes hold no address of their own: every address the saving process's graph
held in a slot is a relocation (record, byte, slot, offset), written in by the loader
(:class:`.bulk_format.Runs`). So for the nodes of those records the relocations are every
place a slot's address sits. :func:`file_sites` turns the relocations into the nodes'
:class:`~pycudagraph.nodes.facets.Site` values, as
:meth:`~pycudagraph.nodes.base.Node.sites` would give them
(:func:`~pycudagraph.nodes.arg_slots.arg_site`: the argument, the byte inside it, the
address): a rebind plan then knows those
nodes with no look at their bytes, and never takes a byte pattern that only happens to lie
inside a slot's range for its address. No CUDA call in this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._cuda.bulk import spans
from ..nodes.arg_slots import arg_site

__all__ = ["FileSites", "file_sites"]


@dataclass
class FileSites:
    """The nodes of a loaded graph whose addresses its file's relocations give.

    Attributes
    ----------
    accounted : set of int
        ``id()`` of each node built from a record of a kernel saved by name: every address
        such a node holds is a relocation of the file (none is left in its bytes).
    sites : dict
        ``id(node)`` -> the :class:`~pycudagraph.nodes.facets.Site` of each relocation of
        that node into one of the slots asked for, for the nodes of :attr:`accounted`.
    """

    accounted: set = field(default_factory=set)
    sites: dict = field(default_factory=dict)


def file_sites(runs, entries: list, named_runs: list, bound: dict, slots) -> FileSites:
    """Where the relocations into ``slots`` (slot names) sit in the nodes built from records
    of kernels saved by name.

    Parameters
    ----------
    runs : Runs
        The loader's records and relocations (:class:`.bulk_format.Runs`).
    entries : list of dict
        The manifest's kernel entries (their ``"sizes"``: each argument's bytes).
    named_runs : list of (int, list)
        Per run of such records, its first record's index and the nodes built from them, in
        order.
    bound : dict
        Slot name -> what the slot was bound to (its ``addr``).
    slots : iterable of str
        The slots whose sites are wanted.
    """
    out = FileSites()
    node_of: dict = {}
    for first, made in named_runs:
        for j, node in enumerate(made):
            node_of[first + j] = node
            out.accounted.add(id(node))
    asked = set(slots)
    wanted = [i for i, name in enumerate(runs.names) if name in asked]
    rel = runs.rel
    if not node_of or not wanted or not len(rel):
        return out
    rows = rel[(rel["kind"] == 0) & np.isin(rel["target"], wanted)]
    kernels = runs.r["kernel"]
    cuts: dict = {}
    for r, at, target, offset in zip(rows["record"].tolist(), rows["at"].tolist(),
                                     rows["target"].tolist(), rows["offset"].tolist()):
        node = node_of.get(r)
        if node is None:  # a record of a kernel compiled here: its node is searched as any
            continue
        k = int(kernels[r])
        cut = cuts.get(k)
        if cut is None:
            cut = cuts[k] = spans(entries[k]["sizes"])
        arg = next((i for i, (a, b) in enumerate(cut) if a <= at and at + 8 <= b), None)
        if arg is None:  # across two arguments: the node is looked at, not trusted
            out.accounted.discard(id(node))
            out.sites.pop(id(node), None)
            continue
        if id(node) not in out.accounted:
            continue
        a, b = cut[arg]
        out.sites.setdefault(id(node), []).append(
            arg_site(arg, at - a, bound[runs.names[target]].addr + offset, b - a <= 8))
    return out
