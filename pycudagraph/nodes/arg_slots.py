"""The one reader of the addresses a kernel's arguments hold.

A kernel argument holds an address only by convention, so every 8-byte slot of an argument
that sits 8-byte aligned in the parameter buffer is read (inside by-value structs too:
library kernels take their pointers inside them), and a slot whose value is at least
:data:`LOWEST` is a :class:`~pycudagraph.nodes.facets.Site`. The audit, ``exe.rebind``,
graphed's rebind plan, graph files and the page all read kernel addresses here, from
``(index, offset, bytes)`` spans of the arguments: :func:`pack_spans` for a launch packed
here, :meth:`CapturedArgs.spans <pycudagraph.nodes.captured_args.CapturedArgs.spans>` for a
kernel node read back from the driver. No CUDA call in this module.
"""

from __future__ import annotations

import struct

from ..errors import ArgumentError
from .facets import Site

__all__ = ["LOWEST", "ArgSpans", "pointer_slots", "arg_site", "arg_sites", "arg_addresses",
           "pack_spans", "patch_slot", "patch_slots", "value_marks", "may_hold"]

_U64 = struct.Struct("<Q")
#: Values below this are never taken for addresses (small numbers, flags).
LOWEST = 1 << 16
#: Kinds of parameters packed here whose bytes are never an address (a double's bits).
_NOT_ADDRESSES = frozenset({"float"})


def _slot_values(data: bytes, offset: int) -> tuple[int, list]:
    """(byte offset of the first slot, the values of every slot) of :func:`pointer_slots`,
    read in one pass: a cast of the bytes in the host's order, which on every host CUDA runs
    on (x86-64, aarch64, ppc64le) is the device's little-endian order."""
    start = (-offset) % 8
    n = (len(data) - start) // 8
    if n <= 0:
        return start, []
    return start, memoryview(data)[start:start + 8 * n].cast("Q").tolist()


def pointer_slots(data: bytes, offset: int):
    """``(byte offset in data, value)`` of each 8-byte slot of an argument whose address in
    the parameter buffer (``offset`` + its position) is 8-byte aligned."""
    start, values = _slot_values(data, offset)
    for j, v in enumerate(values):
        yield start + 8 * j, v


def arg_site(i: int, k: int, value: int, whole: bool) -> Site:
    """The :class:`Site` of argument ``i`` holding ``value`` at byte ``k`` inside it: place
    ``"arg i"`` for an argument of 8 bytes or less (``whole``), ``"arg i +k"`` for a slot of
    a larger one."""
    return Site(f"arg {i}" if whole else f"arg {i} +{k}", k, value, arg=i)


def arg_sites(spans) -> list:
    """The :class:`Site` of every slot of ``spans`` (``(argument index, offset in the
    parameter buffer, bytes)``) holding a value of at least :data:`LOWEST`: place ``"arg i"``
    for an argument of 8 bytes or less, ``"arg i +k"`` for slot ``k`` of a larger one."""
    out = []
    for i, offset, data in spans:
        whole = len(data) <= 8
        start, values = _slot_values(data, offset)
        for j, v in enumerate(values):
            if v >= LOWEST:
                k = start + 8 * j
                out.append(arg_site(i, k, v, whole))
    return out


def arg_addresses(spans) -> list:
    """The values :func:`arg_sites` makes sites of (every slot holding at least
    :data:`LOWEST`), with no :class:`Site` made: a quick look for an address range."""
    out = []
    for _, offset, data in spans:
        out.extend(v for v in _slot_values(data, offset)[1] if v >= LOWEST)
    return out


def value_marks(ranges, most: int = 8):
    """The marks of address ranges ``[(lo, hi), ...]``: for each 64 KiB block the ranges
    touch, the bytes 2..7 (little-endian) that every 8-byte value inside that block holds;
    None when there are more than ``most`` (then :func:`may_hold` would cost more than
    reading the values)."""
    marks: set = set()
    for lo, hi in ranges:
        if hi <= lo:
            continue
        first, last = lo >> 16, (hi - 1) >> 16
        if last - first + 1 + len(marks) > most:
            return None
        marks.update(top.to_bytes(6, "little") for top in range(first, last + 1))
    return tuple(marks)


class ArgSpans:
    """The ``(index, offset, bytes)`` spans of a kernel's arguments kept as the block they
    lie in, one after another (a graph file's argument bytes): ``cuts`` gives each
    argument's ``(index, offset in the parameter buffer, start, end)`` in
    ``data[start:]``, the first starting at 0, each where the one before ends. Read as a
    list of spans (sliced the first time); :func:`may_hold` reads the block whole."""

    __slots__ = ("data", "start", "cuts", "_spans")

    def __init__(self, data: bytes, start: int, cuts: tuple):
        self.data, self.start, self.cuts = data, start, cuts
        self._spans = None

    def spans(self) -> list:
        """The spans, sliced from the block (once)."""
        if self._spans is None:
            d, s = self.data, self.start
            self._spans = [(i, o, d[s + a:s + b]) for i, o, a, b in self.cuts]
        return self._spans

    def block(self) -> bytes:
        """Every argument's bytes, one after another (what joining the spans gives)."""
        return self.data[self.start:self.start + self.cuts[-1][3]] if self.cuts else b""

    def __iter__(self):
        return iter(self.spans())

    def __len__(self) -> int:
        return len(self.cuts)

    def __getitem__(self, k):
        return self.spans()[k]

    def __eq__(self, other) -> bool:  # as the list of spans it stands for
        if isinstance(other, (ArgSpans, list, tuple)):
            return self.spans() == list(other)
        return NotImplemented

    __hash__ = None  # compared by value, as a list

    def __repr__(self) -> str:
        return repr(self.spans())


def may_hold(spans, marks) -> bool:
    """False only when no argument of ``spans`` can hold a value inside the ranges of
    ``marks`` (:func:`value_marks`): such a value's bytes 2..7 are one of the marks, and
    none is anywhere in the arguments' bytes. True says only "look at the values"
    (:func:`arg_addresses`)."""
    data = spans.block() if type(spans) is ArgSpans else b"".join([d for _, _, d in spans])
    for mark in marks:
        if mark in data:
            return True
    return False


def pack_spans(pack) -> list:
    """``(argument index, offset, bytes)`` of each argument of a launch packed here (an
    :class:`~pycudagraph.compile.args.ArgPack`), by the argument's index; the offset is its
    slot's place in the pack, aligned as the kernel's parameter buffer aligns it. Arguments
    whose kind never holds an address (a ``double``) are left out."""
    layout, raw = pack.layout, pack.raw()
    return [(i, off, raw[off:off + p.size]) for i, (p, off)
            in enumerate(zip(layout.params, layout.offsets)) if p.kind not in _NOT_ADDRESSES]


def patch_slot(data: bytes, k: int, value: int) -> bytes:
    """``data`` with the 8-byte slot at byte ``k`` set to ``value``; :class:`ArgumentError`
    when there is no such slot."""
    if not 0 <= k <= len(data) - 8:
        raise ArgumentError(f"no 8-byte slot at byte {k} of a {len(data)}-byte argument")
    out = bytearray(data)
    _U64.pack_into(out, k, value)
    return bytes(out)


def patch_slots(data: bytes, offset: int, old: int, new: int) -> tuple[bytes, int]:
    """``data`` (an argument at ``offset`` in the parameter buffer) with every slot of
    :func:`pointer_slots` holding ``old`` set to ``new``, and how many were."""
    out, n = bytearray(data), 0
    for k, v in pointer_slots(data, offset):
        if v == old:
            _U64.pack_into(out, k, new)
            n += 1
    return bytes(out), n
