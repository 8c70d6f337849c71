"""Kernel signatures: C parameter types parsed from ``extern "C" __global__`` source.

A :class:`Param` says how one kernel parameter is stored: its C type, size, alignment
and the ``struct`` format that packs a Python value into it. :func:`parse_kernels`
reads every ``__global__`` function of a CUDA C++ source; :func:`parse_params` reads a
parameter list such as ``"float* y, float a, int n"`` (the ``signature=`` argument).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from .param_text import (lenient_params, plain_declarator, pointer_declarator, signature_text,
                         split_params, without_attributes)

__all__ = ["Param", "KernelSignature", "parse_kernels", "parse_params", "param_from_ctype",
           "template_kernels", "HANDLE_TYPES"]

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
    "__nv_fp8_e4m3": ("B", 1), "__nv_fp8_e5m2": ("B", 1),
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
        ``"fp8"`` (``__nv_fp8_e4m3``, ``__nv_fp8_e5m2``), ``"vector"``, ``"handle"`` (:data:`HANDLE_TYPES`) or ``"struct"``.
    size : int or None
        Size in bytes (``None`` for a struct whose size is not known yet).
    align : int
        Alignment in bytes.
    fmt : str
        ``struct`` format of one value (``"Ns"`` raw bytes for structs and vectors).
    parts : tuple of (offset, size)
        For one argument that fills several kernel parameters (a Numba array is five
        integers and its shape and strides): where each parameter lies in the value's
        bytes. Empty for the usual one argument, one parameter.
    convert : callable, optional
        Turns the Python value into what ``fmt`` packs, instead of the converter of
        ``kind`` (kernels made elsewhere: a Numba array's fields, a Triton pointer that
        must stay 16-byte aligned).
    """

    index: int
    name: str
    ctype: str
    kind: str
    size: int | None
    align: int
    fmt: str
    parts: tuple[tuple[int, int], ...] = ()
    convert: Callable | None = field(default=None, compare=False, repr=False)

    def with_size(self, size: int) -> "Param":
        """This struct parameter with its size known (from the kernel image or a value)."""
        align = 16 if size % 16 == 0 else 8 if size % 8 == 0 else 4 if size % 4 == 0 else 1
        return Param(self.index, self.name, self.ctype, self.kind, size, align, f"{size}s")

    def describe(self) -> str:
        return f"{self.ctype} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` function found in source.

    ``error`` says why its parameter list could not be read (``params`` is then empty;
    ``parts``: :func:`~.param_text.lenient_params`); other kernels are not affected.
    """

    name: str
    params: tuple[Param, ...]
    extern_c: bool
    error: str | None = None
    template: tuple[str, ...] | None = None  # a template's parameter names (typename T, int N)
    parts: tuple[tuple[str, Param | None], ...] = ()  # per parameter, where the list is unreadable

    def text(self) -> str:
        return f"{self.name}({signature_text(self.params)})"


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
        elif ctype.startswith("__nv_fp8_"):
            kind = "fp8"
        else:
            kind = "int"
        return Param(index, name, ctype, kind, size, size, fmt)
    if ctype in VECTOR_TYPES:
        efmt, count, align = VECTOR_TYPES[ctype]
        esize = {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "f": 4, "q": 8, "Q": 8, "d": 8}[efmt]
        size = esize * count
        return Param(index, name, ctype, "vector", size, align, f"{size}s")
    return Param(index, name, ctype, "struct", None, 8, "")


def _resolve(ctype: str, aliases: dict[str, str] | None, depth: int = 0) -> str:
    """Replace a typedef / using / enum / macro name by the type it stands for."""
    if not aliases or depth > 8:
        return ctype
    stars = len(ctype) - len(ctype.rstrip("*"))
    base = ctype[: len(ctype) - stars] if stars else ctype
    if base not in aliases:
        return ctype
    inner = _parse_one(0, aliases[base] + " __alias_name__", None).ctype
    return _resolve(inner, aliases, depth + 1) + "*" * stars


_PLAIN_WORDS = re.compile(r"(?:[A-Za-z_]\w*\b|[\s*])+")  # whole words, spaces and stars only


def _plain_param(index: int, text: str) -> Param | None:
    """``"const float* x"``, ``"int n"``: a type word and a name, with qualifiers and
    stars, read as :func:`_parse_one` reads it, with no declarator to look for; else None."""
    if not _PLAIN_WORDS.fullmatch(text):
        return None
    words = [w for w in text.replace("*", " ").split() if w not in _QUALIFIERS]
    if len(words) != 2 or words[1] in _TYPE_WORDS or words[0] in ("signed", "unsigned"):
        return None
    return param_from_ctype(index, words[1], words[0] + "*" * text.count("*"))


def _parse_one(index: int, text: str, aliases: dict[str, str] | None = None,
               defaults: bool = False) -> Param:
    text = text.strip()
    plain = None if aliases else _plain_param(index, text)
    if plain is not None:  # (the common case: the same Param as the reading below)
        return plain
    if "=" in text:
        if not defaults:
            raise ValueError(f"default values are not allowed in kernel parameters: {text!r}")
        text = text[: text.index("=")].strip()  # a launch passes every argument anyway
    text = without_attributes(text)  # [[maybe_unused]], __attribute__((...))
    pointer = pointer_declarator(text)  # `void (*cb)(int)`, `int (*rows)[4]`: an address
    if pointer:
        return Param(index, pointer[1] or f"arg{index}", pointer[0], "pointer", 8, 8, "Q")
    text = plain_declarator(text)  # `float (*p)`, `int (n)`
    if "(" in text:
        raise ValueError(f"cannot read parameter {text!r} (decltype, templates and other "
                         "expressions in a type are not parsed)")
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
    if "<" in text or any(not re.fullmatch(r"[A-Za-z_][\w:]*", t) for t in tokens):
        raise ValueError(f"cannot read a C type from kernel parameter {text!r}")
    ctype = _resolve(_normalize_type(tokens) + "*" * stars, aliases)
    return param_from_ctype(index, name or f"arg{index}", ctype)


def parse_params(text: str, aliases: dict[str, str] | None = None,
                 defaults: bool = False) -> tuple[Param, ...]:
    """Parse a C parameter list: ``"float* y, float a, int n"`` or ``"(float* y, float a, int n)"``.

    Parameters
    ----------
    aliases : dict, optional
        ``typedef`` / ``using`` / ``enum`` / macro names -> the type text they stand for.
    defaults : bool
        Accept (and ignore) default values, as a kernel definition may have them.

    Raises
    ------
    ValueError
        When a parameter cannot be read, or a slot is empty (``"float*, , int"``).
    """
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    if text.strip() in ("", "void"):
        return ()
    parts = split_params(text, keep_empty=True)
    empty = [i for i, part in enumerate(parts) if not part.strip()]
    if empty:  # "float*, , int": a slot a typo left out, not one parameter fewer
        raise ValueError(f"parameter {empty[0]} (counting from 0) of {len(parts)} is empty")
    return tuple(_parse_one(i, part, aliases, defaults) for i, part in enumerate(parts))


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([A-Za-z_][\w \t]*\**)[ \t]*$", re.M)
_TYPEDEF = re.compile(r"\btypedef\s+([^;{}()\[\]]+?)\s*;")
_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}()]+?)\s*;")
_ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)\s*(?::\s*([^{;]+?))?\s*[{;]")
_EXTERN_BLOCK = re.compile(r'extern\s+"C"\s*\{')
_EXTERN_C = re.compile(r'extern\s+"C"')
_WITH_ARGS = {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__",
              "__declspec", "alignas", "__align__"}
_IDENT = re.compile(r"\s*([A-Za-z_]\w*)")


def source_aliases(source: str) -> dict[str, str]:
    """Type names a source defines: ``typedef``, ``using``, ``enum`` and type-like macros."""
    clean = _strip_comments(source)
    aliases = {m.group(1): m.group(2) for m in _DEFINE.finditer(clean)}
    for m in _TYPEDEF.finditer(clean):
        words = m.group(1).replace("*", " * ").split()
        if len(words) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", words[-1]):
            aliases[words[-1]] = " ".join(words[:-1])
    for m in _USING.finditer(clean):
        aliases[m.group(1)] = m.group(2)
    for m in _ENUM.finditer(clean):
        aliases[m.group(1)] = (m.group(2) or "int").strip()
    return aliases


def _closing(text: str, i: int) -> int:
    """Index just past the parenthesis that closes the one at ``text[i]``."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j + 1
    return len(text)


