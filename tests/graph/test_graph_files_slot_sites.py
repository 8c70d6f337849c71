"""Where a loaded graph file's relocations put a slot's addresses
(pycudagraph/files/slot_sites.py), on the CPU: the nodes of kernels saved by name, the
argument and byte of each relocation into the slots asked for, and the nodes left to a
search (a relocation across two arguments, a record of a kernel compiled here)."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pycudagraph._cuda.bulk import RECORD, spans as bulk_spans
from pycudagraph.nodes.arg_slots import arg_sites
from pycudagraph.files.bulk_format import RELOC, Runs
from pycudagraph.files.slot_sites import FileSites, file_sites
from pycudagraph.nodes.facets import Site

SLOTS = ["input:0", "input:1", "w"]  # sorted: the relocations' slot indices
BASE = {"input:0": 0x7F00_0000_0000, "input:1": 0x7F00_1000_0000, "w": 0x7F00_2000_0000}
ENTRIES = [{"name": "_Z1fPfiS_", "sizes": [8, 4, 24]},   # kernel 0, saved by name
           {"name": "_Z1gPfi", "sizes": [4, 8]},         # kernel 1, saved by name
           {"name": "mine", "sizes": [8]}]               # kernel 2, compiled here


def runs(kernels, relocs):
    return runs_of(ENTRIES, kernels, relocs)


def bound():
    return {name: SimpleNamespace(addr=addr, obj=None) for name, addr in BASE.items()}


def test_each_relocation_into_an_asked_slot_is_a_site_of_its_node():
    r = runs([0, 0, 2], [(0, 0, 0, 0, 16),    # record 0, arg 0: input:0 + 16
                         (0, 12, 0, 2, 0),    # record 0, arg 2 +0: w (not asked)
                         (1, 20, 0, 1, 8),    # record 1, arg 2 +8: input:1 + 8
                         (2, 0, 0, 0, 0)])    # record 2: a kernel compiled here
    a, b, c = object(), object(), object()
    got = file_sites(r, ENTRIES, [(0, [a, b])], bound(), ["input:0", "input:1"])
    assert got.accounted == {id(a), id(b)}  # c is not of a run of kernels saved by name
    assert got.sites == {id(a): [Site("arg 0", 0, BASE["input:0"] + 16, arg=0)],
                         id(b): [Site("arg 2 +8", 8, BASE["input:1"] + 8, arg=2)]}


def test_a_node_with_no_relocation_into_the_slots_is_accounted_with_no_site():
    r = runs([0], [(0, 12, 0, 2, 0)])
    a = object()
    got = file_sites(r, ENTRIES, [(0, [a])], bound(), ["input:0"])
    assert got.accounted == {id(a)} and got.sites == {}


def test_a_relocation_across_two_arguments_leaves_its_node_to_a_search():
    r = runs([1, 1], [(0, 0, 0, 0, 0),    # bytes 0..8 of [4, 8]: across args 0 and 1
                      (1, 4, 0, 0, 0)])   # arg 1 whole: a site
    a, b = object(), object()
    got = file_sites(r, ENTRIES, [(0, [a, b])], bound(), ["input:0"])
    assert got.accounted == {id(b)}
    assert got.sites == {id(b): [Site("arg 1", 0, BASE["input:0"], arg=1)]}


def test_no_relocations_or_no_slot_asked():
    a = object()
    assert file_sites(runs([0], []), ENTRIES, [(0, [a])], bound(), ["input:0"]) == \
        FileSites({id(a)}, {})
    r = runs([0], [(0, 0, 0, 0, 0)])
    assert file_sites(r, ENTRIES, [(0, [a])], bound(), []) == FileSites({id(a)}, {})


SIZES = [8, 16, 24]  # kernel 3: every 8-byte slot of its arguments is 8-byte aligned
OFFSETS = [0, 8, 24]  # each argument's place in the parameter buffer


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 5),
                                   st.sampled_from([0, 1, 2]), st.integers(0, 4096 // 8)),
                         max_size=12))))
def test_the_file_sites_are_what_a_search_of_the_written_bytes_finds(case):
    """Relocations at 8-byte slots of random records, into the input slots and a weight's:
    the sites made from them are the input-range sites a search of the bytes the loader
    writes finds (``arg_sites``), node by node."""
    n, picks = case
    entries = ENTRIES + [{"name": "_Z1hPfS_S_", "sizes": SIZES}]
    seen, relocs = set(), []
    for rec, slot, target, words in picks:
        if (rec, slot) not in seen:
            seen.add((rec, slot))
            relocs.append((rec, 8 * slot, 0, target, 8 * words))
    relocs.sort()
    r = runs_of(entries, [3] * n, relocs)
    nodes = [object() for _ in range(n)]
    b = bound()
    got = file_sites(r, entries, [(0, nodes)], b, ["input:0", "input:1"])
    recs, args, _ = r.run(0, n, b, {}, {})
    inputs = [(BASE[s], BASE[s] + 4096 + 8) for s in ("input:0", "input:1")]
    for i, node in enumerate(nodes):
        off = int(recs["arg_offset"][i])
        block = bytes(args[off:off + sum(SIZES)])
        spans = [(j, OFFSETS[j], block[a:z]) for j, (a, z) in enumerate(bulk_spans(SIZES))]
        searched = [s for s in arg_sites(spans) if any(lo <= s.address < hi for lo, hi in inputs)]
        assert sorted(got.sites.get(id(node), []), key=lambda s: (s.arg, s.offset)) == searched
    assert got.accounted == {id(x) for x in nodes}


def runs_of(entries, kernels, relocs):
    recs = np.zeros(len(kernels), RECORD)
    recs["kernel"] = kernels
    at = 0
    for i, k in enumerate(kernels):
        n = sum(entries[k]["sizes"])
        recs["arg_offset"][i], recs["arg_length"][i] = at, n
        at += n
    rel = np.array(relocs, RELOC) if relocs else np.zeros(0, RELOC)
    return Runs((recs, np.zeros(at, np.uint8), np.zeros(0, "<u4"), rel), SLOTS)
