"""A node type of the tests' own, filled with facets only: a CUDA empty node that carries
a note and points at device memory (an address it "bakes in").

It is what a new node type writes: its class (``build``, ``fields``, ``sites``,
``exec_fields``, ``write_site``, ``label``) and, for graph files, the record type it owns
(``file_types``) and ``from_record``. Its file record is the generic one (its fields plus
its sites as relocations, :class:`pycudagraph.nodes.file_records.FileRecord`). Nothing
of a feature module knows it. The add call is a fake driver's (:data:`CALLS`, :data:`EDGES`).
"""

from __future__ import annotations

from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.nodes import NodeType
from pycudagraph.nodes.facets import Site
from pycudagraph.nodes.file_records import FileRecord
from tests.support.fakes import _ids

#: the fake driver's add calls, by name
CALLS: list = []
#: graph handle -> [(from node handle, to node handle)]: the fake driver's edges
EDGES: dict = {}


def add_empty_node(table, deps) -> int:
    """The fake driver's ``cudaGraphAddEmptyNode``: a new node handle, its edges kept."""
    raw_deps, _ = table.dep_list(deps)
    CALLS.append("cudaGraphAddEmptyNode")
    h = int(rt.cudaGraphNode_t(next(_ids)))
    EDGES.setdefault(table.h, []).extend((int(d), h) for d in raw_deps)
    return h


class NoteNode(pcg.Node, FileRecord):
    """An empty node carrying a note and the device address of the memory it is about."""

    type = NodeType.EMPTY
    __slots__ = ("_note", "_addr", "_nbytes")
    exec_fields = frozenset({"note", "addr"})
    file_types = ("note",)

    def __init__(self, table, h: int, note: str = "", addr: int = 0, nbytes: int = 0):
        super().__init__(table, h)
        self._note, self._addr, self._nbytes = note, addr, nbytes

    @classmethod
    def build(cls, table, deps, note: str, memory) -> "NoteNode":
        """``cudaGraphAddEmptyNode``; ``memory`` (a buffer with ``ptr`` and ``nbytes``) is
        kept alive with the node."""
        node = cls(table, add_empty_node(table, deps), note, int(memory.ptr), int(memory.nbytes))
        return table.register(node, memory)

    def fields(self) -> dict:
        """The note and the address. No CUDA call."""
        return {"note": self._note, "addr": self._addr}

    def sites(self) -> list:
        """The address, as the site ``addr``. No CUDA call."""
        return [Site("addr", 0, self._addr, self._nbytes)]

    def label(self) -> str:
        """``note: <text>``. No CUDA call."""
        return f"note: {self._note}"

    def describe(self) -> str:
        """The label. No CUDA call."""
        return self.label()

    def write_site(self, rec, site, address: int) -> None:
        """The new address, held by the exec's record of the node. No CUDA call."""
        rec.hold("addr", address)

    def exec_set(self, rec, note=None, addr=None) -> None:
        """A new note or address in one exec, held by its record. No CUDA call."""
        if note is not None:
            rec.hold("note", note)
        if addr is not None:
            rec.hold("addr", addr)

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """The generic record's check, then: a note that is a string. No CUDA call."""
        super().check_fields(c, n, where, handles, depth, nid)
        if not isinstance(n["fields"].get("note"), str):
            c.fail((where, ".fields.note"), "a note is a string")

    @classmethod
    def from_record(cls, graph, deps, n, into) -> "NoteNode":
        """The node rebuilt on the memory its ``addr`` site names in the bound buffers."""
        return cls.build(graph.table, deps, n["fields"]["note"], into.sites(n)["addr"])
