"""Graph files on the CPU: the container and manifest written from a manifest model by the
CPU-side writer (pycudagraph.files.archive.encode), read back, and every kind of bad file
refused with a GraphFileError naming what is wrong: truncated at every boundary, thousands
of random byte flips (with and without a recomputed checksum), every manifest field
replaced by a wrong value, another version, a foreign file. Never another exception,
never a crash, nothing executed."""

import copy
import json
import os
import random
import stat

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.files import archive as files
from pycudagraph.files.load import image_plan, parse_arch
from pycudagraph.files.schema import check_manifest
from pycudagraph.files.slots import bind_slots
from pycudagraph.files.host_registry import host_fn, host_fn_name, register_host_fn
from tests.support.file_fuzz import resealed

PTX = "//\n.version 8.5\n.target sm_80\n.address_size 64\n"


def _graph(nodes, edges=(), handles=()):
    return {"handles": list(handles), "nodes": nodes, "edges": [list(e) for e in edges]}


def _arg(n, relocs=()):
    return {"hex": "00" * n, "relocs": [list(r) for r in relocs]}


def model() -> dict:
    """A manifest with every node type, every reference kind and a nested body."""
    x = {"slot": "x", "offset": 0}
    body = _graph([
        {"id": 4, "type": "kernel", "kernel": 0, "grid": [1, 1, 1], "block": [32, 1, 1],
         "shared_mem": 0, "args": [_arg(8, [(0, {"slot": "y", "offset": 64})]),
                                   _arg(8, [(0, {"handle": 0})])]},
    ])
    child = _graph([{"id": 8, "type": "empty"}])
    nodes = [
        {"id": 0, "type": "memset", "dst": {"slot": "c", "offset": 0}, "value": 0,
         "element_size": 4, "count": 4, "height": 1, "pitch": 0},
        {"id": 1, "type": "memcpy", "dst": x, "src": {"slot": "h", "offset": 0}, "nbytes": 256},
        {"id": 2, "type": "mem_alloc", "nbytes": 1024},
        {"id": 3, "type": "conditional", "kind": "while", "handle": 0, "bodies": [body]},
        {"id": 5, "type": "kernel", "kernel": 1, "grid": [4, 1, 1], "block": [128, 1, 1],
         "shared_mem": 16, "args": [_arg(16, [(0, {"alloc": 2, "offset": 8}),
                                              (8, {"slot": "x", "offset": 4})])],
         "attributes": {"priority": -1, "cluster": [2, 1, 1],
                        "access_policy": {"base": x, "nbytes": 64, "hit_ratio": 0.5,
                                          "hit": "persisting", "miss": "streaming"}}},
        {"id": 6, "type": "memcpy_3d", "dst": {"slot": "y", "offset": 0}, "src": x,
         "width": 16, "height": 4, "depth": 2, "dst_pitch": 32, "src_pitch": 16,
         "dst_rows": 4, "src_rows": 4, "dst_pos": [0, 0, 0], "src_pos": [0, 0, 0]},
        {"id": 7, "type": "child_graph", "graph": child},
        {"id": 9, "type": "host", "fn": "mark", "args": ["tag", 3, 2.5, None, True, [1, [2]]]},
        {"id": 10, "type": "event_record", "event": "done"},
        {"id": 11, "type": "event_wait", "event": "done"},
        {"id": 12, "type": "mem_free", "alloc": 2},
        {"id": 13, "type": "empty"},
    ]
    edges = [(i, i + 1, "default") for i in range(len(nodes) - 1)] + [(3, 5, "programmatic")]
    return {
        "format": "pycudagraph.graph", "writer": "test", "arch": "sm_90",
        "slots": {"x": {"kind": "device", "nbytes": 256}, "y": {"kind": "device", "nbytes": 512},
                  "c": {"kind": "device", "nbytes": 16}, "h": {"kind": "host", "nbytes": 256},
                  "done": {"kind": "event", "nbytes": 0}},
        "modules": [{"name": "k.cu", "arch": "sm_90", "cubin": 1, "ptx": 2}],
        "kernels": [{"name": "step", "module": 0, "signature": "float* y, cudaGraphConditionalHandle h",
                     "sizes": [8, 8]},
                    {"name": "_ZN2at6native6kernelEv", "module": None, "signature": None,
                     "sizes": [16]}],
        "root": _graph(nodes, sorted(set(edges)), [{"id": 0, "default": 1}]),
    }


