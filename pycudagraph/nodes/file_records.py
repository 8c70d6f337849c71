"""What a node type puts in a graph file, carried by its class: the record protocol.

A graph file (:mod:`pycudagraph.files`) knows no node type. Every record in a file names a
type (``"memset"``); the class that owns that name (its :attr:`FileRecord.file_types`,
found through :data:`~pycudagraph.nodes.registry.REGISTRY`) writes the record
(:meth:`~FileRecord.to_record`), checks it field by field before anything is built
(:meth:`~FileRecord.check_record`) and rebuilds the node from it
(:meth:`~FileRecord.from_record`). A node's record is its fields plus its sites as
relocations: every address it bakes in is written as a reference (``{"slot": name,
"offset": n}`` or ``{"alloc": id, "offset": n}``) and becomes the same offset in the
buffer bound at load.

The methods get the file wing's helpers as arguments, so nothing here imports it:

``out`` (the writer)
    ``address(addr, where, what)`` -> reference (refusing an address in no slot),
    ``find(addr, where)`` -> reference or None, ``handle(value, where)``,
    ``event(event, where)`` -> slot name, ``graph(g, where)`` -> a graph's record,
    ``json(value)`` -> ``(value, ok)``, ``host_fn_name(fn)``, ``refuse(where, what)``,
    ``declare_allocation(node, start, nbytes)``, ``declare_handle(handle)``,
    ``allocated(node, id)``, ``freed(ptr)`` -> id or None.
``c`` (the checker)
    the field checks of :class:`~pycudagraph.files.checks.FieldChecks` (``obj``, ``int_``,
    ``ref`` ...) and ``graph(record, where, handles, depth)`` for an inner graph.
``into`` (the loader)
    ``memory(ref)``, ``target(ref)``, ``event(name)``, ``handle(id)``, ``graph(record)``
    -> a new graph, ``fill(graph, record)``, ``allocated(id, ptr, nbytes)``,
    ``allocation(id)``, ``host_fn(name)``, ``need(kind, id, name)``.

A node type whose class names no file type cannot be saved (the save names the node).
This module holds the protocol's generic record and the records of the host, event and
structure nodes; the memory nodes' are in :mod:`.memory_file`, the kernel's in
:mod:`.kernel_file`.
"""

from __future__ import annotations

import json

__all__ = ["FileRecord", "HostFile", "EmptyFile", "EventFile", "ChildGraphFile",
           "ConditionalFile", "COND_BODIES", "record_text"]

#: conditional kind -> (fewest, most) bodies
COND_BODIES = {"if": (1, 1), "if_else": (2, 2), "while": (1, 1), "switch": (1, 1024)}
_GENERIC = (("fields", "sites"), ())


def record_text(value) -> str:
    """A JSON value of a record as people read it: a reference to a slot or an allocation
    (``{"slot", "offset"}``) as ``slot x + 0x40``, a string as it is, anything else as
    compact JSON (at most 120 characters). No CUDA call."""
    if type(value) is dict and len(value) == 2 and "offset" in value:
        if "slot" in value:
            return f"slot {value['slot']} + 0x{int(value['offset']):x}"
        if "alloc" in value:
            return f"the allocation of node {value['alloc']} + 0x{int(value['offset']):x}"
    if isinstance(value, str):
        return value
    text = json.dumps(value, separators=(", ", ": "))
    return text if len(text) <= 120 else text[:117] + "..."


