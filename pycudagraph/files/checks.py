"""The field checks a graph file's manifest check is made of (:mod:`.file_schema`): type,
range, length, choice, section and reference checks, each raising a
:class:`~pycudagraph.errors.GraphFileError` that names the field. No CUDA call.

A field's place (``root.nodes[3] (kernel).args[1].hex``) is handed over as its parts: a
string, or a tuple of parts (strings, ints, tuples), joined by :func:`place` only when a
check fails, so checking a valid manifest formats no text. Every check also counts the
members of the objects it accepts (:attr:`FieldChecks.members`): the reader compares the
count with the text to know that no object repeats a key (:func:`.files.decode`).
"""

from __future__ import annotations

from ..errors import GraphFileError

__all__ = ["FieldChecks", "place", "MAX_NODES", "MAX_NAME", "U32", "U48", "I63"]

U32, U48, I63 = (1 << 32) - 1, 1 << 48, 1 << 63
MAX_NODES, MAX_NAME = 1 << 21, 4096


def place(where) -> str:
    """The text of a field's place given as parts: ``("root", ".nodes[", 3, "]")`` ->
    ``"root.nodes[3]"``."""
    if type(where) is tuple:
        return "".join(map(place, where))
    return str(where)


_DISTINCT: dict = {}  # field tuple -> whether it names each field once


def _distinct(fields: tuple) -> bool:
    """Whether ``fields`` names no field twice (then an object of as many members that has
    each of them has exactly them), kept per tuple."""
    ok = _DISTINCT.get(fields)
    if ok is None:
        ok = _DISTINCT[fields] = len(set(fields)) == len(fields)
    return ok