SECTIONS = [("CUBN", b"\x7fELF" + bytes(range(60))), ("PTX_", PTX.encode())]


def good() -> bytes:
    return files.encode(model(), SECTIONS)


def refused(data, match=None):
    with pytest.raises(pcg.GraphFileError, match=match) as info:
        files.decode(data)
    return str(info.value)


# --------------------------------------------------------------------------- round trip

def test_model_round_trips():
    gf = files.decode(good())
    assert gf.version == files.VERSION
    assert gf.manifest == model()
    assert [t for t, _ in gf.sections] == ["MANI", "CUBN", "PTX_"]
    assert gf.section(1, "CUBN") == SECTIONS[0][1]
    with pytest.raises(pcg.GraphFileError, match="section 1 is 'CUBN', expected 'PTX_'"):
        gf.section(1, "PTX_")


def test_the_layout_is_as_documented():
    data = good()
    assert data[:8] == files.MAGIC
    assert int.from_bytes(data[8:10], "little") == 2 and int.from_bytes(data[16:24], "little") == len(data)
    count = int.from_bytes(data[12:16], "little")
    assert count == 3
    for i in range(count):
        entry = data[56 + 24 * i: 80 + 24 * i]
        assert entry[:4] in files.TAGS and int.from_bytes(entry[8:16], "little") % 8 == 0
    manifest_at = int.from_bytes(data[64:72], "little")
    n = int.from_bytes(data[72:80], "little")
    assert json.loads(data[manifest_at:manifest_at + n]) == model()


def test_write_and_read_a_file(tmp_path):
    path = tmp_path / "g.pcgraph"
    files.write_file(path, good())
    assert files.read_file(path).manifest == model()
    assert [p.name for p in tmp_path.iterdir()] == ["g.pcgraph"]  # no temporary left behind


def test_a_written_file_gets_the_mode_a_plain_open_gives(tmp_path):
    # the temporary file a write goes through is 0600; the file it becomes is not
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    for mask in (0o022, 0o077, 0o002):
        old = os.umask(mask)
        try:
            path = tmp_path / f"g{mask:o}.pcgraph"
            files.write_file(path, good())
            plain.unlink()
            plain.write_bytes(b"")
        finally:
            os.umask(old)
        assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) \
            == 0o666 & ~mask, (oct(path.stat().st_mode), oct(mask))


def test_missing_file_is_a_graph_file_error(tmp_path):
    with pytest.raises(pcg.GraphFileError, match="cannot be read"):
        files.read_file(tmp_path / "nope")


# --------------------------------------------------------------------------- bad files

