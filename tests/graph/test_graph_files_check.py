"""The quick paths of reading a graph file accept exactly what the full checks accept, on
the CPU: a kernel node taken in place (KernelFile.usual_kernel) against the field-by-
field check; the JSON parse with no Python call per object, whose repeated keys are found by
counting members; the argument bytes handed to the loader; the two holes closed (white
space in hex, a PTX section beside a CUBIN)."""

import copy
import json
import struct

import pytest

import pycudagraph as pcg
from pycudagraph.nodes.kernel_file import KERNEL_FIELDS, KernelFile, Unusual
from pycudagraph.files import schema as file_schema
from pycudagraph.files import archive as files
from pycudagraph.files.checks import FieldChecks
from tests.graph.test_graph_files_format import SECTIONS, WRONG, _paths, _replace, model

#: more values of the kinds a kernel node holds
KERNEL_WRONG = WRONG + [0, 1, 7, 8, 9, 16, 1024, 1025, -8, 2 ** 31, "00" * 8, "0" * 16, "zz" * 8,
                        " " * 16, "0g" * 8, "é" * 16, [1, 1, 1], [1024, 1, 1], [32, 32, 2],
                        [1, 1, 1.0], [True, 1, 1], [], [[0, {"slot": "x", "offset": 0}]],
                        [[8, {"handle": 0}]], [[0, {"alloc": 2, "offset": 0}]],
                        {"handle": 0}, {"handle": 9}, {"handle": True}, {"alloc": 2, "offset": 0},
                        {"alloc": 2, "offset": 1025}, {"slot": "x", "offset": 256},
                        {"slot": "x", "offset": 257}, {"slot": "done", "offset": 0},
                        {"slot": "x", "offset": 0, "more": 1}, {"slot": "x", "offset": True},
                        {"hex": "00" * 8, "relocs": []}, {"hex": "00" * 8}]


