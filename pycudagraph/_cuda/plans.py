"""Plans: what the compiled hot calls read about a kernel's arguments (see ``fast.py``).

A plan is bytes: a head (:data:`PLAN_HEAD`: the ``CUfunction``, its 1-D limits, the
parameter count, the pack size, whether every kind is one the C code converts) and one
:data:`PLAN_SLOT` (offset, kind) per parameter; ``_native_convert.c``'s ``plan_of`` reads it.
The kind codes are ``_native.h``'s. No CUDA call, nothing compiled here.
"""

from __future__ import annotations

import struct

__all__ = ["PLAN_HEAD", "PLAN_SLOT", "layout_plan", "kernel_plan"]

#: func, block1, grid1, smem (limits; 0: not known), n, size, simple
PLAN_HEAD = struct.Struct("<Q6I")
#: per parameter: offset of its slot, kind (K_*)
PLAN_SLOT = struct.Struct("<2I")
# Kinds the compiled route packs (the K_* codes of _native.h); others go to the ctypes route.
K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64, K_F32, K_F64, K_BOOL, K_PTR, K_OTHER = range(13)
_INT_KINDS = {"b": K_I8, "B": K_U8, "h": K_I16, "H": K_U16, "i": K_I32, "I": K_U32,
              "q": K_I64, "Q": K_U64}


def _kind(p) -> int:
    if p.parts or p.convert is not None:  # several kernel parameters, or a converter of its own
        return K_OTHER
    if p.kind == "pointer":
        return K_PTR
    if p.kind == "bool":
        return K_BOOL
    if p.kind == "float":
        return K_F32 if p.fmt == "f" else K_F64
    if p.kind == "int":
        return _INT_KINDS.get(p.fmt, K_OTHER)
    return K_OTHER  # half, bfloat16, vectors, structs, handles: packed in Python


def layout_plan(params, offsets, size: int, hidden: int = 0) -> bytes:
    """The plan of a :class:`~pycudagraph.compile.args.Layout`: its slots, no function. With
    ``hidden`` kernel parameters no argument fills, whole packs are made in Python only."""
    kinds = [_kind(p) for p in params]
    head = PLAN_HEAD.pack(0, 0, 0, 0, len(kinds), size, K_OTHER not in kinds and not hidden)
    return head + b"".join(PLAN_SLOT.pack(off, k) for off, k in zip(offsets, kinds))


def kernel_plan(plan: bytes, func: int, block1: int = 0, grid1: int = 0, smem: int = 0) -> bytes:
    """A layout's plan naming the ``CUfunction`` ``func`` and its 1-D limits (0: not known)."""
    return struct.pack("<Q3I", func, block1, grid1, smem) + plan[20:]
