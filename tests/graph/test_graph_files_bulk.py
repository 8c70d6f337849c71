"""Graph files of format 2 on the CPU: kernel nodes as binary records (files/bulk_format.py).
A chain's manifest packed and read back; every kind of damage to the binary sections and
to the run entries refused with an error naming it; the records fuzzed (never a crash,
never a record that the bulk add would refuse after the file check accepted it); the
1,000-node chain loaded on the driver stub on both routes, node for node what the JSON
records of format 1 load to."""

import copy
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pycudagraph as pcg
from pycudagraph._cuda import fast
from pycudagraph._cuda.bulk import RECORD as RECORD_DTYPE, check_records, checked_records
from pycudagraph.files import archive as files
from pycudagraph.files import bulk_format
from tests.support.fakes import fake_kernel
from tests.support.native_driver import both, run

CHAIN = [("axpy", "float* y, const float* x, float a, int n", "yx"),
         ("scale", "float* y, float a, int n", "y")]
CUBIN = [("CUBN", b"\x7fELF" + bytes(64))]


def chain_manifest(nodes: int, slot_offset: int = 0) -> dict:
    """A format-1 manifest of a chain of the two kernels in turn (what Graph.save writes)."""
    def args(i):
        name, _, slots = CHAIN[i % 2]
        out = [{"hex": bytes(8).hex(), "relocs": [[0, {"slot": s, "offset": slot_offset + 4 * i}]]}
               for s in slots]
        out.append({"hex": struct.pack("<f", 0.5 * i).hex(), "relocs": []})
        return out + [{"hex": struct.pack("<i", i).hex(), "relocs": []}]
    kernels = [{"name": name, "module": 0, "signature": sig,
                "sizes": [8] * len(ptrs) + [4, 4]} for name, sig, ptrs in CHAIN]
    nl = [{"id": i, "type": "kernel", "kernel": i % 2, "grid": [4, 1, 1], "block": [128, 1, 1],
           "shared_mem": 0, "args": args(i)} for i in range(nodes)]
    return {"format": "pycudagraph.graph", "writer": "test", "arch": "sm_90",
            "slots": {s: {"kind": "device", "nbytes": 1 << 16} for s in "xy"},
            "modules": [{"name": "m.cu", "arch": "sm_90", "cubin": 1, "ptx": None}],
            "kernels": kernels,
            "root": {"handles": [], "nodes": nl,
                     "edges": [[i, i + 1, "default"] for i in range(nodes - 1)]}}


def kernels():
    return [fake_kernel(sig, name) for name, sig, _ in CHAIN]


def packed(nodes: int = 6):
    m, sections = bulk_format.pack(chain_manifest(nodes), CUBIN, dict(enumerate(kernels())))
    return m, sections


def arrays(m, sections) -> dict:
    return {key: np.frombuffer(sections[m["bulk"][key] - 1][1],
                               {"records": bulk_format.RECORD, "relocs": bulk_format.RELOC,
                                "deps": np.dtype("<u4"), "args": np.uint8}[key]).copy()
            for key in bulk_format.TAGS}


def encode(m, sections, a=None, version=files.VERSION) -> bytes:
    sections = list(sections)
    for key, arr in (a or {}).items():
        i = m["bulk"][key] - 1
        sections[i] = (sections[i][0], arr if isinstance(arr, bytes) else arr.tobytes())
    return files.encode(m, sections, version=version)


def refused(data, words):
    with pytest.raises(pcg.GraphFileError) as info:
        files.decode(data)
    assert words in str(info.value), str(info.value)