def _count(value) -> int:
    """The members of every object in a JSON value."""
    if isinstance(value, dict):
        return len(value) + sum(_count(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count(v) for v in value)
    return 0


def _kernel_args(manifest) -> dict:
    out = {}

    def walk(g):
        for n in g["nodes"]:
            if n["type"] == "kernel":
                out[n["id"]] = [bytes.fromhex(a["hex"]) for a in n["args"]]
            for body in [n["graph"]] if n["type"] == "child_graph" else n.get("bodies", []):
                walk(body)
    walk(manifest["root"])
    return out


def _checker(m):
    c = file_schema._Checker(["MANI", "CUBN", "PTX_"], False)
    c.slots = m["slots"]
    c.memory = {k: s["nbytes"] for k, s in m["slots"].items() if s["kind"] != "event"}
    c.kernel_sizes = [k["sizes"] for k in m["kernels"]]
    c.allocs = {2: 1024}
    return c


def test_a_checked_manifest_counts_every_member_and_hands_on_each_arguments_bytes():
    m = model()
    checked = file_schema.check_manifest(m, ["MANI", "CUBN", "PTX_"])
    assert checked.members == _count(m)
    assert checked.kernel_args == _kernel_args(m)
    assert files.decode(files.encode(m, SECTIONS)).kernel_args == _kernel_args(m)


@pytest.mark.parametrize("node_at", [4, ("bodies", 4)])
def test_a_kernel_node_taken_in_place_is_one_the_full_check_takes(node_at):
    """usual_kernel() accepts only nodes checked_kernel() accepts, with the same bytes and
    the same count of members; the manifest check then ends as the full check does."""
    m = model()
    node = (m["root"]["nodes"][4] if node_at == 4
            else m["root"]["nodes"][3]["bodies"][0]["nodes"][0])
    handles = frozenset({0})
    taken = 0
    for path in [p for p in _paths(node) if p]:
        for new in KERNEL_WRONG:
            n = _replace(node, path, new)
            quick, full = _checker(m), _checker(m)
            try:
                got = KernelFile.usual_kernel(quick, n, handles)
            except (Unusual, LookupError, TypeError, ValueError, AttributeError):
                continue
            taken += 1
            full.obj(n, "node", KERNEL_FIELDS, ("attributes",))
            assert KernelFile.checked_kernel(full, n, "node", handles) == got, (path, new)
            assert full.members == quick.members, (path, new)
    assert taken > 20


def _file_with_manifest_text(raw: bytes) -> bytes:
    """A sealed graph file whose manifest section is ``raw`` as written."""
    parts = [(b"MANI", raw)] + [(t.encode(), d) for t, d in SECTIONS]
    pos = files.HEADER_SIZE + files.ENTRY_SIZE * len(parts)
    table, blobs = b"", b""
    for tag, blob in parts:
        gap = -pos % 8
        pos += gap
        table += struct.pack("<4sIQQ", tag, 0, pos, len(blob))
        blobs += b"\0" * gap + blob
        pos += len(blob)
    head = struct.pack("<8sHHIQ32s", files.MAGIC, 1, 0, len(parts), pos, bytes(32))
    return files.reseal(head + table + blobs)


def test_a_repeated_key_is_named_wherever_it_is():
    text = files._manifest_bytes(model()).decode()
    assert files.decode(_file_with_manifest_text(text.encode())).manifest == model()
    at = text.index('"shared_mem":16')  # inside a kernel node taken in place
    for raw in (text[:at] + '"shared_mem":0,' + text[at:],
                text.replace('"offset":64', '"offset":0,"offset":64', 1),  # a relocation
                text.replace('"id":13', '"id":13,"id":13', 1),  # the same value twice
                text.replace('"format"', '"arch":"sm_90","format"', 1)):  # the top level
        with pytest.raises(pcg.GraphFileError, match="repeats the key"):
            files.decode(_file_with_manifest_text(raw.encode()))


def test_colons_inside_strings_do_not_hide_a_manifest_or_a_repeated_key(monkeypatch):
    m = model()
    m["kernels"][0]["signature"] = "float* y, ::cudaGraphConditionalHandle h"  # ':' in a string
    m["writer"] = "a:b:c"
    parses = []
    parse = files._parse_manifest
    monkeypatch.setattr(files, "_parse_manifest",
                        lambda *a, **k: parses.append(1) or parse(*a, **k))
    gf = files.decode(files.encode(m, SECTIONS))
    assert gf.manifest == m and gf.kernel_args == _kernel_args(m)
    assert len(parses) == 1  # colons inside strings follow no quote: no second parse
    text = files._manifest_bytes(m).decode()
    for raw in (text.replace('"writer":"a:b:c"', '"writer":"a:b:c","writer":"x"', 1),
                text.replace('"writer":"a:b:c"', '"writer" :"a:b:c", "writer"\t: "d"', 1)):
        with pytest.raises(pcg.GraphFileError, match="repeats the key 'writer'"):
            files.decode(_file_with_manifest_text(raw.encode()))


@pytest.mark.parametrize("text, members, bound", [
    ('{"a":1}', 1, True),
    ('{"a":"x:y"}', 1, True),  # a colon after no quote: not a key's end
    ('{"a":"y, ::x"}', 1, True),  # colons after a space but no quote
    ('{"a":"::x","b":2}', 2, False),  # a string's opening quote before a colon: counted
    ('{"a" :\t1, "b"\n: 2}', 2, True),  # white space before the colon
    ('{"a":"\\":1"}', 1, False),  # an escaped quote before a colon: counted, bound not met
    ('{"a":1,"a":2}', 1, False),  # a repeated key: one member parsed of two in the text
])
def test_the_member_bound_holds_only_when_no_key_can_repeat(text, members, bound):
    assert files._member_bound(text.encode(), members) is bound


def test_white_space_in_hex_is_not_hexadecimal():
    m = model()
    m["root"]["nodes"][4]["args"][0]["hex"] = "00 " * 10 + "00"  # 32 characters, 11 bytes
    with pytest.raises(pcg.GraphFileError, match=r"args\[0\]\.hex: is not hexadecimal"):
        files.decode(files.encode(m, SECTIONS))


def test_a_ptx_section_beside_a_cubin_is_checked_too():
    m = model()
    m["modules"][0]["ptx"] = 1  # the CUBIN's section
    with pytest.raises(pcg.GraphFileError, match=r"modules\[0\]\.ptx: section 1 is 'CUBN'"):
        files.decode(files.encode(m, SECTIONS))


def test_a_large_chain_is_taken_in_place():
    """No node of a plain kernel chain goes to the field-by-field check."""
    m = copy.deepcopy(model())
    base = m["root"]["nodes"][4]
    nodes = [dict(copy.deepcopy(base), id=i) for i in range(200)]
    for n in nodes:
        n.pop("attributes")
        n["args"][0]["relocs"] = [[0, {"slot": "y", "offset": 8}], [8, {"slot": "x", "offset": 4}]]
    m["root"] = {"handles": [], "nodes": nodes, "edges": [[i, i + 1, "default"] for i in range(199)]}
    calls = []
    original = KernelFile.checked_kernel
    try:
        KernelFile.checked_kernel = staticmethod(lambda *a: calls.append(a) or original(*a))
        gf = files.decode(files.encode(m, SECTIONS))
    finally:
        KernelFile.checked_kernel = staticmethod(original)
    assert not calls and len(gf.kernel_args) == 200


def test_an_object_of_the_right_size_with_another_field_is_refused():
    c = FieldChecks([], False)
    assert c.obj({"a": 1, "b": 2}, "x", ("a", "b")) == {"a": 1, "b": 2} and c.members == 2
    with pytest.raises(pcg.GraphFileError, match="x: missing b"):
        c.obj({"a": 1, "c": 2}, "x", ("a", "b"))
    with pytest.raises(pcg.GraphFileError, match=r"x: unknown field\(s\) c"):
        c.obj({"a": 1, "c": 2}, "x", ("a", "a"))  # a field named twice: checked in full
    with pytest.raises(pcg.GraphFileError, match="expected an object, got list"):
        c.obj(["a", "b"], "x", ("a", "b"))
