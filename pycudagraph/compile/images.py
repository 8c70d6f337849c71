"""Device code images from files and bytes: CUBIN, PTX and fatbin, and what each tells.

``cudaLibraryLoadData`` loads all three; this module tells them apart
(:func:`image_kind`) and reads, without a GPU, which kernels an image holds and their
parameters (:func:`image_entries`): a PTX text's ``.entry`` lines (sizes and types), a
CUBIN's parameter records (sizes), and for a fatbin the same from the CUBIN and PTX
members it carries.

A fatbin (``nvcc -fatbin``, ``fatbinary``) is a container: a 16-byte header (magic
``0xBA55ED50``, version, header size, size of the rest) and members, each a header (kind
1 = PTX, 2 = CUBIN; its header size; its payload size; the architecture; flags) and a
payload. nvcc 12.8 and later compress PTX members (zstd) by default, and all members
with ``-compress-mode=size``; a compressed member cannot be read here (the driver
reads it when it loads the image), so its kernels are learnt from the other members, or
from the loaded image (``cuKernelGetParamInfo``) with ``signature=`` for names and types.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .ptx import CompiledParam, cubin_entries, is_elf, ptx_entries

__all__ = ["FATBIN_MAGIC", "FatbinMember", "image_kind", "fatbin_members", "image_entries",
           "image_arch", "ptx_image", "read_image"]

FATBIN_MAGIC = 0xBA55ED50
_FATBIN_HEAD = struct.Struct("<IHHQ")  # magic, version, header size, size of the members
_MEMBER_HEAD = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_MEMBER_ARCH = 28  # u32: the architecture (90 for sm_90 / compute_90)
_MEMBER_FLAGS = 40  # u64
_KINDS = {1: "ptx", 2: "cubin"}
_SUFFIXES = {".cubin": "cubin", ".ptx": "ptx", ".fatbin": "fatbin", ".fatbinary": "fatbin"}


@dataclass(frozen=True)
class FatbinMember:
    """One member of a fatbin.

    Attributes
    ----------
    kind : str
        ``"ptx"``, ``"cubin"`` or ``"kind N"`` for one not known here.
    arch : int
        The architecture it is for (``90``).
    compressed : bool
        Its payload is compressed (it cannot be read here).
    payload : bytes
        The member's bytes (trailing padding of PTX text removed).
    """

    kind: str
    arch: int
    compressed: bool
    payload: bytes


def image_kind(data: bytes) -> str:
    """``"cubin"``, ``"fatbin"`` or ``"ptx"`` from the first bytes of an image.

    Raises
    ------
    ValueError
        When ``data`` is none of them.
    """
    if is_elf(data):
        return "cubin"
    if len(data) >= _FATBIN_HEAD.size and _FATBIN_HEAD.unpack_from(data)[0] == FATBIN_MAGIC:
        return "fatbin"
    head = data[:4096].lstrip()
    if b".version" in head or b".target" in head or head.startswith(b"//"):
        return "ptx"
    raise ValueError(f"not a CUBIN (ELF), fatbin (magic 0x{FATBIN_MAGIC:X}) or PTX text: "
                     f"it starts with {bytes(data[:8])!r}")


def fatbin_members(data: bytes) -> list[FatbinMember]:
    """The members of a fatbin, in order.

    Raises
    ------
    ValueError
        When the header or a member's header is cut short or inconsistent.
    """
    if len(data) < _FATBIN_HEAD.size:
        raise ValueError("truncated fatbin: shorter than its 16-byte header")
    magic, _version, head, size = _FATBIN_HEAD.unpack_from(data)
    if magic != FATBIN_MAGIC:
        raise ValueError(f"not a fatbin: magic 0x{magic:08X}, expected 0x{FATBIN_MAGIC:08X}")
    end = head + size
    if end > len(data):
        raise ValueError(f"truncated fatbin: its header says {end} bytes, the data has {len(data)}")
    out, pos = [], head
    while pos + _MEMBER_HEAD.size <= end:
        kind, _v, mhead, msize = _MEMBER_HEAD.unpack_from(data, pos)
        if mhead < _MEMBER_FLAGS + 8 or pos + mhead + msize > end:
            raise ValueError(f"fatbin member at byte {pos}: header size {mhead}, payload size "
                             f"{msize} do not fit the {end}-byte fatbin")
        arch = struct.unpack_from("<I", data, pos + _MEMBER_ARCH)[0]
        payload = bytes(data[pos + mhead: pos + mhead + msize])
        name = _KINDS.get(kind, f"kind {kind}")
        readable = (is_elf(payload) if name == "cubin"
                    else name == "ptx" and b".version" in payload[:4096])
        if name == "ptx" and readable:
            payload = payload.rstrip(b"\0")
        out.append(FatbinMember(name, arch, not readable, payload))
        pos += mhead + msize
    return out


def image_entries(data: bytes, kind: str | None = None) -> tuple[dict[str, tuple[CompiledParam, ...]], str]:
    """Kernels of an image and their compiled parameters, and a note on what was not read.

    PTX gives sizes and types, a CUBIN sizes; for a fatbin a PTX member's facts are
    preferred to a CUBIN's. The note is empty when everything was read, else it says
    what was not (compressed fatbin members). No CUDA call.

    Raises
    ------
    ValueError
        When ``data`` is not an image of the kind, or cannot be parsed.
    """
    kind = kind or image_kind(data)
    if kind == "cubin":
        return cubin_entries(data), ""
    if kind == "ptx":
        return ptx_entries(bytes(data).rstrip(b"\0").decode(errors="replace")), ""
    if kind != "fatbin":
        raise ValueError(f"unknown image kind {kind!r}")
    entries: dict[str, tuple[CompiledParam, ...]] = {}
    skipped = []
    members = fatbin_members(data)
    for m in sorted(members, key=lambda m: m.kind != "ptx"):  # PTX first: it has the types
        if m.compressed:
            skipped.append(f"{m.kind} for sm_{m.arch} (compressed)")
            continue
        if m.kind == "ptx":
            found = ptx_entries(m.payload.decode(errors="replace"))
        elif m.kind == "cubin":
            found = cubin_entries(m.payload)
        else:
            skipped.append(m.kind)
            continue
        for name, params in found.items():
            entries.setdefault(name, params)
    note = ""
    if skipped:
        note = (f"fatbin members not read here: {', '.join(skipped)}"
                + ("; kernel names and parameters are learnt when the image is loaded"
                   if not entries else ""))
    return entries, note


def image_arch(data: bytes, kind: str | None = None) -> str:
    """The architecture an image is for (``"sm_90"``, ``"compute_90"`` for PTX; for a
    fatbin its members', joined by ``+``), or ``""`` when it cannot tell. No CUDA call."""
    try:
        kind = kind or image_kind(data)
        if kind == "cubin":
            flags = struct.unpack_from("<I", data, 0x30)[0]
            sm = (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF  # ELF ABI 8 moved it
            return f"sm_{sm}" if sm else ""
        if kind == "ptx":
            m = re.search(rb"^\s*\.target\s+(sm_\w+)", bytes(data[:65536]), re.M)
            return m.group(1).decode().replace("sm_", "compute_", 1) if m else ""
        archs = []
        for m in fatbin_members(data):
            a = f"{'sm' if m.kind == 'cubin' else 'compute'}_{m.arch}"
            if a not in archs:
                archs.append(a)
        return "+".join(archs)
    except (ValueError, struct.error, IndexError):
        return ""


def ptx_image(text: str | bytes) -> bytes:
    """PTX text as ``cudaLibraryLoadData`` takes it: bytes ending in one NUL."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    return data.rstrip(b"\0") + b"\0"


def read_image(path) -> tuple[bytes, str]:
    """The bytes of an image file and its kind, by its suffix (``.cubin``, ``.ptx``,
    ``.fatbin``), checked against its contents.

    Raises
    ------
    ValueError
        When the suffix is not one of them, or the contents are of another kind.
    """
    p = Path(path)
    kind = _SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise ValueError(f"{p}: unknown image suffix {p.suffix!r} (expected .cubin, .ptx, "
                         ".fatbin, or .cu for source)")
    data = p.read_bytes()
    found = image_kind(data)
    if found != kind:
        raise ValueError(f"{p}: the file is named .{kind} but holds a {found}")
    return (ptx_image(data) if kind == "ptx" else data), kind