def test_a_chain_is_packed_into_one_run_of_records():
    m, sections = packed(1000)
    root = m["root"]
    assert root["nodes"] == [{"id": 0, "type": "kernel_run", "count": 1000, "first": 0}]
    assert root["edges"] == []  # every edge is a dependency inside the run
    assert [k["block"] for k in m["kernels"]] == [24, 16]  # y, x, a, n / y, a, n
    gf = files.decode(files.encode(m, sections))
    r, args, d, rel = gf.bulk
    assert gf.version == (2, 0) and len(r) == 1000 and len(rel) == 1500
    assert r["dep_count"].tolist() == [0] + [1] * 999
    assert d.tolist() == list(range(999))  # node i waits for position i - 1 of its run
    assert r["arg_length"].tolist() == [24, 16] * 500
    first = args[:24].tobytes()
    assert struct.unpack("<QQfi", first) == (0, 0, 0.0, 0)
    assert rel[:3].tolist() == [(0, 0, 0, 1, 0), (0, 8, 0, 0, 0), (1, 0, 0, 1, 4)]
    # a format-1 manifest is still written where no node can be a record, and read
    plain = chain_manifest(3)
    plain["kernels"][0]["module"] = plain["kernels"][1]["module"] = 0
    assert bulk_format.pack(copy.deepcopy(plain), CUBIN, {})[0] == plain


def test_a_file_of_records_and_json_nodes_keeps_edges_across_them():
    m = chain_manifest(5)
    nl = m["root"]["nodes"]
    nl[2] = {"id": 2, "type": "empty"}
    m["root"]["edges"].append([0, 4, "default"])
    m["root"]["edges"].sort()
    m, sections = bulk_format.pack(m, CUBIN, dict(enumerate(kernels())))
    assert [n["type"] for n in m["root"]["nodes"]] == ["kernel_run", "empty", "kernel_run"]
    assert m["root"]["edges"] == [[0, 4, "default"], [1, 2, "default"], [2, 3, "default"]]
    files.decode(files.encode(m, sections))


def test_kernels_of_no_signature_and_nodes_with_attributes_stay_json_records():
    m = chain_manifest(4)
    m["kernels"][1]["signature"] = None  # the loaded kernel's layout would come from the image
    m["root"]["nodes"][2]["attributes"] = {"priority": 1}
    m, sections = bulk_format.pack(m, CUBIN, dict(enumerate(kernels())))
    assert [n["type"] for n in m["root"]["nodes"]] == ["kernel_run", "kernel", "kernel", "kernel"]
    assert "block" not in m["kernels"][1]
    files.decode(files.encode(m, sections))


def _set(key, field, index, value):
    def edit(a):
        arr = a[key]
        if field is None:
            arr[index] = value
        else:
            arr[field][index] = value
    return edit


DAMAGE = [
    (_set("records", "kernel", 2, 7), "bulk.records[2]: kernel 7 is not in the file's 2 kernels"),
    (_set("records", "arg_length", 1, 20), "bulk.records[1]: 20 argument bytes; its kernel's take 16"),
    (_set("records", "arg_offset", 5, 1 << 20), "bulk.records[5]: its arguments (bytes"),
    (_set("records", "grid", 3, (0, 1, 1)), "bulk.records[3]: grid [0, 1, 1] is outside"),
    (_set("records", "block", 0, (64, 32, 1)), "bulk.records[0]: block [64, 32, 1] is not 1 to 1024"),
    # a product past 2**63 wraps in int64: each dimension is held to 1024 as well
    (_set("records", "block", 0, (1 << 31, 1 << 31, 4)),
     "bulk.records[0]: block [2147483648, 2147483648, 4] is not"),
    (_set("records", "shared_mem", 4, 1 << 30), "bulk.records[4]: shared memory"),
    (_set("records", "dep_first", 4, 99), "bulk.records[4]: dependencies 99..100 run past"),
    (_set("deps", None, 2, 3), "node 3 depends on position 3 of its run, which is not before it"),
    (_set("relocs", "record", 0, 6), "bulk.relocs[0]: record 6 is not one of the 6 records"),
    (_set("relocs", "record", 1, 2), "bulk.relocs[2]: out of order or overlapping"),
    (_set("relocs", "at", 1, 4), "bulk.relocs[1]: out of order or overlapping"),
    (_set("relocs", "at", 2, 12), "bulk.relocs[2]: byte 12 is not inside the record's 16"),
    (_set("relocs", "kind", 0, 2), "bulk.relocs[0]: kind 2 is not 0 (slot) or 1 (allocation)"),
    (_set("relocs", "target", 0, 5), "bulk.relocs[0]: slot 5 is not one of the 2 slots"),
    (_set("relocs", "offset", 0, (1 << 16) + 1), "offset 65537 is past the end of slot 'y'"),
    (_set("relocs", "kind", 0, 1), "points into allocation 1 at offset 0, which no earlier"),
]