class FileRecord:
    """The record protocol's defaults (a mixin of node classes): the generic record
    ``{"fields": {name: JSON value}, "sites": [[place, reference], ...]}`` made from the
    node's facets (``fields()`` less the fields named by a site, ``sites()`` as
    references). A node type using it names its file type in :attr:`file_types` and
    rebuilds itself in :meth:`from_record`; :meth:`check_fields` may check its fields."""

    __slots__ = ()

    #: the ``"type"`` names this class's records carry (the first is the default); none:
    #: graph files cannot hold the type
    file_types: tuple = ()
    #: file type -> (required, optional) fields of its record besides ``id`` and ``type``
    file_shape: dict = {}

    def file_declare(self, out) -> None:
        """Before any record is written, declare to ``out`` what other records may refer to
        (an allocation, a conditional handle). Nothing here. No CUDA call here."""

    def to_record(self, out, where, nid: int) -> dict:
        """The node's record (without ``id``; with ``type`` only when not the first of
        :attr:`file_types`): here its fields and its sites as references, read with the
        node's ``GetParams`` call (``cudaGraphMemsetNodeGetParams`` for a memset ...)."""
        sites = self.sites()
        places = {s.place for s in sites}
        fields = {}
        for name, v in self.fields().items():
            if name in places:
                continue  # an address: it travels as its site
            value, ok = out.json(v)
            if not ok:
                out.refuse(where, f"field {name!r} ({type(v).__name__}) is not a JSON value "
                                  "(None, bool, int, float, str or lists of them)")
            fields[name] = value
        return {"fields": fields, "sites": [[s.place, out.address(s.address, where, s.place)]
                                            for s in sites if s.role == "use"]}

    @classmethod
    def check_record(cls, c, n, where, handles, depth: int, nid: int) -> None:
        """Check a record whose ``id`` and ``type`` hold: its shape (:attr:`file_shape`),
        then :meth:`check_fields`. No CUDA call."""
        required, optional = cls.file_shape.get(n["type"], _GENERIC)
        c.obj(n, where, ("id", "type") + required, optional)
        cls.check_fields(c, n, where, handles, depth, nid)

    @classmethod
    def check_fields(cls, c, n, where, handles, depth: int, nid: int) -> None:
        """The generic record's check: fields of JSON values, sites of known references.
        No CUDA call."""
        fields = n["fields"]
        if not isinstance(fields, dict) or len(fields) > 256:
            c.fail((where, ".fields"), "expected an object of at most 256 fields")
        c.members += len(fields)
        for name, v in fields.items():
            c.str_(name, (where, ".fields"), 256)
            c.value(v, (where, ".fields.", name), 0)
        places = set()
        for i, s in enumerate(c.list_(n["sites"], (where, ".sites"), 4096)):
            w = (where, ".sites[", i, "]")
            c.list_(s, w, 2, 2)
            place = c.str_(s[0], (w, "[0]"), 256)
            if place in places:
                c.fail(w, f"the site {place!r} is listed twice")
            places.add(place)
            c.ref(s[1], (w, "[1]"))

    @classmethod
    def record_graphs(cls, n) -> list:
        """The records of the graphs a record holds (none here). No CUDA call."""
        return []

    @classmethod
    def record_graph_names(cls, n) -> list:
        """The names of the graphs of :meth:`record_graphs`, as the node the record makes
        gives them (``subgraph_names``): ``body i`` here. No CUDA call."""
        return [f"body {i}" for i in range(len(cls.record_graphs(n)))]

    @classmethod
    def record_view(cls, n, kernels: list) -> tuple:
        """``(label, details, args)`` of record ``n`` as a page shows it, from the file alone
        (``show FILE --model``): the label, ``[[key, text]]`` of its fields and of the
        references its sites hold (``slot x + 0x40``), and ``[[argument, hex, note]]`` of
        argument bytes (none here). The graphs it holds (:meth:`record_graphs`) are drawn,
        not listed. ``kernels``: the manifest's kernel entries. No CUDA call."""
        inner = {id(g) for g in cls.record_graphs(n)}
        details = []
        for key, value in n.items():
            if key in ("id", "type") or id(value) in inner or (
                    type(value) is list and value and all(id(v) in inner for v in value)):
                continue
            if key == "fields" and type(value) is dict:
                details.extend([name, record_text(v)] for name, v in value.items())
            elif key == "sites" and type(value) is list:
                details.extend([str(place), record_text(ref)] for place, ref in value)
            else:
                details.append([key, record_text(value)])
        return n["type"], details, []

    @classmethod
    def bulk_record(cls, n, kernels: list, loaded: dict) -> bool:
        """Whether record ``n`` may travel as a fixed binary record (format 2,
        ``files/bulk_format``) instead of JSON: none here. ``kernels``: the manifest's
        kernel entries; ``loaded``: kernel index -> Kernel of those the saver holds. No
        CUDA call."""
        return False

    @classmethod
    def record_needs(cls, n, into) -> None:
        """Tell ``into`` what the loading process must supply for a record (a registered
        host function, a resolver): nothing here. No CUDA call."""

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """The node rebuilt in ``graph`` after ``deps`` from its checked record ``n``;
        a type using the generic record overrides this (``into.sites(n)`` gives each
        site's memory in the bound buffers) and makes its add call
        (``cudaGraphAddEmptyNode`` ...). Here: refused, with no CUDA call."""
        raise TypeError(f"{cls.__name__} records cannot be loaded")


