"""Kernel signatures: C parameter types parsed from ``extern "C" __global__`` source.

A :class:`Param` says how one kernel parameter is stored: its C type, size, alignment
and the ``struct`` format that packs a Python value into it. :func:`parse_kernels`
reads every ``__global__`` function of a CUDA C++ source; :func:`parse_params` reads a
parameter list such as ``"float* y, float a, int n"`` (the ``signature=`` argument).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Param", "KernelSignature", "parse_kernels", "parse_params", "param_from_ctype",
           "HANDLE_TYPES"]

# C type -> (struct format, size). Alignment equals size for these.
_SCALARS: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "char": ("b", 1), "signed char": ("b", 1), "unsigned char": ("B", 1),
    "int8_t": ("b", 1), "uint8_t": ("B", 1),
    "short": ("h", 2), "unsigned short": ("H", 2), "int16_t": ("h", 2), "uint16_t": ("H", 2),
    "int": ("i", 4), "unsigned int": ("I", 4), "int32_t": ("i", 4), "uint32_t": ("I", 4),
    "long": ("q", 8), "unsigned long": ("Q", 8),  # LP64: device long is 64-bit on Linux
    "long long": ("q", 8), "unsigned long long": ("Q", 8),
    "int64_t": ("q", 8), "uint64_t": ("Q", 8), "size_t": ("Q", 8), "ptrdiff_t": ("q", 8),
    "float": ("f", 4), "double": ("d", 8),
    "half": ("e", 2), "__half": ("e", 2),
    "__nv_bfloat16": ("H", 2), "nv_bfloat16": ("H", 2),
    "cudaTextureObject_t": ("Q", 8), "cudaSurfaceObject_t": ("Q", 8),
    "CUtexObject": ("Q", 8), "CUsurfObject": ("Q", 8),
}

# CUDA graph handles device code takes as arguments (64-bit values): packed from the
# pycudagraph objects that stand for them (ConditionalHandle, GraphExec, a device node).
HANDLE_TYPES = ("cudaGraphConditionalHandle", "cudaGraphExec_t", "cudaGraphDeviceNode_t")

# CUDA vector types: (element format, count, alignment)
VECTOR_TYPES: dict[str, tuple[str, int, int]] = {}
for _base, _fmt, _size in (("char", "b", 1), ("uchar", "B", 1), ("short", "h", 2),
                           ("ushort", "H", 2), ("int", "i", 4), ("uint", "I", 4),
                           ("float", "f", 4), ("longlong", "q", 8), ("ulonglong", "Q", 8),
                           ("double", "d", 8)):
    for _n in (2, 3, 4):
        _align = _size * (_n if _n != 3 else 1)
        VECTOR_TYPES[f"{_base}{_n}"] = (_fmt, _n, min(_align, 16))

_INT_KINDS = set("bBhHiIqQ")
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct",
               "__grid_constant__", "typename", "class"}
_TYPE_WORDS = {"unsigned", "signed", "long", "short", "int", "char"}


@dataclass(frozen=True)
class Param:
    """One kernel parameter.

    Attributes
    ----------
    index : int
        Position in the parameter list.
    name : str
        Parameter name from the source (``"arg{index}"`` when unnamed).
    ctype : str
        The C type as written, without qualifiers (``"float*"``, ``"int"``, ``"MyStruct"``).
    kind : str
        ``"pointer"``, ``"int"``, ``"float"``, ``"bool"``, ``"half"``, ``"bfloat16"``,
        ``"vector"``, ``"handle"`` (:data:`HANDLE_TYPES`) or ``"struct"``.
    size : int or None
        Size in bytes (``None`` for a struct whose size is not known yet).
    align : int
        Alignment in bytes.
    fmt : str
        ``struct`` format of one value (``"Ns"`` raw bytes for structs and vectors).
    """

    index: int
    name: str
    ctype: str
    kind: str
    size: int | None
    align: int
    fmt: str

    def with_size(self, size: int) -> "Param":
        """This struct parameter with its size known (from the kernel image or a value)."""
        align = 16 if size % 16 == 0 else 8 if size % 8 == 0 else 4 if size % 4 == 0 else 1
        return Param(self.index, self.name, self.ctype, self.kind, size, align, f"{size}s")

    def describe(self) -> str:
        return f"{self.ctype} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` function found in source."""

    name: str
    params: tuple[Param, ...]
    extern_c: bool

    def text(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


def _normalize_type(words: list[str]) -> str:
    text = " ".join(words)
    text = re.sub(r"\bsigned\s+(char)\b", r"signed \1", text)
    text = re.sub(r"\b(long|short)\s+int\b", r"\1", text)
    text = re.sub(r"\bunsigned\s+long\s+long\s+int\b", "unsigned long long", text)
    text = re.sub(r"\bunsigned\s+long\s+int\b", "unsigned long", text)
    text = re.sub(r"\bunsigned\s+short\s+int\b", "unsigned short", text)
    if text == "unsigned":
        text = "unsigned int"
    if text == "signed":
        text = "int"
    if text.startswith("signed ") and text != "signed char":
        text = text[len("signed "):]
    return text


def param_from_ctype(index: int, name: str, ctype: str) -> Param:
    """Build a :class:`Param` from a normalised C type string."""
    if ctype.endswith("*"):
        return Param(index, name, ctype, "pointer", 8, 8, "Q")
    if ctype in HANDLE_TYPES:
        return Param(index, name, ctype, "handle", 8, 8, "Q")
    if ctype in _SCALARS:
        fmt, size = _SCALARS[ctype]
        if ctype == "bool":
            kind = "bool"
        elif fmt in ("f", "d"):
            kind = "float"
        elif fmt == "e":
            kind = "half"
        elif "bfloat16" in ctype:
            kind = "bfloat16"
        else:
            kind = "int"
        return Param(index, name, ctype, kind, size, size, fmt)
    if ctype in VECTOR_TYPES:
        efmt, count, align = VECTOR_TYPES[ctype]
        esize = {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "f": 4, "q": 8, "Q": 8, "d": 8}[efmt]
        size = esize * count
        return Param(index, name, ctype, "vector", size, align, f"{size}s")
    return Param(index, name, ctype, "struct", None, 8, "")


def _parse_one(index: int, text: str) -> Param:
    text = text.strip()
    if "=" in text:
        raise ValueError(f"default values are not allowed in kernel parameters: {text!r}")
    stars = text.count("*")
    if "&" in text:
        raise ValueError(f"kernel parameters cannot be references: {text!r}")
    array = re.search(r"\[[^\]]*\]\s*$", text)
    if array:  # `float x[]` decays to a pointer
        stars += 1
        text = text[: array.start()]
    tokens = [t for t in re.split(r"[\s*]+", text) if t and t not in _QUALIFIERS]
    if not tokens:
        raise ValueError(f"cannot read a type from kernel parameter {text!r}")
    name = None
    if len(tokens) > 1 and tokens[-1] not in _TYPE_WORDS and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]):
        name = tokens.pop()
    ctype = _normalize_type(tokens)
    if stars:
        ctype = ctype + "*" * stars
    return param_from_ctype(index, name or f"arg{index}", ctype)


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    last = "".join(cur).strip()
    if last:
        parts.append(last)
    return [p for p in parts if p.strip()]


