"""Graph files on the CPU: kernel nodes of kernels saved by name (a library's, found by a
resolver at load) as binary records, format 3. Packed into runs of one kind, read back
and checked; a format-2 header, a wrong block length and damaged records refused naming
what is wrong; and loaded node for node as their JSON records load (the builder recorded,
not called: building needs the driver's answers for a library function)."""

import copy
import struct

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.files import archive as files
from pycudagraph.files import bulk_format
from pycudagraph.files import load as file_load
from tests.graph.test_graph_files_bulk import CUBIN, chain_manifest, kernels
from tests.support.fakes import fake_buffer, fake_graph

NAMED = {"name": "_Z5scalePfi", "module": None, "signature": None, "sizes": [8, 4, 4]}


def named_manifest(nodes: int, every: int = 2) -> dict:
    """The chain of the bulk tests with its second kernel saved by name (and, with
    ``every=1``, every node launching it)."""
    m = chain_manifest(nodes, slot_offset=8)
    m["kernels"][1] = dict(NAMED)
    if every == 1:
        for i, n in enumerate(m["root"]["nodes"]):
            n["kernel"] = 1
            n["args"] = [{"hex": bytes(8).hex(), "relocs": [[0, {"slot": "y", "offset": 4 * i}]]},
                         {"hex": struct.pack("<f", 0.25 * i).hex(), "relocs": []},
                         {"hex": struct.pack("<i", i).hex(), "relocs": []}]
    return m


def packed(m):
    m, sections = bulk_format.pack(m, CUBIN, {0: kernels()[0]})
    return m, sections, bulk_format.version_of(m, files.VERSION)


def test_records_of_kernels_saved_by_name_make_runs_of_one_kind_in_format_3():
    m, sections, version = packed(named_manifest(6))
    assert [(n["type"], n["count"]) for n in m["root"]["nodes"]] == [("kernel_run", 1)] * 6
    assert [k["block"] for k in m["kernels"]] == [24, 16]  # 8 + 4 + 4: the sizes in a row
    assert version == bulk_format.BY_NAME_VERSION == (3, 0)
    gf = files.decode(files.encode(m, sections, version=version))
    r, args, _, rel = gf.bulk
    assert gf.version == (3, 0) and r["arg_length"].tolist() == [24, 16] * 3
    assert struct.unpack("<Qfi", args[24:40].tobytes()) == (0, 0.5, 1)  # node 1: y, a, n
    assert rel[2].tolist() == (1, 0, 0, 1, 12)  # its y at slot y + 8 + 4
    # one kind only: every node of the kernel saved by name is one run
    m, sections, version = packed(named_manifest(50, every=1))
    assert [(n["type"], n["count"]) for n in m["root"]["nodes"]] == [("kernel_run", 50)]
    assert m["root"]["edges"] == []
    files.decode(files.encode(m, sections, version=version))
    # a file without them stays format 2
    assert packed(chain_manifest(4))[2] == files.VERSION == (2, 0)


@pytest.mark.parametrize("edit, words", [
    (lambda m: None, "format 2.0 has no binary records of kernels saved by name"),
    (lambda m: m["kernels"][1].update(block=12),
     "kernels[1].block: 12 bytes for a kernel saved by name, whose parameters take 16"),
    (lambda m: m["kernels"][1].pop("block"), "has no argument block length"),
])
def test_named_records_that_do_not_fit_their_format_or_entry_are_refused(edit, words):
    m, sections, version = packed(named_manifest(6))
    edit(m)
    version = (2, 0) if "format 2.0" in words else version
    with pytest.raises(pcg.GraphFileError) as info:
        files.decode(files.encode(m, sections, version=version))
    assert words in str(info.value), str(info.value)


class _Recorder:
    """Stands for the kernel record class's ``build_function``: notes each call and
    returns a stand-in node."""

    def __init__(self):
        self.calls = []

    def __call__(self, table, deps, func, grid, block, shared, args, keep=()):
        node = object()
        self.calls.append((node, [id(d) for d in deps], func, tuple(grid), tuple(block),
                           shared, [bytes(a) for a in args]))
        return node