def _kernel_at(text: str, pos: int) -> tuple[str, str] | None:
    """After a ``__global__``: skip return type and attributes; (name, parameter text)."""
    while True:
        m = _IDENT.match(text, pos)
        if not m:
            return None
        word, pos = m.group(1), m.end()
        rest = text[pos:].lstrip()
        if word in _WITH_ARGS and rest.startswith("("):
            pos = _closing(text, text.index("(", pos))
        elif rest.startswith("("):
            start = text.index("(", pos)
            return word, text[start + 1: _closing(text, start) - 1]
        elif word != "void" and not word.startswith("__") and word not in ("static", "inline"):
            return None  # a return type other than void: not a kernel we can call


def _extern_c_ranges(source: str) -> list[tuple[int, int]]:
    ranges = []
    for m in _EXTERN_BLOCK.finditer(source):
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        ranges.append((m.end(), i))
    return ranges


def kernel_candidates(source: str) -> dict[str, list[KernelSignature]]:
    """Every ``__global__ void`` definition or declaration in ``source``, by name.

    A name may have several candidates (``#if`` branches); the compiled facts decide
    between them (:mod:`.reconcile`). A parameter list that cannot be read gives a
    :class:`KernelSignature` with ``error`` set instead of failing the whole source.
    Templates are skipped (their compiled names are mangled; see :func:`template_kernels`).
    """
    return _scan(source, templates=False)


