"""CPU test: a node type that fills its facets is saved and loaded, diffed, audited, drawn
and rebound with no edit of any feature module.

The type is :class:`tests.nodes.note_node.NoteNode` (an empty node carrying a note and a
device address), registered through the node registry as ``tests/nodes/test_new_node_type.py``
does. Each feature is reached through the public API (``g.save`` / ``pcg.load``,
``pcg.diff``, ``g.audit``, the page model, ``exe.rebind``) and asks the node only for its
facets (``fields()``, ``sites()``, ``exec_fields``, ``write_site``, ``label()``) and, for
files, its record (``file_types``, ``from_record``). A fake driver stands in for CUDA: graph
create and destroy, the device's architecture, node and edge lists, pointer attributes.
"""

import json

import pytest
from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import context, versions
from pycudagraph.files.archive import decode
from pycudagraph.inspect.page_model import graph_model
from pycudagraph.nodes import NodeType
from pycudagraph.nodes.registry import REGISTRY
from tests.nodes import note_node
from tests.nodes.note_node import NoteNode
from tests.support.fakes import _ids, fake_buffer, fake_exec

_OK = rt.cudaError_t.cudaSuccess


@pytest.fixture
def driver(monkeypatch):
    """The fake driver, the note type registered, and the graphs made so far."""
    graphs = []
    made = {}

    def create(flags):
        raw = rt.cudaGraph_t(next(_ids))
        made[int(raw)] = None
        return _OK, raw

    def nodes(raw):
        g = next(g for g in graphs if g.table.h == int(raw))
        return [rt.cudaGraphNode_t(h) for h in g.table.nodes]

    def edges(raw):
        pairs = note_node.EDGES.get(int(raw), [])
        return ([rt.cudaGraphNode_t(a) for a, _ in pairs], [rt.cudaGraphNode_t(b) for _, b in pairs],
                [rt.cudaGraphEdgeData() for _ in pairs])

    def attribute(attr, dev):
        major = attr == rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor
        return _OK, 9 if major else 0

    monkeypatch.setattr(rt, "cudaGraphCreate", create)
    monkeypatch.setattr(rt, "cudaGraphDestroy", lambda raw: (_OK,))
    monkeypatch.setattr(rt, "cudaDeviceGetAttribute", attribute)
    monkeypatch.setattr(dr, "cuPointerGetAttributes",  # no allocation at any address: freed
                        lambda n, attrs, ptr: (dr.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    monkeypatch.setattr(context.thread_state, "device", 0, raising=False)
    monkeypatch.setattr(context.thread_state, "visited", {0}, raising=False)
    monkeypatch.setattr(versions, "graph_nodes", nodes)
    monkeypatch.setattr(versions, "graph_get_edges_with_data", edges)
    monkeypatch.setitem(REGISTRY, NodeType.EMPTY, NoteNode)  # the one registry line
    note_node.CALLS.clear()
    note_node.EDGES.clear()
    return graphs


def _graph(driver, note: str, buf, offset: int = 64):
    """Two notes, the second after the first; the first points ``offset`` into ``buf``."""
    g = pcg.Graph()
    driver.append(g)
    a = NoteNode.build(g.table, (), note, _View(buf, offset))
    b = NoteNode.build(g.table, [a], "second", _View(buf, 0))
    return g, a, b


class _View:
    """Memory ``offset`` bytes into ``buf``."""

    def __init__(self, buf, offset: int):
        self.buf, self.ptr, self.nbytes = buf, buf.ptr + offset, buf.nbytes - offset


def test_a_note_graph_is_saved_and_loaded_into_other_buffers(driver, tmp_path):
    buf, other = fake_buffer(4096), fake_buffer(8192)
    g, a, _ = _graph(driver, "first", buf)
    path = tmp_path / "notes.pcgraph"
    g.save(path, slots={"buf": buf})
    manifest = decode(path.read_bytes()).manifest
    first = manifest["root"]["nodes"][0]
    assert first == {"id": 0, "type": "note", "fields": {"note": "first"},
                     "sites": [["addr", {"slot": "buf", "offset": 64}]]}
    assert manifest["root"]["edges"] == [[0, 1, "default"]]
    assert str(buf.ptr) not in json.dumps(manifest)  # the address travels as slot + offset

    note_node.CALLS.clear()
    loaded = pcg.load(path, bind={"buf": other})
    driver.append(loaded)
    assert note_node.CALLS == ["cudaGraphAddEmptyNode"] * 2  # rebuilt by the class
    la, lb = loaded.table.nodes.values()
    assert type(la) is NoteNode and la.fields() == {"note": "first", "addr": other.ptr + 64}
    assert lb.fields() == {"note": "second", "addr": other.ptr}
    assert note_node.EDGES[loaded.table.h] == [(int(la), int(lb))]
    assert loaded.table.kept(la)[0].base is other  # the bound buffer is kept alive


def test_a_bad_note_record_is_refused_naming_the_field(driver, tmp_path):
    buf = fake_buffer(4096)
    g, _, _ = _graph(driver, "first", buf)
    path = tmp_path / "notes.pcgraph"
    g.save(path, slots={"buf": buf})
    gf = decode(path.read_bytes())
    from pycudagraph.files.archive import encode  # the CPU-side writer, as the format tests use
    sections = [(t, d) for t, d in gf.sections[1:]]
    for change, match in [
            (lambda n: n["fields"].update(note=7), r"nodes\[0\] \(note\)\.fields\.note: a note"),
            (lambda n: n["sites"][0].__setitem__(1, {"slot": "nope", "offset": 0}),
             r"nodes\[0\] \(note\)\.sites\[0\]\[1\]: no slot named 'nope'"),
            (lambda n: n["sites"][0][1].__setitem__("offset", 4097),
             r"sites\[0\]\[1\]\.offset: 4097 is outside"),
            (lambda n: n.pop("sites"), r"nodes\[0\] \(note\): missing sites")]:
        m = json.loads(json.dumps(gf.manifest))
        change(m["root"]["nodes"][0])
        with pytest.raises(pcg.GraphFileError, match=match):
            decode(encode(m, sections))


def test_a_note_graph_is_diffed_by_its_fields(driver):
    buf = fake_buffer(4096)
    g, a, _ = _graph(driver, "first", buf)
    h, ha, _ = _graph(driver, "changed", buf)
    d = pcg.diff(g, h)
    assert d.same_topology
    assert [(c.node, c.field) for c in d.changes] == [(a, "note")]
    assert d.changes[0].new_node == ha and d.changes[0].settable  # "note" is an exec field
    moved, _, _ = _graph(driver, "first", buf, offset=128)
    assert [c.field for c in pcg.diff(g, moved).changes] == ["addr"]


def test_a_note_graph_is_audited_by_its_sites(driver):
    buf = fake_buffer(4096)
    g, a, b = _graph(driver, "first", buf)
    found = g.audit()  # the fake driver knows no allocation at any address
    assert sorted((f.node == a, f.place, f.address, f.problem) for f in found) == [
        (False, "addr", buf.ptr, "freed"), (True, "addr", buf.ptr + 64, "freed")]


def test_a_note_graph_is_drawn_in_the_page_model(driver):
    buf = fake_buffer(4096)
    g, _, _ = _graph(driver, "first", buf)
    model = graph_model(g)
    entries = sorted(model["nodes"].values(), key=lambda e: e["label"])
    assert [e["label"] for e in entries] == ["note: first", "note: second"]
    assert ["note", "first"] in entries[0]["details"]


def test_a_note_exec_is_rebound_through_its_sites(driver):
    buf, new = fake_buffer(4096), fake_buffer(4096)
    g, a, b = _graph(driver, "first", buf)
    exe = fake_exec(g)
    assert exe.rebind(buf.ptr + 64, new.ptr + 64) == 1  # one site held the old address
    assert exe.exec_node(a).held("addr") == (new.ptr + 64,)
    assert exe.exec_node(b).held("addr") is None  # another address: untouched
    with pytest.raises(pcg.ArgumentError):
        exe.rebind(0x1234_5678_0000, new.ptr)  # no site holds it
