"""CPU test: a new node type is four additions, and nothing else changes.

The four: its class (``build``, ``read``, ``params``, ``set_params``, ``exec_set``; here in
this file, in the package in ``nodes/<family>.py``), one registry line
(``nodes/registry.py``), one builder line (``Graph.add_x`` in ``graph/graph.py``) and its
export (``pycudagraph/__init__.py``). Listing, reading back, what graphs and execs keep alive,
the exec's record and ``GraphExec.set_params`` then work for it unchanged
(``docs/ARCHITECTURE.md`` walks through the same four steps). The node here is a CUDA empty
node that carries a note: a node type of pycudagraph's own. No raw call reaches CUDA.
"""

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import versions
from pycudagraph._lifetime import holders_of
from pycudagraph.nodes import NodeType
from pycudagraph.nodes.registry import REGISTRY
from tests.support.fakes import _ids, fake_exec, fake_graph

CALLS = []


def call(fn, *args):
    """The fake driver of this file: records the call, returns a new node handle."""
    CALLS.append(fn.__name__)
    return rt.cudaGraphNode_t(next(_ids))


class Note:
    """A Python object the node keeps alive."""


# 1. The class ---------------------------------------------------------------------------

class NoteNode(pcg.Node):
    """An empty node carrying a note (``cudaGraphAddEmptyNode``)."""

    type = NodeType.EMPTY
    __slots__ = ("_note",)

    def __init__(self, table, h: int, note=None):
        super().__init__(table, h)
        self._note = note

    @classmethod
    def build(cls, table, deps, note) -> "NoteNode":
        """``cudaGraphAddEmptyNode``; the note is kept alive with the node."""
        raw_deps, n = table.dep_list(deps)
        raw = call(rt.cudaGraphAddEmptyNode, table.raw, raw_deps, n)
        return table.register(cls(table, int(raw), note), note)

    @property
    def params(self) -> dict:
        """The note. No CUDA call."""
        return {"note": self._note}

    def set_params(self, note) -> None:
        """A new note in the graph. No CUDA call."""
        self._note = note
        self._table.register(self, note)

    def exec_set(self, rec, note) -> None:
        """A new note in one exec: the exec keeps it. No CUDA call."""
        rec.hold("note", note)


@pytest.fixture
def note_type(monkeypatch):
    # 2. one registry line, 3. one builder line, 4. the export
    monkeypatch.setitem(REGISTRY, NodeType.EMPTY, NoteNode)
    monkeypatch.setattr(pcg.Graph, "add_note",
                        lambda self, note, deps=(): NoteNode.build(self.table, deps, note),
                        raising=False)
    monkeypatch.setattr(pcg, "NoteNode", NoteNode, raising=False)
    CALLS.clear()
    return NoteNode


def test_a_new_node_type_is_built_kept_and_updated_like_the_others(note_type, monkeypatch):
    g = fake_graph()
    first, second = Note(), Note()
    a = g.add_note(first)
    b = g.add_note(second, deps=[a])
    assert CALLS == ["cudaGraphAddEmptyNode"] * 2
    assert isinstance(b, pcg.NoteNode) and b.params == {"note": second}
    assert g.table.kept(a) == (first,) and holders_of(first)  # the graph keeps it alive

    exe = fake_exec(g)  # the exec copies what the graph keeps, at C speed
    a.set_params(Note())  # the graph changes; the exec keeps the note it took
    assert holders_of(first) == [repr(exe)]
    third = Note()
    exe.set_params(a, note=third)  # through the exec's record of the node
    assert exe.exec_node(a).held("note") == (third,) and holders_of(third) == [repr(exe)]
    with pytest.raises(pcg.ArgumentError, match="NoteNode has no field 'text'"):
        exe.set_params(a, text="x")  # the field names come from exec_set's signature


def test_a_new_node_type_is_read_back_through_the_registry(note_type, monkeypatch):
    g = fake_graph()
    monkeypatch.setattr(versions, "node_type", lambda handle: 5)  # the driver: an empty node
    node = g.table.node(next(_ids))  # a node pycudagraph did not build (listed, captured)
    assert type(node) is NoteNode and node.params == {"note": None}
    assert g.table.node(int(node)) is node  # one object per node