def _records_as_calls(rec):
    """Stands for the kernel record class's ``run_records``: each record of a run the
    loader adds as the ``build_function`` call it stands for, made to ``rec`` (the argument
    bytes, as they are when the run is added, cut by the sizes it is given)."""
    class Records:
        def __init__(self, funcs, sizes, recs, args, deps, names=None):
            self.funcs, self.sizes, self.recs, self.args, self.deps = funcs, sizes, recs, args, deps

        def add(self, table, first=0, count=None):
            made = []
            for r in self.recs[first:first + count]:
                k, at, parts = int(r["kernel"]), int(r["arg_offset"]), []
                for s in self.sizes[k]:
                    parts.append(bytes(self.args[at:at + s]))
                    at += s
                lo, n = int(r["dep_first"]), int(r["dep_count"])
                made.append(rec(table, [made[d] for d in self.deps[lo:lo + n].tolist()],
                                self.funcs[k], tuple(r["grid"].tolist()),
                                tuple(r["block"].tolist()), int(r["shared_mem"]), parts))
            return made
    return Records


def _built(m, sections, version, monkeypatch, bufs) -> list:
    rec = _Recorder()
    gf = files.decode(files.encode(m, sections, version=version))
    loader = file_load._Loader(gf, bufs, lambda name: 0x5000, "test")
    monkeypatch.setattr(loader.classes[bulk_format.RUN_RECORD], "build_function", rec)
    monkeypatch.setattr(loader.classes[bulk_format.RUN_RECORD], "run_records", _records_as_calls(rec))
    loader.use([0x4000, 0x5000])  # both functions found by name (ints), as a resolver gives
    loader.fill(fake_graph(), gf.manifest["root"])
    where = {id(c[0]): i for i, c in enumerate(rec.calls)}  # a node -> its position
    return [([where[d] for d in c[1]], *c[2:]) for c in rec.calls]


def test_named_records_load_node_for_node_as_their_json_records(monkeypatch):
    """The JSON records (format 1) and the binary ones (format 3) reach the builder with
    the same function, grid, block, shared memory, argument bytes (addresses relocated
    into the bound slots) and dependencies."""
    bufs = {s: fake_buffer(1 << 16) for s in "xy"}
    v1 = named_manifest(40, every=1)
    json_built = _built(copy.deepcopy(v1), CUBIN, (1, 0), monkeypatch, bufs)
    m, sections, version = packed(copy.deepcopy(v1))
    bin_built = _built(m, sections, version, monkeypatch, bufs)
    assert len(json_built) == len(bin_built) == 40
    assert bin_built == json_built
    deps, func, grid, block, shared, args = bin_built[3]
    assert deps == [2] and func == 0x5000 and grid == (4, 1, 1) and block == (128, 1, 1)
    assert args == [struct.pack("<Q", bufs["y"].ptr + 12), struct.pack("<f", 0.75),
                    struct.pack("<i", 3)]


def test_a_run_of_kernels_saved_by_name_needs_a_resolver():
    m, sections, version = packed(named_manifest(6))
    gf = files.decode(files.encode(m, sections, version=version))
    bufs = {s: fake_buffer(1 << 16) for s in "xy"}
    with pytest.raises(pcg.GraphFileError) as info:
        file_load._Loader(gf, bufs, None, "f.pcgraph").check_needs()
    assert ("kernel node(s) 1, 3, 5 run kernels pycudagraph did not compile (_Z5scalePfi): pass "
            "resolve=") in str(info.value), str(info.value)
    file_load._Loader(gf, bufs, lambda name: 1, "f.pcgraph").check_needs()  # with one: fine


def test_a_run_mixing_both_kinds_of_kernel_is_refused():
    m, sections, version = packed(named_manifest(6))
    nl = m["root"]["nodes"]
    m["root"]["nodes"] = [dict(nl[0], count=2)] + nl[2:]  # records 0 (compiled) and 1 (by name)
    with pytest.raises(pcg.GraphFileError) as info:
        files.decode(files.encode(m, sections, version=version))
    assert "root.nodes[0] (kernel_run): a run mixes kernels saved by name with kernels " \
           "pycudagraph compiled" in str(info.value), str(info.value)
