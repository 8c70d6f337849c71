"""C++ kernel names: name expressions (``"ns::axpy<float>"``) and mangled names.

A kernel that is not ``extern "C"`` has a mangled name in the image
(``_ZN2ns4axpyIfEEvPT_S1_i``). For a program compiled here NVRTC says which, given the
C++ expression (``nvrtcAddNameExpression`` / ``nvrtcGetLoweredName``: see
:mod:`.nvrtc_compile`); an image from elsewhere is asked by the mangled name itself.
Either way the source, when there is one, still gives the parameter names: the
template's parameters are found by the kernel's bare name (``axpy``), its template
parameters replaced by the expression's arguments (``T`` -> ``float``), and the result
checked against the compiled parameters (:func:`~.reconcile.reconcile`). No CUDA call.
"""

from __future__ import annotations

import re

from .ptx import CompiledParam
from .reconcile import reconcile
from .signature import KernelSignature, Param, param_from_ctype

__all__ = ["is_cxx_name", "bare_name", "template_args", "mangled_scope", "mangled_bare_name",
           "mangled_template_args", "mangled_operation", "short_kernel_name", "cxx_params"]

_IDENT = re.compile(r"[A-Za-z_]\w*")


def is_cxx_name(name: str) -> bool:
    """True for a C++ name expression (a qualifier, template arguments, a signature),
    False for a plain identifier or a mangled name."""
    return any(c in name for c in "<>:(),& ") and not name.startswith("_Z")


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _template_part(expr: str) -> tuple[str, str | None]:
    """(the expression before its last top-level ``<...>``, the text inside it)."""
    text = expr.strip()
    if text.startswith("&"):
        text = text[1:].strip()
    if "(" in text:  # a cast such as (void(*)(float*))axpy: the name is after it
        text = text[text.rfind(")") + 1:].strip() or text
    if not text.endswith(">"):
        return text, None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i], text[i + 1:-1]
    return text, None


def bare_name(expr: str) -> str:
    """The kernel's own identifier: ``"ns::axpy<float>"`` -> ``"axpy"``."""
    head, _ = _template_part(expr)
    names = _IDENT.findall(head.split("::")[-1])
    return names[-1] if names else head


def template_args(expr: str) -> list[str]:
    """The template arguments of an expression: ``"axpy<float, 4>"`` -> ``["float", "4"]``."""
    _, inside = _template_part(expr)
    return _split_top(inside) if inside else []


_DIGITS = frozenset("0123456789")


def _number(sym: str, i: int) -> tuple[int, int]:
    """(the decimal number at ``sym[i]``, the index after it); 0 where none starts there
    (ASCII digits only: ``str.isdigit`` takes ``²`` too, which ``int`` refuses)."""
    j = i
    while j < len(sym) and sym[j] in _DIGITS:
        j += 1
    return (int(sym[i:j]) if j > i else 0), j


def mangled_scope(symbol: str) -> list[str]:
    """The qualified name of an Itanium-mangled function, as its parts
    (``_ZN2ns4axpyIfEEv...`` -> ``["ns", "axpy"]``); empty when it cannot be read simply
    (no ``_Z``, ``std::`` substitutions ...)."""
    return _scope(symbol)[0]


#: Itanium codes of the builtin types a kernel template is instantiated with.
_BUILTIN = {"v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
            "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long",
            "m": "unsigned long", "x": "long long", "y": "unsigned long long", "f": "float",
            "d": "double", "e": "long double"}


def mangled_template_args(symbol: str) -> list[str]:
    """The template arguments of an Itanium-mangled function as C++ text
    (``_ZN2ns4fillIdLi4EEEv...`` -> ``["double", "4"]``): builtin types, named classes
    and integer literals; empty when there are none or they cannot be read simply."""
    parts, i = _scope(symbol)
    if not parts or i >= len(symbol) or symbol[i] != "I":
        return []
    i, args = i + 1, []
    while i < len(symbol) and symbol[i] != "E":
        c = symbol[i]
        if c in _BUILTIN:
            args.append(_BUILTIN[c])
            i += 1
        elif c == "L" and i + 1 < len(symbol) and symbol[i + 1] in _BUILTIN:
            end = symbol.find("E", i)
            value = symbol[i + 2: end] if end > 0 else ""
            value = "-" + value[1:] if value.startswith("n") else value
            digits = value.lstrip("-")
            if not digits or not set(digits) <= _DIGITS:
                return []
            args.append(value)
            i = end + 1
        elif c in _DIGITS:
            n, j = _number(symbol, i)
            if n <= 0 or j + n > len(symbol):
                return []
            args.append(symbol[j: j + n])
            i = j + n
        else:
            return []
    return args if i < len(symbol) else []


def _scope(symbol: str) -> tuple[list[str], int]:
    """(the name's parts, the index just after them) of a mangled name; ([], 0) when it
    cannot be read simply."""
    if not symbol.startswith("_Z") or len(symbol) < 4:
        return [], 0
    i, nested = 2, symbol[2] == "N"
    if nested:
        i += 1
        while i < len(symbol) and symbol[i] in "KVr":
            i += 1
    parts = []
    while i < len(symbol) and symbol[i] in _DIGITS:
        n, i = _number(symbol, i)
        if n <= 0 or i + n > len(symbol):
            return [], 0
        parts.append(symbol[i: i + n])
        i += n
        if not nested:
            break
    return parts, i