def template_kernels(source: str) -> dict[str, list[KernelSignature]]:
    """Every ``template <...> __global__ void`` kernel in ``source``, by its bare name.

    Their ``template`` holds the template parameter names, so a parameter written ``T``
    can be read once an instantiation (``axpy<float>``) says what ``T`` is.
    """
    return _scan(source, templates=True)


_TEMPLATE_HEAD = re.compile(r"\btemplate\s*<(.*)>", re.S)


def _template_names(prefix: str) -> tuple[str, ...]:
    m = _TEMPLATE_HEAD.search(prefix)
    if not m:
        return ()
    names = []
    for part in split_params(m.group(1)):
        words = re.findall(r"[A-Za-z_]\w*", part.split("=")[0])
        names.append(words[-1] if words else "")
    return tuple(names)


def _scan(source: str, templates: bool) -> dict[str, list[KernelSignature]]:
    aliases = source_aliases(source)
    clean = _DIRECTIVE.sub(lambda m: " " * len(m.group(0)), _strip_comments(source))
    blocks = _extern_c_ranges(clean)
    found: dict[str, list[KernelSignature]] = {}
    for m in re.finditer(r"\b__global__\b", clean):
        hit = _kernel_at(clean, m.end())
        if hit is None:
            continue
        name, text = hit
        prefix = clean[max(clean.rfind(c, 0, m.start()) for c in ";{}") + 1: m.start()]
        template = _template_names(prefix) if re.search(r"\btemplate\b", prefix) else None
        if (template is not None) != templates:
            continue
        extern_c = bool(_EXTERN_C.search(prefix)) or any(a <= m.start() < b for a, b in blocks)
        try:
            sig = KernelSignature(name, parse_params(text, aliases, defaults=True), extern_c,
                                  template=template)
        except ValueError as exc:
            parts = lenient_params(split_params(text), lambda i, t: _parse_one(
                i, t, aliases, defaults=True), _QUALIFIERS | _TYPE_WORDS)
            sig = KernelSignature(name, (), extern_c, str(exc), template=template, parts=parts)
        found.setdefault(name, []).append(sig)
    return found


def parse_kernels(source: str) -> dict[str, KernelSignature]:
    """Every ``__global__ void`` function in ``source``, by name (the last candidate).

    Kernels marked ``extern "C"`` (directly or inside an ``extern "C" { }`` block) keep
    their name in the compiled image; others are C++-mangled and flagged
    ``extern_c=False``. Templates are skipped. The source alone can be fooled by the
    preprocessor; :class:`~pycudagraph.compile.program.Module` checks it against what NVRTC
    compiled.
    """
    return {name: sigs[-1] for name, sigs in kernel_candidates(source).items()}