@pytest.mark.parametrize("edit, words", DAMAGE, ids=[w[:40] for _, w in DAMAGE])
def test_damaged_records_are_refused_naming_what_is_wrong(edit, words):
    m, sections = packed()
    a = arrays(m, sections)
    edit(a)
    refused(encode(m, sections, a), words)


@pytest.mark.parametrize("key", list(bulk_format.TAGS))
def test_a_truncated_section_is_refused(key):
    m, sections = packed()
    a = arrays(m, sections)
    if key == "args":
        a[key] = a[key][:-8]
        refused(encode(m, sections, a), "run past the")
    else:
        a[key] = a[key].tobytes()[:-3]
        refused(encode(m, sections, a), f"bulk.{key}: the section is")


def test_a_dependency_not_before_its_node_is_named_in_a_later_run():
    """The runs' dependencies are checked together once the walk is done: the error still
    names the run entry and the node (a chain split into two runs: the second run's first
    record depends on position 2, which in its own run is not before it)."""
    m, sections = packed(6)
    m["root"]["nodes"] = [{"id": 0, "type": "kernel_run", "count": 3, "first": 0},
                          {"id": 3, "type": "kernel_run", "count": 3, "first": 3}]
    refused(files.encode(m, sections), "root.nodes[1] (kernel_run): node 3 depends on "
                                       "position 2 of its run, which is not before it")


def test_damaged_run_entries_and_bulk_names_are_refused():
    m, sections = packed()
    cases = [(lambda m: m["root"]["nodes"][0].update(first=1), "root.nodes[0] (kernel_run).first"),
             (lambda m: m["root"]["nodes"][0].update(count=7), "records 0..7 run past the 6"),
             (lambda m: m["root"]["nodes"][0].update(count=5), "records 5.. belong to no kernel run"),
             (lambda m: m["root"]["nodes"][0].update(count=0), ".count: 0 is outside"),
             (lambda m: m["root"]["nodes"][0].update(extra=1), "unknown field(s) extra"),
             (lambda m: m["bulk"].update(deps=1), "bulk.deps: section 1 is 'CUBN', not 'KDEP'"),
             (lambda m: m["bulk"].pop("relocs"), "bulk: missing relocs"),
             (lambda m: m["kernels"][1].update(block=12), "its kernel's take 12"),
             (lambda m: m["kernels"][1].update(block=-1), "kernels[1].block: -1 is outside"),
             (lambda m: m["kernels"][1].update(module=None, signature=None),
              "a run mixes kernels saved by name with kernels pycudagraph compiled"),
             (lambda m: m.pop("bulk"), "a kernel run, but the manifest has no bulk sections")]
    for edit, words in cases:
        m2 = copy.deepcopy(m)
        edit(m2)
        refused(files.encode(m2, sections), words)
    refused(encode(m, sections, version=(1, 0)), "format 1.0 has no binary kernel records")


def test_records_the_file_check_accepts_the_bulk_add_accepts():
    """The two checks agree on what they both check (the add checks again what it takes)."""
    m, sections = packed(8)
    gf = files.decode(files.encode(m, sections))
    r, args, d, _ = gf.bulk
    check_records(tuple(kernels()), r, args, d)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["records", "deps", "relocs", "args"]),
                          st.integers(0, 1 << 12), st.integers(0, 255)), min_size=1, max_size=6))