def _boundaries(data: bytes) -> list:
    count = int.from_bytes(data[12:16], "little")
    cuts = {0, 1, 7, 8, 10, 12, 16, 24, 55, 56}
    for i in range(count):
        at = 56 + 24 * i
        off = int.from_bytes(data[at + 8:at + 16], "little")
        n = int.from_bytes(data[at + 16:at + 24], "little")
        cuts |= {at, at + 4, at + 8, at + 16, off - 1, off, off + 1, off + n // 2, off + n - 1, off + n}
    return sorted(c for c in cuts if 0 <= c < len(data))


def test_truncated_at_every_section_boundary_says_truncated():
    data = good()
    cuts = _boundaries(data)
    assert len(cuts) > 20
    for cut in cuts:
        refused(data[:cut], "truncated")


def test_random_byte_flips_are_caught_by_the_checksum():
    data = good()
    rng = random.Random(1234)
    for _ in range(3000):
        buf = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        if bytes(buf) == data:
            continue
        refused(bytes(buf), r"corrupted|version|not a pycudagraph|truncated|trailing")


def test_random_byte_flips_with_a_recomputed_checksum_never_crash_the_reader():
    """An attacker can recompute the checksum: the table and manifest checks still hold."""
    outcomes = {"read": 0, "refused": 0}
    for gf in resealed(good(), 3000, 99):
        if gf is None:
            outcomes["refused"] += 1
        else:
            check_manifest(gf.manifest, [t for t, _ in gf.sections])  # what was read is valid
            outcomes["read"] += 1
    assert outcomes["refused"] > 1000 and outcomes["read"] > 0


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


def _replace(value, path, new):
    out = copy.deepcopy(value)
    target = out
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = new
    return out


WRONG = [None, -1, 2 ** 70, "x", "", [], {}, 1.5, True, [0, 0, 0], {"slot": "nope", "offset": 0}]


def test_every_manifest_field_replaced_by_a_wrong_value_is_refused_or_valid():
    m = model()
    paths = [p for p in _paths(m) if p]
    assert len(paths) > 150
    refusals = 0
    for path in paths:
        for new in WRONG:
            data = files.encode(_replace(m, path, new), SECTIONS)
            try:
                files.decode(data)
            except pcg.GraphFileError as exc:
                assert "manifest" in str(exc)
                refusals += 1
    assert refusals > len(paths) * 5


def test_dropping_any_field_is_refused():
    m = model()
    for path in _paths(m):
        if not path or not isinstance(path[-1], str):
            continue
        parent = m
        for k in path[:-1]:
            parent = parent[k]
        if path[-1] == "attributes" or (path[-1] in ("priority", "cluster", "access_policy")
                                        and "attributes" in path):
            continue  # optional fields
        trimmed = copy.deepcopy(m)
        target = trimmed
        for k in path[:-1]:
            target = target[k]
        del target[path[-1]]
        with pytest.raises(pcg.GraphFileError, match="manifest"):
            files.decode(files.encode(trimmed, SECTIONS))


@pytest.mark.parametrize("version, match", [((4, 0), r"format version 4\.0 is a newer version"
                                                    r"; this pycudagraph reads formats 1\.x, 2\.x and 3\.x"),
                                            ((0, 9), r"format version 0\.9 is an unknown version"),
                                            ((65535, 0), "newer version")])
def test_another_major_version_is_refused(version, match):
    refused(files.encode(model(), SECTIONS, version=version), match)


def test_a_format_1_file_is_read():
    gf = files.decode(files.encode(model(), SECTIONS, version=(1, 0)))
    assert gf.version == (1, 0) and gf.bulk is None


def test_a_newer_minor_version_is_read_and_its_new_fields_ignored():
    m = model()
    m["new_field"] = {"anything": [1, 2]}
    m["root"]["nodes"][0]["hint"] = "x"
    gf = files.decode(files.encode(m, SECTIONS, version=(1, 7)))
    assert gf.version == (1, 7)
    refused(files.encode(m, SECTIONS), r"unknown field\(s\) new_field")


@pytest.mark.parametrize("data", [b"", b"\x89PNG\r\n\x1a\n" + bytes(100), b"PK\x03\x04" + bytes(60),
                                  b"#!/bin/sh\nrm -rf /\n", json.dumps({"format": "x"}).encode(),
                                  bytes(range(256)) * 4])
def test_foreign_files_are_refused(data):
    refused(data, "not a pycudagraph graph file|truncated")


def test_trailing_bytes_and_bad_sections():
    data = good()
    refused(data + b"\0", "trailing bytes")
    bad = bytearray(data)
    bad[56:60] = b"EVIL"
    refused(files.reseal(bad), "unknown tag 'EVIL'")
    bad = bytearray(data)
    bad[12:16] = (1 << 20).to_bytes(4, "little")
    refused(files.reseal(bad), "sections, which do not fit")
    bad = bytearray(data)
    bad[80 + 16:80 + 24] = (1 << 40).to_bytes(8, "little")  # section 1 runs past the end
    refused(files.reseal(bad), "past the end of the file")


def test_a_manifest_that_is_not_json_or_not_utf8():
    def with_manifest(raw: bytes) -> bytes:
        data = bytearray(good())
        off = int.from_bytes(data[64:72], "little")
        n = int.from_bytes(data[72:80], "little")
        data[off:off + n] = raw.ljust(n, b" ")[:n]
        return files.reseal(data)
    refused(with_manifest(b"{not json"), "not valid JSON")
    refused(with_manifest(b"\xff\xfe{}"), "not UTF-8")
    refused(with_manifest(b"[" * 5000), "nests too deeply|not valid JSON")
    refused(with_manifest(b'{"a": NaN}'), "NaN")
    refused(with_manifest(b'{"a": 1, "a": 2}'), "repeats the key 'a'")
    refused(with_manifest(b"[1, 2]"), "not an object")


# --------------------------------------------------------------------------- schema rules

def _refused_model(edit, match):
    m = model()
    edit(m)
    refused(files.encode(m, SECTIONS), match)


def test_schema_rules_name_the_field():
    nodes = lambda m: m["root"]["nodes"]  # noqa: E731
    _refused_model(lambda m: m["root"]["edges"].append([5, 2, "default"]), r"edges\[\d+\]\[1\]")
    _refused_model(lambda m: m["root"]["edges"].append([0, 1, "default"]), "listed twice")
    _refused_model(lambda m: m["root"]["edges"].append([0, 2, "sideways"]), "not one of")
    _refused_model(lambda m: nodes(m)[1]["dst"].update(slot="nope"), "no slot named 'nope'")
    _refused_model(lambda m: nodes(m)[1].update(nbytes=257), "do not fit")
    _refused_model(lambda m: nodes(m)[0].update(count=5), "do not fit the 16 bytes left")
    _refused_model(lambda m: nodes(m)[4]["args"][0]["relocs"][0][1].update(alloc=3),
                   "not a mem_alloc node made before")
    _refused_model(lambda m: nodes(m)[8].update(event="x"), "not an event slot")
    _refused_model(lambda m: nodes(m)[1].update(dst={"slot": "done", "offset": 0}),
                   "is an event, not memory")
    _refused_model(lambda m: nodes(m)[3].update(handle=7), "handle 7 is not declared")
    _refused_model(lambda m: nodes(m)[4]["args"][0].update(hex="zz" * 16), "not hexadecimal")
    _refused_model(lambda m: nodes(m)[4]["args"][0].update(hex="00" * 15), "15 bytes for a 16-byte")
    _refused_model(lambda m: nodes(m)[4]["args"][0]["relocs"].append([12, {"slot": "x", "offset": 0}]),
                   r"relocs\[2\]\[0\]")
    _refused_model(lambda m: nodes(m)[4].update(block=[1024, 2, 1]), "more than 1024 threads")
    _refused_model(lambda m: nodes(m)[3].update(kind="until"), "not one of")
    _refused_model(lambda m: nodes(m)[3].update(bodies=[]), "has 1 to 1 bodies")
    _refused_model(lambda m: nodes(m)[2].update(id=7), r"nodes\[2\]\.id: 7 is outside \[2, 2\]")
    _refused_model(lambda m: nodes(m).append({"id": 14, "type": "batch_mem_op"}), "unknown node type")
    _refused_model(lambda m: nodes(m)[7]["args"].append({"a": 1}), "cannot be a dict")
    _refused_model(lambda m: m["modules"][0].update(cubin=2), "section 2 is 'PTX_', not 'CUBN'")
    _refused_model(lambda m: m["modules"][0].update(cubin=None, ptx=None), "neither a CUBIN nor PTX")
    _refused_model(lambda m: m["kernels"][1].update(signature="int"), "belongs to a kernel with a module")
    _refused_model(lambda m: m["kernels"][0].update(sizes=[32764, 8]), "bytes of parameters")
    _refused_model(lambda m: m.update(format="other"), "is not 'pycudagraph.graph'")


def test_deep_nesting_is_bounded():
    m = model()
    g = _graph([{"id": 14 + 41, "type": "empty"}])
    for k in reversed(range(1, 41)):
        g = _graph([{"id": 14 + k, "type": "child_graph", "graph": g}])
    m["root"]["nodes"].append({"id": 14, "type": "child_graph", "graph": g})
    refused(files.encode(m, SECTIONS), "nest more than 32 deep")


def test_a_huge_size_field_is_refused_before_allocation(tmp_path):
    bad = bytearray(good())
    bad[72:80] = (1 << 62).to_bytes(8, "little")  # the manifest's length
    refused(files.reseal(bad), "past the end of the file")


# --------------------------------------------------------------------------- images

@pytest.mark.parametrize("arch, cubin, ptx, device, plan", [
    ("sm_90", True, PTX, "sm_90", ["cubin", "ptx"]),
    ("sm_80", True, "", "sm_90", []),
    ("sm_80", True, PTX, "sm_90", ["ptx"]),
    ("sm_86", True, "", "sm_89", ["cubin"]),
    ("sm_89", True, "", "sm_86", []),
    ("sm_90a", True, "", "sm_90", ["cubin"]),
    ("sm_90a", True, "", "sm_100", []),
    ("sm_100", True, PTX.replace("sm_80", "sm_100"), "sm_90", []),
    ("", True, "", "sm_90", ["cubin"]),
    ("sm_120", False, PTX, "sm_120", ["ptx"]),
])
def test_which_image_a_gpu_gets(arch, cubin, ptx, device, plan):
    assert image_plan(arch, cubin, ptx, device) == plan


def test_parse_arch():
    assert parse_arch("sm_90a") == (9, 0, "a") and parse_arch("sm_120") == (12, 0, "")
    assert parse_arch("compute_80") == (8, 0, "") and parse_arch("gfx90a") is None


# --------------------------------------------------------------------------- slots, host functions

def test_bind_checks_every_slot_before_any_cuda_call():
    table = {"h": {"kind": "host", "nbytes": 64}, "e": {"kind": "event", "nbytes": 0}}
    with pytest.raises(pcg.ArgumentError, match=r"slot\(s\) 'e' are not bound"):
        bind_slots(table, {"h": np.zeros(64, np.uint8)})
    with pytest.raises(pcg.ArgumentError, match="'z', which the file has no slot for"):
        bind_slots(table, {"h": np.zeros(64, np.uint8), "e": 1, "z": 2})
    with pytest.raises(pcg.ArgumentError, match="the slot is an event"):
        bind_slots(table, {"h": np.zeros(64, np.uint8), "e": np.zeros(1)})
    small = {"h": {"kind": "host", "nbytes": 64}}
    with pytest.raises(pcg.ArgumentError, match="saved with 64 bytes; the buffer given has 32"):
        bind_slots(small, {"h": np.zeros(32, np.uint8)})
    with pytest.raises(pcg.ArgumentError, match="is device memory; the buffer given is host"):
        bind_slots({"d": {"kind": "device", "nbytes": 8}}, {"d": np.zeros(8, np.uint8)})
    b = bind_slots(small, {"h": np.arange(128, dtype=np.uint8)})["h"]
    assert b.nbytes == 128 and b.view(0) is b.obj and b.view(16)[0] == 16


def test_register_host_fn():
    def fn(*args):
        return args
    register_host_fn("test.fn", fn)
    assert host_fn("test.fn") is fn and host_fn_name(fn) == "test.fn"
    with pytest.raises(pcg.ArgumentError, match="printable"):
        register_host_fn("", fn)
    with pytest.raises(pcg.ArgumentError, match="fn"):
        register_host_fn("x", 3)


def test_load_refuses_bad_files_before_touching_the_gpu(tmp_path):
    path = tmp_path / "bad.pcgraph"
    path.write_bytes(good()[:100])
    with pytest.raises(pcg.GraphFileError, match=r"bad\.pcgraph: truncated"):
        pcg.load(path)


def test_bytes_already_read_are_checked_as_a_read_file_is(tmp_path):
    from pycudagraph.files.load import load_with_sites
    path = tmp_path / "read.pcgraph"
    path.write_bytes(good())  # the bytes given are what is checked, not the file on disk
    with pytest.raises(pcg.GraphFileError, match=r"read\.pcgraph: truncated"):
        load_with_sites(path, data=good()[:100])
    damaged = bytearray(good())
    damaged[-1] ^= 0xFF
    with pytest.raises(pcg.GraphFileError, match=r"read\.pcgraph: .*checksum"):
        load_with_sites(path, data=bytes(damaged))


def test_load_names_what_the_process_lacks_before_touching_the_gpu(tmp_path):
    m = {"format": "pycudagraph.graph", "writer": "t", "arch": "sm_90",
         "slots": {"h": {"kind": "host", "nbytes": 8}}, "modules": [],
         "kernels": [{"name": "_Z3libv", "module": None, "signature": None, "sizes": [8]}],
         "root": _graph([{"id": 0, "type": "host", "fn": "nobody.registered", "args": []},
                         {"id": 1, "type": "kernel", "kernel": 0, "grid": [1, 1, 1],
                          "block": [1, 1, 1], "shared_mem": 0,
                          "args": [_arg(8, [(0, {"slot": "h", "offset": 0})])]}])}
    path = tmp_path / "needs.pcgraph"
    files.write_file(path, files.encode(m))
    with pytest.raises(pcg.GraphFileError, match=r"host node\(s\) 0 run 'nobody.registered'"):
        pcg.load(path, bind={"h": np.zeros(8, np.uint8)})
    register_host_fn("nobody.registered", lambda: None)
    with pytest.raises(pcg.GraphFileError, match=r"kernel node\(s\) 1 run kernels pycudagraph did "
                                                 r"not compile \(_Z3libv\): pass resolve="):
        pcg.load(path, bind={"h": np.zeros(8, np.uint8)})
