"""Slots of a graph file: the named buffers and events a graph points at.

At save, :class:`Slots` turns an address into ``(slot, offset)``; at load, :func:`bind_slots`
checks the buffers given for each slot (kind and size) and :class:`Binding` hands out
the address, or an object standing for memory inside the buffer that keeps the buffer
alive (:class:`DeviceView`, a numpy view for host memory, :class:`Address` for a kernel
argument, :class:`HeldBytes` for a struct argument with addresses in it).
"""

from __future__ import annotations

import bisect

import numpy as np

from .. import _lifetime
from .._cuda import dr, rt
from ..errors import ArgumentError
from ..nodes.copy_params import locate
from ..runtime.memory import PinnedBuffer

__all__ = ["Slots", "Binding", "bind_slots", "DeviceView", "Address", "HeldBytes",
           "is_device_address", "json_value"]


def _is_event(obj) -> bool:
    return isinstance(getattr(obj, "handle", None), rt.cudaEvent_t)


def _check_name(name) -> None:
    if not isinstance(name, str) or not 1 <= len(name) <= 256 or not name.isprintable():
        raise ArgumentError(f"slot names are 1 to 256 printable characters, got {name!r}")


def json_value(v, depth: int = 0):
    """``(value, ok)``: a host-node argument as a JSON value (tuples become lists)."""
    if v is None or isinstance(v, (bool, str)) or (isinstance(v, int) and -(1 << 63) <= v < 1 << 63):
        return v, True
    if isinstance(v, float) and v == v and abs(v) != float("inf"):
        return v, True
    if isinstance(v, (list, tuple)) and depth < 8:
        out = [json_value(x, depth + 1) for x in v]
        return [x for x, _ in out], all(ok for _, ok in out)
    return None, False


def is_device_address(v: int) -> bool:
    """Whether the driver knows ``v`` as device memory (``cuMemGetAddressRange``; a refusal
    is the answer "no", not an error)."""
    if not 0x10000 <= v < 1 << 57:
        return False
    return dr.cuMemGetAddressRange(v)[0] == dr.CUresult.CUDA_SUCCESS


class Slots:
    """The slots of a save: ``table`` (the manifest's), events by handle, address lookup."""

    def __init__(self, slots):
        if slots is None:
            slots = {}
        if not isinstance(slots, dict):
            raise ArgumentError(f"save: slots must be a dict {{name: buffer or Event}}, got "
                                f"{type(slots).__name__}")
        self.table, self.events, ranges = {}, {}, []
        for name, obj in slots.items():
            _check_name(name)
            if _is_event(obj):
                self.events[int(obj.handle)] = name
                self.table[name] = {"kind": "event", "nbytes": 0}
                continue
            addr, on_device, size = locate(obj, f"save: slots[{name!r}]")
            if size is None:
                raise ArgumentError(f"save: slots[{name!r}]: its size is unknown; pass a "
                                    "DeviceBuffer, PinnedBuffer or array")
            self.table[name] = {"kind": "device" if on_device else "host", "nbytes": int(size)}
            ranges.append((addr, addr + int(size), name))
        ranges.sort()
        for (_, a1, an), (b0, _, bn) in zip(ranges, ranges[1:]):
            if b0 < a1:
                raise ArgumentError(f"save: slots {an!r} and {bn!r} overlap: give each buffer once")
        self.ranges = ranges
        self.starts = [r[0] for r in ranges]

    def find(self, addr: int):
        """``{"slot": name, "offset": n}`` for an address in a slot. (Not one past its end: that
        may be the next buffer, one the graph uses without a slot.)"""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            start, end, name = self.ranges[i]
            if addr < end:
                return {"slot": name, "offset": addr - start}
        return None


