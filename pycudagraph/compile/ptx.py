"""What NVRTC compiled: kernel entries and their parameters, read from PTX or a CUBIN.

The source parse in :mod:`.signature` gives parameter *names* and intent (pointer or
integer); the compiled facts here give the *truth*: which kernels exist after the
preprocessor, templates and attributes, and the size, alignment and class of every
parameter. :func:`ptx_entries` reads the ``.entry`` directives of PTX text (NVRTC
keeps the PTX of a program compiled for a real ``sm_XX``; ``nvrtcGetPTX``).
:func:`cubin_entries` reads the ``EIATTR_KPARAM_INFO`` records of a CUBIN's
``.nv.info.<kernel>`` sections (sizes only) for a module made from a CUBIN alone.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

__all__ = ["CompiledParam", "ptx_entries", "cubin_entries", "is_elf"]

# PTX fundamental type -> (size in bytes, class)
_PTX_TYPES: dict[str, tuple[int, str]] = {}
for _t, _cls in (("u", "int"), ("s", "int"), ("b", "int"), ("f", "float")):
    for _bits in (8, 16, 32, 64):
        _PTX_TYPES[f"{_t}{_bits}"] = (_bits // 8, _cls)
_PTX_TYPES["pred"] = (1, "int")


@dataclass(frozen=True)
class CompiledParam:
    """One parameter of a compiled kernel entry.

    Attributes
    ----------
    size : int
        Bytes the parameter occupies.
    align : int
        Its alignment.
    cls : str
        ``"int"`` (an integer register: ints, bools, enums, pointers), ``"float"``,
        ``"pointer"`` (PTX said ``.ptr``), ``"bytes"`` (an aggregate: structs, vectors,
        half types) or ``"unknown"`` (read from a CUBIN, which records sizes only).
    ptx : str
        How the compiler declared it (``".u64"``, ``".align 8 .b8 [16]"``).
    offset : int or None
        Where it starts in the kernel's parameter block (each parameter at the next
        multiple of its alignment after the one before; a CUBIN records it).
    """

    size: int
    align: int
    cls: str
    ptx: str
    offset: int | None = None

    def describe(self) -> str:
        what = {"int": "integer", "float": "floating-point", "pointer": "pointer",
                "bytes": "aggregate", "unknown": "parameter"}[self.cls]
        return f"{self.size}-byte {what} ({self.ptx})"


_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)")
_PARAM = re.compile(r"\.param\s+(.*?)\s*([A-Za-z_$%][\w$]*)\s*(?:\[(\d+)\])?\s*$", re.S)


def _ptx_param(text: str) -> CompiledParam:
    m = _PARAM.match(text.strip())
    if not m:
        raise ValueError(f"unexpected PTX parameter declaration {text.strip()!r}")
    words = m.group(1).split()
    count = int(m.group(3)) if m.group(3) else 1
    align, size, cls, pointer = 0, None, None, False
    i = 0
    while i < len(words):
        word = words[i].lstrip(".")
        if word == "align" and i + 1 < len(words):
            align = int(words[i + 1])
            i += 1
        elif word == "ptr":
            pointer = True
        elif word in _PTX_TYPES:
            size, cls = _PTX_TYPES[word]
        i += 1
    if size is None:
        raise ValueError(f"no PTX type in parameter declaration {text.strip()!r}")
    decl = " ".join(words) + (f" [{count}]" if m.group(3) else "")
    if pointer:  # `.ptr .global .align N`: N is the pointee's alignment
        return CompiledParam(size, size, "pointer", decl)
    if m.group(3) or align > size:
        return CompiledParam(size * count, align or size, "bytes", decl)
    return CompiledParam(size, align or size, "pointer" if pointer else cls, decl)


def ptx_entries(ptx: str) -> dict[str, tuple[CompiledParam, ...]]:
    """Every ``.entry`` of a PTX module, by its (possibly mangled) name, in order.

    Raises
    ------
    ValueError
        When an entry's parameter list cannot be read.
    """
    ptx = re.sub(r"//[^\n]*", "", ptx)
    out = {}
    for m in _ENTRY.finditer(ptx):
        body = m.group(2).strip()
        params = [p for p in body.split(",") if p.strip()] if body else []
        placed, pos = [], 0
        for c in (_ptx_param(p) for p in params):
            pos = (pos + c.align - 1) // c.align * c.align
            placed.append(CompiledParam(c.size, c.align, c.cls, c.ptx, pos))
            pos += c.size
        out[m.group(1)] = tuple(placed)
    return out


# ----------------------------------------------------------------------------------
# CUBIN (ELF64) reader: section names and the .nv.info.<kernel> attribute records

_ELF_MAGIC = b"\x7fELF"
_EIATTR_KPARAM_INFO = 0x17  # ordinal u16, offset u16, flags u32 (size in bits 18..31)
_EIATTR_KPARAM_INFO_V2 = 0x45  # ordinal u16, offset u16, size u32: large parameter blocks
_EIFMT_SVAL = 0x04


def is_elf(data: bytes) -> bool:
    """True when ``data`` starts like a 64-bit little-endian ELF image (a CUBIN)."""
    return len(data) >= 64 and data[:4] == _ELF_MAGIC and data[4] == 2 and data[5] == 1


def _sections(data: bytes) -> list[tuple[str, bytes]]:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = []
    for i in range(shnum):
        base = shoff + i * shentsize
        name, _typ, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", data, base)
        heads.append((name, off, size))
    _, stroff, strsize = heads[shstrndx]
    strtab = data[stroff: stroff + strsize]
    out = []
    for name, off, size in heads:
        end = strtab.find(b"\0", name)
        out.append((strtab[name:end].decode(errors="replace"), data[off: off + size]))
    return out


def cubin_entries(cubin: bytes) -> dict[str, tuple[CompiledParam, ...]]:
    """Kernel parameters recorded in a CUBIN: size and offset order, no types.

    Raises
    ------
    ValueError
        When ``cubin`` is not a 64-bit ELF image or its records are cut short.
    """
    if not is_elf(cubin):
        raise ValueError("not a CUBIN: the data does not start with a 64-bit ELF header")
    try:
        sections = _sections(cubin)
    except struct.error as exc:
        raise ValueError(f"truncated CUBIN: {exc}") from None
    out = {}
    for name, body in sections:
        if not name.startswith(".nv.info."):
            continue
        params: dict[int, tuple[int, int]] = {}
        pos = 0
        while pos + 4 <= len(body):
            fmt, attr, size = struct.unpack_from("<BBH", body, pos)
            pos += 2
            pos += 2
            if fmt != _EIFMT_SVAL:  # EIFMT_NVAL / BVAL / HVAL: the value fits the header
                continue
            if attr == _EIATTR_KPARAM_INFO and size >= 12:
                ordinal, offset, flags = struct.unpack_from("<4xHHI", body, pos)
                params[ordinal] = (offset, (flags >> 18) & 0x3FFF)
            elif attr == _EIATTR_KPARAM_INFO_V2 and size >= 12:
                ordinal, offset, nbytes = struct.unpack_from("<4xHHI", body, pos)
                params[ordinal] = (offset, nbytes & 0xFFFF)
            pos += size
        out[name[len(".nv.info."):]] = tuple(
            CompiledParam(size, 1, "unknown", f"{size} bytes at offset {offset}", offset)
            for _, (offset, size) in sorted(params.items()))
    return out