def test_fuzzed_records_are_refused_or_valid_never_a_crash(flips):
    m, sections = packed(6)
    a = arrays(m, sections)
    for key, at, byte in flips:
        raw = bytearray(a[key].tobytes())
        if raw:
            raw[at % len(raw)] = byte
        a[key] = np.frombuffer(bytes(raw), a[key].dtype).copy()
    try:
        gf = files.decode(encode(m, sections, a))
    except pcg.GraphFileError:
        return
    r, args, d, _ = gf.bulk
    for run in gf.manifest["root"]["nodes"]:
        part = r[run["first"]:run["first"] + run["count"]].copy()
        check_records(tuple(kernels()), part, args, d)  # no ArgumentError: the file check held
        checked_records(tuple(kernels()), part, d)  # what the loader's add checks again


def _quick_and_named(m, a) -> tuple:
    """(whether the quick pass takes the sections, the error the checks one by one raise
    or None) of arrays ``a`` of manifest ``m``."""
    from types import SimpleNamespace as NS
    from pycudagraph.files.checks import FieldChecks
    r, args, d, rel = (a["records"], a["args"], a["deps"], a["relocs"])
    blocks = np.array([k["block"] for k in m["kernels"]], np.int64)
    names = sorted(m["slots"])
    sizes = np.array([m["slots"][n]["nbytes"] for n in names], np.int64)
    quick = bulk_format._records_pass(r, args, d, rel, blocks, len(blocks), names, sizes)
    if fast.records_pass is not None:  # the compiled pass judges every table the same
        assert fast.records_pass(r, len(args), len(d), rel, blocks, len(blocks), sizes,
                                 len(names)) == quick
    try:
        bulk_format._name_first_wrong(NS(manifest_kernels=m["kernels"], fail=FieldChecks.fail),
                                      r, args, d, rel, blocks, names, sizes)
    except pcg.GraphFileError as exc:
        return quick, str(exc)
    return quick, None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["records", "relocs"]), st.integers(0, 1 << 12),
                          st.integers(0, 255)), min_size=1, max_size=4))
def test_the_quick_pass_takes_exactly_the_sections_the_named_checks_accept(flips):
    m, sections = packed(6)
    a = arrays(m, sections)
    for key, at, byte in flips:
        raw = bytearray(a[key].tobytes())
        raw[at % len(raw)] = byte
        a[key] = np.frombuffer(bytes(raw), a[key].dtype).copy()
    quick, named = _quick_and_named(m, a)
    assert quick == (named is None), named


@pytest.mark.parametrize("edit, words", DAMAGE, ids=[w[:40] for _, w in DAMAGE])
def test_the_quick_pass_refuses_every_damage_the_checks_name(edit, words):
    m, sections = packed()
    a = arrays(m, sections)
    assert _quick_and_named(m, a) == (True, None)
    edit(a)
    quick, named = _quick_and_named(m, a)
    if "depends on position" in words or "which no earlier" in words:
        assert (quick, named) == (True, None)  # what the run entries' check names
    else:
        assert not quick and words in named, named