class DeviceView:
    """Device memory from ``ptr`` for ``nbytes`` bytes (``__cuda_array_interface__``), keeping
    ``base`` (the buffer it lies in, or None for graph-allocated memory) alive."""

    __slots__ = ("base", "ptr", "nbytes", "__weakref__")

    def __init__(self, base, ptr: int, nbytes: int):
        self.base, self.ptr, self.nbytes = base, ptr, nbytes

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3}

    def __repr__(self) -> str:
        return f"<DeviceView 0x{self.ptr:x} {self.nbytes} B>"


class Address(int):
    """A device address (an ``int``) that keeps the buffers it points into alive: a pointer
    argument of a loaded kernel node."""

    def __new__(cls, value: int, keep):
        self = super().__new__(cls, value)
        self.keep = keep
        return self


class HeldBytes(bytes):
    """Argument bytes that keep the buffers their addresses point into alive."""

    def __new__(cls, data: bytes, keep):
        self = super().__new__(cls, data)
        self.keep = keep
        return self


# the ledgers see the buffers these stand for: a deferred free() waits for the graph
_lifetime.register_contents(DeviceView, lambda v: (v.base,))
_lifetime.register_contents(Address, lambda v: v.keep)
_lifetime.register_contents(HeldBytes, lambda v: v.keep)


def _host_bytes(obj) -> np.ndarray:
    if isinstance(obj, PinnedBuffer):
        return obj.array(np.uint8)
    arr = np.asarray(obj)
    if not arr.flags.c_contiguous:
        raise ArgumentError("a host buffer bound to a slot must be C-contiguous")
    return arr.reshape(-1).view(np.uint8)


class Binding:
    """One slot bound at load: the object, its address and size, its kind."""

    __slots__ = ("name", "kind", "obj", "addr", "nbytes")

    def __init__(self, name: str, kind: str, obj, addr: int, nbytes: int):
        self.name, self.kind, self.obj, self.addr, self.nbytes = name, kind, obj, addr, nbytes

    def view(self, offset: int):
        """What a memcpy or memset node takes for memory ``offset`` bytes into the slot."""
        if offset == 0:
            return self.obj
        if self.kind == "device":
            return DeviceView(self.obj, self.addr + offset, self.nbytes - offset)
        return _host_bytes(self.obj)[offset:]


def bind_slots(table: dict, bind) -> dict:
    """``{name: Binding}`` for every slot of a file, checking what ``bind`` gives:
    every slot bound, no unknown name, events for event slots, device or host memory as
    saved and at least the saved size (:func:`~pycudagraph.nodes.copy_params.locate`;
    ``cudaPointerGetAttributes`` for a raw address)."""
    if bind is None:
        bind = {}
    if not isinstance(bind, dict):
        raise ArgumentError(f"load: bind must be a dict {{slot name: buffer or Event}}, got "
                            f"{type(bind).__name__}")
    unknown = [k for k in bind if k not in table]
    if unknown:
        raise ArgumentError(f"load: bind names {', '.join(map(repr, unknown))}, which the file "
                            f"has no slot for (its slots: {', '.join(table) or 'none'})")
    missing = [k for k in table if k not in bind]
    if missing:
        raise ArgumentError(f"load: the file's slot(s) {', '.join(map(repr, missing))} are not "
                            "bound: pass bind={name: buffer, ...} with a buffer for each")
    out = {}
    for name, meta in table.items():
        obj, kind, need = bind[name], meta["kind"], meta["nbytes"]
        where = f"load: bind[{name!r}]"
        if kind == "event":
            if not _is_event(obj):
                raise ArgumentError(f"{where}: the slot is an event; got {type(obj).__name__}")
            out[name] = Binding(name, kind, obj, 0, 0)
            continue
        addr, on_device, size = locate(obj, where)
        if on_device != (kind == "device"):
            raise ArgumentError(f"{where}: the slot is {kind} memory; the buffer given is "
                                f"{'device' if on_device else 'host'} memory")
        if size is not None and size < need:
            raise ArgumentError(f"{where}: the slot was saved with {need} bytes; the buffer "
                                f"given has {size}")
        out[name] = Binding(name, kind, obj, addr, need if size is None else size)
    return out