class HostFile(FileRecord):
    """A host node: the name its callable was registered under, never code, and its
    arguments as JSON values."""

    __slots__ = ()
    file_types = ("host",)
    file_shape = {"host": (("fn", "args"), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """Its registered name and JSON arguments. No CUDA call for a node built here
        (``cudaGraphHostNodeGetParams`` for one read back)."""
        p = self.params
        fn = p["fn"]
        if not callable(fn):
            out.refuse(where, "runs a C function (a host node not built with add_host), which "
                              "a graph file cannot hold")
        name = out.host_fn_name(fn)
        if name is None:
            out.refuse(where, f"runs {getattr(fn, '__qualname__', fn)!r}, which is not "
                              "registered: call pcg.register_host_fn(name, fn) before saving")
        args = []
        for i, a in enumerate(p["args"]):
            value, ok = out.json(a)
            if not ok:
                out.refuse(where, f"host argument {i} ({type(a).__name__}) is not a JSON value "
                                  "(None, bool, int, float, str or lists of them)")
            args.append(value)
        return {"fn": name, "args": args}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """A name and JSON arguments. No CUDA call."""
        c.str_(n["fn"], (where, ".fn"), 256)
        for i, a in enumerate(c.list_(n["args"], (where, ".args"), 256)):
            c.value(a, (where, ".args[", i, "]"), 0)

    @classmethod
    def record_needs(cls, n, into) -> None:
        """The host function, registered in this process. No CUDA call."""
        if into.host_fn(n["fn"]) is None:
            into.need("host", n["id"], n["fn"])

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddHostNode`` running the callable registered under the name."""
        return graph.add_host(into.host_fn(n["fn"]), tuple(n["args"]), deps)


class EmptyFile(FileRecord):
    """An empty node: nothing but its id and type."""

    __slots__ = ()
    file_types = ("empty",)
    file_shape = {"empty": ((), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """Nothing. No CUDA call."""
        return {}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """Nothing. No CUDA call."""
        pass

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddEmptyNode``."""
        return graph.add_empty(deps)


class EventFile(FileRecord):
    """An event record or wait node: the slot of its event. Each subclass's file type is
    its node type (``event_record``, ``event_wait``)."""

    __slots__ = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "type" in cls.__dict__:
            cls.file_types = (str(cls.type),)
            cls.file_shape = {str(cls.type): (("event",), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """Its event's slot. No CUDA call for a node built here
        (``cudaGraphEventRecordNodeGetEvent`` / ``cudaGraphEventWaitNodeGetEvent`` otherwise)."""
        return {"event": out.event(self.event, where)}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """An event slot of the file. No CUDA call."""
        name = n["event"]
        slot = c.slots.get(name) if isinstance(name, str) else None
        if slot is None or slot["kind"] != "event":
            c.fail((where, ".event"), f"{name!r} is not an event slot")

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddEventRecordNode`` / ``cudaGraphAddEventWaitNode`` with the bound event."""
        return getattr(graph, f"add_{cls.file_types[0]}")(into.event(n["event"]), deps)


class ChildGraphFile(FileRecord):
    """A child graph node: the child graph's record, recursively."""

    __slots__ = ()
    file_types = ("child_graph",)
    file_shape = {"child_graph": (("graph",), ())}

    def to_record(self, out, where, nid: int) -> dict:
        """The child graph's record (``cudaGraphChildGraphNodeGetGraph``, then its walk)."""
        return {"graph": out.graph(self.child, f"{where}, child graph")}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """The child graph's record. No CUDA call."""
        c.graph(n["graph"], (where, ".graph"), frozenset(), depth + 1)

    @classmethod
    def record_graphs(cls, n) -> list:
        """The child graph's record. No CUDA call."""
        return [n["graph"]]

    @classmethod
    def record_graph_names(cls, n) -> list:
        """``["child"]``, as a child graph node names its graph. No CUDA call."""
        return ["child"]

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """The child graph built (``cudaGraphCreate``), then ``cudaGraphAddChildGraphNode``."""
        return graph.add_child_graph(into.graph(n["graph"]), deps)


class ConditionalFile(FileRecord):
    """An if, if-else, while or switch node: its kind, its handle (declared by the graph
    that made it) and its bodies, recursively."""

    __slots__ = ()
    file_types = ("conditional",)
    file_shape = {"conditional": (("kind", "handle", "bodies"), ())}

    def file_declare(self, out) -> None:
        """Its handle. No CUDA call."""
        if self.kind in COND_BODIES:
            out.declare_handle(self.condition)

    def to_record(self, out, where, nid: int) -> dict:
        """Kind, handle and bodies (``cudaGraphNodeGetParams`` for a node read back)."""
        p = self.params
        if p.kind not in COND_BODIES:
            out.refuse(where, "a conditional node of unknown kind (reading it needs CUDA 13.2)")
        return {"kind": p.kind, "handle": out.handle(p.handle.value, where)["handle"],
                "bodies": [out.graph(b, f"{where}, body {i}") for i, b in enumerate(p.bodies)]}

    @classmethod
    def check_fields(cls, c, n, where, handles, depth, nid) -> None:
        """Kind, a handle in scope, the bodies' records. No CUDA call."""
        kind = c.choice(n["kind"], (where, ".kind"), tuple(COND_BODIES))
        h = c.int_(n["handle"], (where, ".handle"), 0, c.U32)
        if h not in handles:
            c.fail((where, ".handle"), f"handle {h} is not declared by this graph or one "
                   "around it")
        lo, hi = COND_BODIES[kind]
        bodies = c.list_(n["bodies"], (where, ".bodies"), hi)
        if len(bodies) < lo:
            c.fail((where, ".bodies"), f"a {kind} node has {lo} to {hi} bodies, not {len(bodies)}")
        for i, b in enumerate(bodies):
            c.graph(b, (where, ".bodies[", i, "]"), handles, depth + 1)

    @classmethod
    def record_graphs(cls, n) -> list:
        """The bodies' records. No CUDA call."""
        return list(n["bodies"])

    @classmethod
    def from_record(cls, graph, deps, n, into):
        """``cudaGraphAddNode`` of the kind, then each body built into the bodies CUDA made."""
        h, kind, bodies = into.handle(n["handle"]), n["kind"], n["bodies"]
        node = (graph.add_switch(h, len(bodies), deps) if kind == "switch"
                else getattr(graph, f"add_{kind}")(h, deps))
        for body, bd in zip(node.bodies, bodies):
            into.fill(body, bd)
        return node