class FieldChecks:
    """Checks of one field each, against the manifest's slots, sections and allocations
    seen so far; each returns the value it accepted. The node classes' record checks
    (:mod:`pycudagraph.nodes.file_records`) are made of these."""

    U32, U48, I63, MAX_NODES = U32, U48, I63, MAX_NODES

    def __init__(self, tags: list, lenient: bool):
        self.tags = tags
        self.lenient = lenient  # a newer minor version: unknown keys are allowed
        self.members = 0  # members of the objects accepted so far
        self.slots: dict = {}  # the manifest's slots, once checked
        self.memory: dict = {}  # name -> nbytes of the slots that are memory (not events)
        self.allocs: dict[int, int] = {}  # mem_alloc id -> nbytes

    @staticmethod
    def fail(where, what: str):
        raise GraphFileError(f"manifest: {place(where)}: {what}")

    def obj(self, v, where, required, optional=()) -> dict:
        if type(v) is dict and len(v) == len(required) and _distinct(required):
            for k in required:  # the usual object: exactly the required fields
                if k not in v:
                    break
            else:
                self.members += len(v)
                return v
        if not isinstance(v, dict):
            self.fail(where, f"expected an object, got {type(v).__name__}")
        missing = [k for k in required if k not in v]
        if missing:
            self.fail(where, f"missing {', '.join(missing)}")
        unknown = sorted(k for k in v if k not in required and k not in optional)
        if unknown and not self.lenient:
            self.fail(where, f"unknown field(s) {', '.join(unknown)}")
        self.members += len(v)
        return v

    def int_(self, v, where, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(where, f"expected an integer, got {type(v).__name__}")
        if not lo <= v <= hi:
            self.fail(where, f"{v} is outside [{lo}, {hi}]")
        return v

    def str_(self, v, where, most: int = MAX_NAME, empty: bool = False) -> str:
        if not isinstance(v, str):
            self.fail(where, f"expected a string, got {type(v).__name__}")
        if len(v) > most or (not v and not empty):
            self.fail(where, f"a string of {len(v)} characters (1 to {most} allowed)")
        return v

    def list_(self, v, where, most: int, exact: int | None = None) -> list:
        if not isinstance(v, list):
            self.fail(where, f"expected a list, got {type(v).__name__}")
        if len(v) > most or (exact is not None and len(v) != exact):
            want = exact if exact is not None else f"at most {most}"
            self.fail(where, f"{len(v)} entries ({want} expected)")
        return v

    def ints(self, v, where, n: int, lo: int, hi: int) -> list:
        return [self.int_(x, (where, "[", i, "]"), lo, hi)
                for i, x in enumerate(self.list_(v, where, n, n))]

    def choice(self, v, where, options) -> str:
        if v not in options or not isinstance(v, str):
            self.fail(where, f"{v!r} is not one of {', '.join(options)}")
        return v

    def value(self, v, where, depth: int) -> None:
        """A JSON value a record may hold (a host argument, a field): None, bool, float,
        int, str and lists of them, nested at most 8 deep."""
        if depth > 8:
            self.fail(where, "host arguments nest more than 8 deep")
        if v is None or isinstance(v, (bool, float)):
            return
        if isinstance(v, int):
            self.int_(v, where, -I63, I63 - 1)
        elif isinstance(v, str):
            self.str_(v, where, 1 << 16, empty=True)
        elif isinstance(v, list):
            for i, x in enumerate(self.list_(v, where, 4096)):
                self.value(x, (where, "[", i, "]"), depth + 1)
        else:
            self.fail(where, f"a host argument cannot be a {type(v).__name__}")

    def section(self, v, where, tag: str):
        if v is None:
            return None
        i = self.int_(v, where, 1, len(self.tags) - 1)
        if self.tags[i] != tag:
            self.fail(where, f"section {i} is {self.tags[i]!r}, not {tag!r}")
        return i

    # references ----------------------------------------------------------------------

    def left(self, v) -> int | None:
        """The bytes left after an address reference of the usual shape that holds
        (``{"slot" or "alloc": ..., "offset": n}``); None for anything else, which
        :meth:`ref` then checks and names. Counts nothing: the caller counts 2 members."""
        if type(v) is dict and len(v) == 2:
            offset = v.get("offset")
            if type(offset) is int and offset >= 0:
                name = v.get("slot")
                if name is not None:
                    size = self.memory.get(name) if type(name) is str else None
                else:
                    a = v.get("alloc")
                    size = self.allocs.get(a) if type(a) is int else None
                if size is not None and offset <= size:
                    return size - offset
        return None

    def ref(self, v, where, handles=None) -> int | None:
        """Check an address (or, with ``handles``, a handle) reference; the bytes left
        from it to the end of its slot or allocation (``None`` for a handle)."""
        left = self.left(v)
        if left is not None:
            self.members += 2
            return left
        if isinstance(v, dict) and "handle" in v and handles is not None:
            self.obj(v, where, ("handle",))
            h = self.int_(v["handle"], (where, ".handle"), 0, U32)
            if h not in handles:
                self.fail(where, f"handle {h} is not declared by this graph or one around it")
            return None
        if isinstance(v, dict) and "slot" in v:
            self.obj(v, where, ("slot", "offset"))
            name = v["slot"]
            slot = self.slots.get(name) if isinstance(name, str) else None
            if slot is None:
                self.fail(where, f"no slot named {name!r}")
            if slot["kind"] == "event":
                self.fail(where, f"slot {name!r} is an event, not memory")
            return slot["nbytes"] - self.int_(v["offset"], (where, ".offset"), 0, slot["nbytes"])
        if isinstance(v, dict) and "alloc" in v:
            self.obj(v, where, ("alloc", "offset"))
            a = self.int_(v["alloc"], (where, ".alloc"), 0, MAX_NODES)
            if a not in self.allocs:
                self.fail(where, f"node {a} is not a mem_alloc node made before this one")
            return self.allocs[a] - self.int_(v["offset"], (where, ".offset"), 0, self.allocs[a])
        self.fail(where, "expected {'slot': name, 'offset': n} or {'alloc': id, 'offset': n}"
                  + (" or {'handle': id}" if handles is not None else ""))