def parse_params(text: str) -> tuple[Param, ...]:
    """Parse a C parameter list: ``"float* y, float a, int n"`` or ``"(float*, float, int)"``.

    Raises
    ------
    ValueError
        When a parameter cannot be read.
    """
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    if text.strip() in ("", "void"):
        return ()
    return tuple(_parse_one(i, part) for i, part in enumerate(_split_params(text)))


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


_EXTERN_BLOCK = re.compile(r'extern\s+"C"\s*\{')
_GLOBAL = re.compile(
    r'(extern\s+"C"\s+)?(?:static\s+)?__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
    r'void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(([^)]*)\)')


def _extern_c_ranges(source: str) -> list[tuple[int, int]]:
    ranges = []
    for m in _EXTERN_BLOCK.finditer(source):
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        ranges.append((m.end(), i))
    return ranges


def parse_kernels(source: str) -> dict[str, KernelSignature]:
    """Every ``__global__ void`` function in ``source``, by name.

    Kernels marked ``extern "C"`` (directly or inside an ``extern "C" { }`` block) keep
    their name in the compiled image; others are C++-mangled and flagged
    ``extern_c=False``. Templates are skipped.
    """
    clean = _strip_comments(source)
    blocks = _extern_c_ranges(clean)
    found = {}
    for m in _GLOBAL.finditer(clean):
        before = clean[max(0, m.start() - 200): m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*$", before):
            continue
        extern_c = bool(m.group(1)) or any(a <= m.start() < b for a, b in blocks)
        name = m.group(2)
        found[name] = KernelSignature(name, parse_params(m.group(3)), extern_c)
    return found