@both
def test_a_1000_node_chain_loads_on_the_stub_as_its_json_records_do(native):
    run('''
        import copy
        from pycudagraph.files import archive as files, bulk_format, load as file_load
        from tests.graph.test_graph_files_bulk import chain_manifest, CHAIN, CUBIN
        from pycudagraph.nodes.kernel_node import KernelNode
        ks = [fake_kernel(sig, name) for name, sig, _ in CHAIN]
        bufs = {s: buffer() for s in "xy"}
        for b in bufs.values():
            b.nbytes = 1 << 16
        v1 = chain_manifest(1000, slot_offset=8)
        v2, sections = bulk_format.pack(copy.deepcopy(v1), CUBIN, dict(enumerate(ks)))
        from pycudagraph._cuda import bulk
        rechecked = []
        full_check = bulk.check_records
        bulk.check_records = lambda *a: rechecked.append(1) or full_check(*a)
        graphs = []
        for m, secs, version in ((v1, CUBIN, (1, 0)), (v2, sections, (2, 0))):
            gf = files.decode(files.encode(m, secs, version=version))
            loader = file_load._Loader(gf, bufs, None, "test")
            loader.use(ks)
            g = fake_graph()
            made = stub.calls("cuGraphAddKernelNode")
            loader.fill(g, gf.manifest["root"])
            assert stub.calls("cuGraphAddKernelNode") - made == 1000, stub.calls("cuGraphAddKernelNode") - made
            handles = list(g.table.nodes) if version == (1, 0) else g.table.deferred.handles()
            assert stub.deps(1) == [handles[-2]], (stub.deps(1), handles[-3:])
            graphs.append((g, handles))
        assert not rechecked  # the file's check is not made twice: the add checks the lengths
        # the records' nodes were added with no object: each is made on first use, a
        # KernelNode as the JSON record's, once (asked again, the same object)
        g, handles = graphs[1]
        assert len(g.table.nodes) == 0 and len(handles) == 1000
        # with no node object to hold them, the graph's ledger (which its execs keep) holds
        # the kernels, and so their modules
        assert all(g.table.ledger.uses(k) for k in ks)
        a = list(graphs[0][0].table.nodes.values())
        # several threads asking for the same nodes at once get one object each
        got = [None] * 6
        def ask(t):
            got[t] = [g.table.node(h) for h in (handles[::-1] if t % 2 else handles)]
        threads = [threading.Thread(target=ask, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        b = got[0]
        assert all(x[::-1 if t % 2 else 1] == b and all(p is q for p, q in zip(x[::-1 if t % 2 else 1], b))
                   for t, x in enumerate(got))
        assert all(g.table.node(h) is n for h, n in zip(handles, b))
        assert len(a) == len(b) == len(g.table.nodes) == 1000
        for i, (x, y) in enumerate(zip(a, b)):
            assert type(y) is KernelNode and y._pack.kernel is ks[i % 2]
            assert x._pack.raw()[8:36] == y._pack.raw()[8:36]
            assert x._pack.values() == y._pack.values(), (i, x._pack.values(), y._pack.values())
        assert b[2]._pack.values() == (bufs["y"].ptr + 16, bufs["x"].ptr + 16, 1.0, 2)
        assert b[1]._pack.values() == (bufs["y"].ptr + 12, 0.5, 1)
        # the graph keeps the bound buffers, as a JSON load does
        assert _lifetime.holders_of(bufs["y"])
        # a kernel whose arguments take another length than the file says: named
        gf = files.decode(files.encode(v2, sections))
        loader = file_load._Loader(gf, bufs, None, "test")
        try:
            loader.use([ks[0], fake_kernel("float* y, float a, int n, int m", "scale")])
            loader.fill(fake_graph(), gf.manifest["root"])
        except pcg.GraphFileError as exc:
            assert "kernel nodes 0..999" in str(exc) and "argument bytes" in str(exc), exc
        else:
            raise AssertionError("no GraphFileError")
    ''', native)


@both
def test_a_record_over_its_kernels_launch_limits_is_refused(native):
    """The driver checks no launch limits when a node is added: a run's records are
    checked against each kernel's: a short run node by node as it is added (what was
    added is removed: on a GPU, the graph files' GPU tests), a long one (added with no
    object per node) in compiled code up to the record, removed, then named by the check
    of every launch."""
    run('''
        import copy
        from pycudagraph.files import archive as files, bulk_format, load as file_load
        from tests.graph.test_graph_files_bulk import chain_manifest, CHAIN, CUBIN
        ks = [fake_kernel(sig, name, kernel_threads=128) for name, sig, _ in CHAIN]
        bufs = {s: buffer() for s in "xy"}
        for b in bufs.values():
            b.nbytes = 1 << 16
        for count in (40, file_load.DEFER_FROM + 10):
            v1 = chain_manifest(count)
            v1["root"]["nodes"][7]["block"] = [256, 1, 1]  # over the kernel's 128 threads
            v2, sections = bulk_format.pack(copy.deepcopy(v1), CUBIN, dict(enumerate(ks)))
            gf = files.decode(files.encode(v2, sections))
            loader = file_load._Loader(gf, bufs, None, "test")
            loader.use(ks)
            g = fake_graph()
            made = stub.calls("cuGraphAddKernelNode")
            gone = stub.calls("cuGraphDestroyNode")
            try:
                loader.fill(g, gf.manifest["root"])
            except pcg.GraphFileError as exc:
                assert f"kernel nodes 0..{count - 1}" in str(exc) and "128" in str(exc), exc
                assert "record 7" in str(exc) or count < file_load.DEFER_FROM, exc
            else:
                raise AssertionError("no GraphFileError")
            assert g.table.deferred is None, count
            if count >= file_load.DEFER_FROM:  # what was added (compiled: up to record 7)
                added = stub.calls("cuGraphAddKernelNode") - made  # was removed
                assert added in (0, 7) and stub.calls("cuGraphDestroyNode") - gone == added
                assert not g.table.nodes
    ''', native)