def short_kernel_name(name: str) -> str:
    """A readable name for a C++-mangled kernel: ``_ZN2at6native6kernelI...`` ->
    ``at::native::kernel``, an anonymous namespace (``_GLOBAL__N_1``, or nvcc's
    ``_GLOBAL__N__<hash>_<file>...``) as ``(anonymous namespace)``, as ``c++filt`` writes
    it; any other name as it is."""
    parts = mangled_scope(name)
    return "::".join("(anonymous namespace)" if p.startswith("_GLOBAL__N") else p
                     for p in parts) if parts else name


def mangled_bare_name(symbol: str) -> str | None:
    """The function's own identifier in an Itanium-mangled name (``_ZN2ns4axpyIfEEv...``
    -> ``"axpy"``), or None when it cannot be read simply."""
    parts = mangled_scope(symbol)
    return parts[-1] if parts else None


def _word(symbol: str, i: int) -> tuple[str | None, int]:
    """(the identifier whose length starts at ``symbol[i]``, the index after it); (None,
    the index after the digits) where the digits are no identifier's length."""
    n, j = _number(symbol, i)
    word = symbol[j: j + n]
    if n > 0 and len(word) == n and _IDENT.fullmatch(word):
        return word, j + n
    return None, j


def _later_names(symbol: str, i: int) -> tuple[list[str], list[str]]:
    """The identifiers (source names) of a mangled name from index ``i`` on, read one
    after another (a length and that many identifier characters; integer literals such
    as ``Li4E`` skipped), and the functions that local entities of the name (lambdas,
    mostly) were written in: after each ``Z`` (a local name), the last identifier of the
    name that follows (``ZZZNS0_12_GLOBAL__N_119launch_clamp_scalarE...`` ->
    ``launch_clamp_scalar``; substitutions such as ``S0_`` and ``St`` read past, anonymous
    namespaces left out). A guess where the grammar is more than that, good enough for
    :func:`mangled_operation`."""
    names, enclosing = [], []
    while i < len(symbol):
        c = symbol[i]
        if c == "L" and i + 1 < len(symbol) and symbol[i + 1] in _BUILTIN:  # a literal
            end = symbol.find("E", i)
            i = end + 1 if end > 0 else len(symbol)
        elif c in _DIGITS:  # an identifier: a Z inside it is a letter, not a local name
            word, i = _word(symbol, i)
            if word is not None:
                names.append(word)
        elif c == "Z":
            i += 1
            while i < len(symbol) and symbol[i] in "ZNKVr":
                i += 1
            last = None
            while i < len(symbol):
                if symbol[i] in _DIGITS:
                    word, j = _word(symbol, i)
                    if word is None:
                        break
                    names.append(word)
                    last, i = word, j
                elif symbol[i] == "S" and i + 1 < len(symbol) and symbol[i + 1].islower():
                    i += 2  # St (std::) and the like
                elif symbol[i] == "S" and symbol.find("_", i) > 0:
                    i = symbol.find("_", i) + 1  # S_, S0_, ...
                else:
                    break
            if last and not last.startswith("_GLOBAL__N"):
                enclosing.append(last)
        else:
            i += 1
    return names, enclosing


_OPERATION = re.compile(r"_kernel|_impl|_cuda|_out$")


def mangled_operation(symbol: str) -> str | None:
    """What a library kernel computes, as its template arguments say, for a page's node:
    the innermost functor among them (``vectorized_elementwise_kernel<4,
    BinaryFunctor<float, float, float, MulFunctor<float>>, ...>`` -> ``"MulFunctor"``),
    else the function a lambda argument was written in (``"tanh_kernel_cuda"``,
    ``"launch_clamp_scalar"``), else the first name that reads like an operation
    (``..._kernel_impl``, ``..._cuda``, ``..._out``); None when the name says none of
    these or cannot be read. No CUDA call."""
    parts, i = _scope(symbol)
    if not parts:
        return None
    names, enclosing = _later_names(symbol, i)
    names = [w for w in names if len(w) > 2 and not w.startswith("_GLOBAL__N") and w != parts[-1]]
    functors = [w for w in names if "Functor" in w or "functor" in w]
    if functors:
        return functors[-1]
    enclosing = [w for w in enclosing if w != parts[-1]]
    if enclosing:
        return enclosing[0]
    return next((w for w in names if _OPERATION.search(w)), None)


def _substitute(sig: KernelSignature, args: list[str]) -> KernelSignature:
    """A template's signature with its type parameters replaced by the arguments given."""
    if not sig.template or len(args) != len(sig.template):
        return sig
    table = dict(zip(sig.template, args))
    params = []
    for p in sig.params:
        base = p.ctype.rstrip("*")
        stars = p.ctype[len(base):]
        if base in table and _IDENT.fullmatch(table[base].replace(" ", "_")):
            p = param_from_ctype(p.index, p.name, table[base] + stars)
        params.append(p)
    return KernelSignature(sig.name, tuple(params), sig.extern_c, sig.error, sig.template)


def cxx_params(name: str, candidates: list[KernelSignature], compiled: tuple[CompiledParam, ...],
               expr: str | None = None) -> tuple[tuple[Param, ...], list[str]]:
    """The parameters of a C++ kernel: names from the source candidates with the
    template arguments of ``expr`` put in, types checked against the compiled kernel.

    Returns ``(params, notes)`` as :func:`~.reconcile.reconcile` does; with no readable
    candidate the compiled facts alone (``arg0``, ``arg1``, ...).
    """
    args = template_args(expr) if expr else mangled_template_args(name)
    ready = [_substitute(c, args) for c in candidates]
    return reconcile(name, ready, compiled)