def test_a_records_file_is_parsed_once_and_a_repeated_bulk_key_is_named(monkeypatch):
    """The manifest's members are counted once each (the key-checking second parse runs
    only where a key repeats), and a repeated key inside ``bulk`` is still named."""
    m, sections = packed(50)
    gf = files.decode(files.encode(m, sections))
    parses = []
    parse = files._parse_manifest
    monkeypatch.setattr(files, "_parse_manifest",
                        lambda *a, **k: parses.append(1) or parse(*a, **k))
    files.decode(files.encode(m, sections))
    assert len(parses) == 1
    manifest = gf.sections[0][1].decode()
    twice = manifest.replace('"bulk":{', '"bulk":{"args":3,', 1)
    assert twice != manifest
    with pytest.raises(pcg.GraphFileError, match="repeats the key 'args'"):
        files._read_manifest(twice.encode(), [t for t, _ in gf.sections], False, gf.sections)


def test_runs_write_slot_and_allocation_addresses_into_the_argument_bytes():
    """``Runs.run``: each relocation's base (a bound slot's address, or an allocation the
    load made) plus its offset lands in the 8 bytes of its record's arguments; the bound
    buffers of the run are kept; records outside the run are left alone."""
    from types import SimpleNamespace as NS
    r = np.zeros(3, bulk_format.RECORD)
    r["arg_offset"], r["arg_length"] = [0, 16, 32], 16
    rel = np.array([(0, 0, 0, 1, 8), (0, 8, 1, 2, 16), (1, 8, 0, 0, 4), (2, 0, 0, 0, 0)],
                   bulk_format.RELOC)
    runs = bulk_format.Runs((r, np.zeros(48, np.uint8), np.zeros(0, "<u4"), rel), ["x", "y"])
    x, y = object(), object()
    bound = {"x": NS(addr=0x1000, obj=x), "y": NS(addr=0x2000, obj=y)}
    kept: dict = {}
    recs, args, _ = runs.run(0, 2, bound, {2: (0x9000, 64)}, kept)
    words = struct.unpack("<6Q", args.tobytes())
    assert words == (0x2008, 0x9010, 0, 0x1004, 0, 0) and len(recs) == 2
    assert set(map(id, kept.values())) == {id(x), id(y)}



def test_relocations_all_into_slots_are_written_once_at_the_first_run():
    """A file whose relocations all point into slots has every record's addresses written
    when its first run is asked for (one step for the file, none per run); every run then
    keeps every bound buffer the file's relocations point into, none it does not."""
    from types import SimpleNamespace as NS
    r = np.zeros(3, bulk_format.RECORD)
    r["arg_offset"], r["arg_length"] = [0, 16, 32], 16
    rel = np.array([(0, 0, 0, 1, 8), (1, 8, 0, 0, 4), (2, 0, 0, 1, 24)], bulk_format.RELOC)
    runs = bulk_format.Runs((r, np.zeros(48, np.uint8), np.zeros(0, "<u4"), rel),
                            ["x", "y", "z"])
    x, y, z = object(), object(), object()
    bound = {"x": NS(addr=0x1000, obj=x), "y": NS(addr=0x2000, obj=y),
             "z": NS(addr=0x3000, obj=z)}
    kept: dict = {}
    recs, args, _ = runs.run(0, 1, bound, {}, kept)
    assert struct.unpack("<6Q", args.tobytes()) == (0x2008, 0, 0, 0x1004, 0x2018, 0)
    assert len(recs) == 1 and set(map(id, kept.values())) == {id(x), id(y)}
    args[:] = 0  # not written again by a later run
    later: dict = {}
    runs.run(2, 1, bound, {}, later)
    assert not args.any() and set(map(id, later.values())) == {id(x), id(y)}

_U32 = st.integers(0, (1 << 32) - 1)
#: a record's words, mostly near what a file holds (so the relocations' checks are reached)
_RECORD = st.tuples(st.integers(0, 3), st.integers(0, 3), st.just(1), st.just(1),
                    st.sampled_from([1, 32, 1024, 1025]), st.just(1), st.just(1),
                    st.integers(0, 16), st.integers(0, 48), st.sampled_from([0, 12, 16]),
                    st.integers(0, 8), st.integers(0, 3)) | st.tuples(*[_U32] * 12)


@pytest.mark.skipif(fast.records_pass is None, reason="the hot path is not compiled here "
                    "(PYCUDAGRAPH_NO_NATIVE=1 or no C compiler): the numpy pass is the check")
@settings(max_examples=400, deadline=None)
@given(st.integers(1, 3), st.lists(_RECORD, max_size=5),
       st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40), st.integers(0, 2),
                          st.integers(0, 3), st.integers(0, 1 << 20)), max_size=6),
       st.lists(st.integers(-1, 1 << 20), max_size=3), st.integers(0, 64), st.integers(0, 8))
def test_the_compiled_pass_judges_any_tables_as_the_numpy_pass(nk, recs, rels, slot_sizes,
                                                                nargs, ndeps):
    """Records, relocations (slots and allocations), argument blocks and slot sizes of any
    values: the compiled pass and the numpy pass agree on every one."""
    r = np.array(recs, "<u4").reshape(-1, 12).view(RECORD_DTYPE).reshape(-1)
    rel = np.zeros(len(rels), bulk_format.RELOC)
    for i, (ri, at, kind, target, offset) in enumerate(sorted(rels)):
        rel[i] = (ri, at, kind, target, offset)
    blocks = np.array([16, 12, -1][:nk], np.int64)
    names = [f"s{i}" for i in range(len(slot_sizes))]
    sizes = np.array(slot_sizes or [0], np.int64)
    args, d = np.zeros(nargs, np.uint8), np.zeros(ndeps, "<u4")
    want = bulk_format._records_pass(r, args, d, rel, blocks, nk, names, sizes)
    assert fast.records_pass(r, nargs, ndeps, rel, blocks, nk, sizes, len(names)) == want


@both
def test_a_long_run_loaded_with_a_trace_open_shows_every_node_added(native):
    """With a trace open a run of any length takes the node-by-node add, whose calls the
    trace records one by one; with none, a long run is added with no object per node."""
    run('''
        import copy
        from pycudagraph.files import archive as files, bulk_format, load as file_load
        from tests.graph.test_graph_files_bulk import chain_manifest, CHAIN, CUBIN
        ks = [fake_kernel(sig, name) for name, sig, _ in CHAIN]
        bufs = {s: buffer() for s in "xy"}
        for b in bufs.values():
            b.nbytes = 1 << 16
        count = file_load.DEFER_FROM + 22
        v2, sections = bulk_format.pack(chain_manifest(count), CUBIN, dict(enumerate(ks)))
        gf = files.decode(files.encode(v2, sections))
        for traced in (True, False):
            loader = file_load._Loader(gf, bufs, None, "test")
            loader.use(ks)
            g = fake_graph()
            if traced:
                with pcg.trace() as t:
                    loader.fill(g, gf.manifest["root"])
                adds = [c for c in t.calls if "GraphAddKernelNode" in str(c)]
                assert len(adds) == count, (len(adds), t.calls[:3])
                assert len(g.table.nodes) == count and g.table.deferred is None
            else:
                loader.fill(g, gf.manifest["root"])
                assert not g.table.nodes and len(g.table.deferred.handles()) == count
    ''', native)
