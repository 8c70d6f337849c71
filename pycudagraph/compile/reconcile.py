"""Source signatures checked against what NVRTC compiled.

The source parse (:mod:`.signature`) knows parameter names and intent (a ``float*``
is a pointer, a ``size_t`` an integer) but can be fooled by the preprocessor; the
compiled entries (:mod:`.ptx`) know which kernels exist and the size and class of each
parameter. :func:`reconcile` keeps the source's reading where both agree and takes the
compiled facts where they disagree, with a message saying so.
"""

from __future__ import annotations

from ..errors import ArgumentError
from .ptx import CompiledParam
from .param_text import signature_text
from .signature import KernelSignature, Param, param_from_ctype

__all__ = ["SignatureWarning", "param_from_compiled", "reconcile", "agrees", "check_declared",
           "expanded", "check_image", "params_from_image", "from_unreadable"]

_INT_TYPES = {1: "int8_t", 2: "int16_t", 4: "int", 8: "long long"}
_FLOAT_TYPES = {4: "float", 8: "double"}
# source kind -> compiled classes it may have been compiled to
_COMPATIBLE = {
    "pointer": {"int", "pointer", "unknown"},
    "int": {"int", "unknown"},
    "bool": {"int", "unknown"},
    "handle": {"int", "unknown"},  # cudaGraphConditionalHandle etc.: a .u64 in PTX
    "float": {"float", "unknown"},
    "half": {"bytes", "int", "float", "unknown"},
    "bfloat16": {"bytes", "int", "unknown"},
    "fp8": {"bytes", "int", "unknown"},
    "vector": {"bytes", "unknown"},
    "struct": {"bytes", "int", "float", "pointer", "unknown"},
}


class SignatureWarning(UserWarning):
    """The source's reading of a kernel signature disagreed with the compiled kernel."""


def param_from_compiled(index: int, name: str, c: CompiledParam, ctype: str | None = None) -> Param:
    """A :class:`Param` from compiled facts alone.

    An 8-byte integer (or 8-byte parameter of unknown type, from a CUBIN) with no source
    to say otherwise is taken as a pointer (which also accepts a plain ``int``); other
    integers are signed; other parameters of unknown type are raw bytes of their size
    (which take a numpy scalar of that size, ``np.float32(2.0)``).
    """
    if c.cls == "float" and c.size in _FLOAT_TYPES:
        p = param_from_ctype(index, name, _FLOAT_TYPES[c.size])
    elif c.cls == "pointer" or (c.cls in ("int", "unknown") and c.size == 8 and ctype is None):
        p = param_from_ctype(index, name, "void*")
    elif c.cls == "int" and c.size in _INT_TYPES:
        p = param_from_ctype(index, name, _INT_TYPES[c.size])
    else:
        p = Param(index, name, ctype or f"bytes{c.size}", "struct", None, 1, "").with_size(c.size)
        if c.cls == "bytes":
            p = Param(p.index, p.name, p.ctype, p.kind, p.size, c.align, p.fmt)
        return p
    if ctype is not None:
        p = Param(p.index, p.name, ctype, p.kind, p.size, p.align, p.fmt)
    return p


def agrees(p: Param, c: CompiledParam) -> bool:
    """True when the source's parameter can be what the compiler compiled."""
    if c.cls not in _COMPATIBLE.get(p.kind, ()):
        return False
    return p.size is None or p.size == c.size


def _merge(p: Param, c: CompiledParam) -> Param:
    """The source's parameter, its unknowns filled from the compiled facts."""
    if p.size is not None:
        return p
    if c.cls == "bytes" or c.cls == "unknown":  # a struct: size and alignment from the compiler
        q = p.with_size(c.size)
        return Param(q.index, q.name, q.ctype, q.kind, q.size, max(c.align, 1), q.fmt)
    return param_from_compiled(p.index, p.name, c, ctype=p.ctype)  # an unresolved type name


def mismatch(kernel: str, p: Param, c: CompiledParam) -> str:
    """The sentence that says a parameter disagrees with the compiled kernel."""
    size = f"{p.size} bytes" if p.size is not None else "size unknown"
    return (f"{kernel}: parameter {p.index} '{p.name}' reads as {p.ctype} ({p.kind}, {size}) "
            f"in the source but the compiled kernel has a {c.describe()}")


def check_declared(kernel: str, params: tuple[Param, ...],
                   compiled: tuple[CompiledParam, ...]) -> tuple[Param, ...]:
    """Parameters given by the user (``signature=``) checked against the compiled kernel.

    Returns them with struct sizes filled in. Raises :class:`ArgumentError` naming the
    kernel and the first parameter that cannot be what was compiled.
    """
    if len(params) != len(compiled):
        raise ArgumentError(f"{kernel}: the signature has {len(params)} parameters but the "
                            f"compiled kernel has {len(compiled)}")
    for p, c in zip(params, compiled):
        if not agrees(p, c):
            size = f"{p.size} bytes" if p.size is not None else "size unknown"
            raise ArgumentError(f"{kernel}: parameter {p.index} '{p.name}' is {p.ctype} ({p.kind}, "
                                f"{size}) in the signature but {c.size} bytes in the compiled "
                                f"kernel: a {c.describe()}")
    return tuple(_merge(p, c) for p, c in zip(params, compiled))


def _score(sig: KernelSignature, compiled: tuple[CompiledParam, ...]) -> int:
    if sig.error is not None or len(sig.params) != len(compiled):
        return -1
    return sum(agrees(p, c) for p, c in zip(sig.params, compiled))


def reconcile(kernel: str, candidates: list[KernelSignature],
              compiled: tuple[CompiledParam, ...]) -> tuple[tuple[Param, ...], list[str]]:
    """The parameters to pack for one compiled kernel, and the disagreements found.

    Parameters
    ----------
    kernel : str
        The kernel's name (for messages).
    candidates : list of KernelSignature
        What the source parse found under that name (several for ``#if`` branches);
        the one agreeing best with the compiled facts is used.
    compiled : tuple of CompiledParam
        The compiled kernel's parameters.

    Returns
    -------
    params, notes
        ``notes`` is empty when the source and the compiled kernel agree; otherwise it
        says, for each disagreement, what the source said and what was used instead.
    """
    readable = [s for s in candidates if s.error is None]
    if not readable:
        names = [f"arg{i}" for i in range(len(compiled))]
        return tuple(param_from_compiled(i, n, c) for i, (n, c) in enumerate(zip(names, compiled))), []
    best = max(readable, key=lambda s: _score(s, compiled))
    if len(best.params) != len(compiled):
        note = (f"{kernel}: the source declares {len(best.params)} parameters "
                f"({best.text()}) but the compiled kernel has {len(compiled)}; using the "
                "compiled kernel's parameter types with names arg0, arg1, ...")
        return tuple(param_from_compiled(i, f"arg{i}", c) for i, c in enumerate(compiled)), [note]
    params, notes = [], []
    for p, c in zip(best.params, compiled):
        if agrees(p, c):
            params.append(_merge(p, c))
        else:
            notes.append(mismatch(kernel, p, c) + "; using the compiled type")
            params.append(param_from_compiled(p.index, p.name, c))
    return tuple(params), notes


def expanded(params: tuple[Param, ...]) -> list[int | None]:
    """The size of each kernel parameter the arguments fill, in order (an argument with
    ``parts`` fills several)."""
    out: list[int | None] = []
    for p in params:
        out.extend([size for _, size in p.parts] if p.parts else [p.size])
    return out


def check_image(kernel: str, params: tuple[Param, ...], image: list[tuple[int, int]],
                hidden: tuple[int, ...] = ()) -> tuple[Param, ...]:
    """Parameters checked against the loaded kernel's (offset, size) list
    (``cuKernelGetParamInfo``): same count, same sizes; struct sizes filled in.

    ``hidden`` are the sizes of trailing parameters no argument fills (Triton's scratch
    pointers). Raises :class:`ArgumentError` naming the kernel and the first mismatch.
    """
    sizes = expanded(params)
    if len(image) != len(sizes) + len(hidden):
        extra = f" (and {len(hidden)} hidden)" if hidden else ""
        raise ArgumentError(
            f"{kernel}: the signature has {len(params)} parameters{extra} filling "
            f"{len(sizes) + len(hidden)} kernel parameters, but the compiled kernel has "
            f"{len(image)}; fix the source parse or pass signature=")
    for j, (size, (_, got)) in enumerate(zip(hidden, image[len(sizes):])):
        if size != got:
            raise ArgumentError(f"{kernel}: hidden parameter {len(sizes) + j} is {size} bytes "
                                f"here but {got} bytes in the compiled kernel")
    out, k = [], 0
    for p in params:
        n = len(p.parts) or 1
        got = [size for _, size in image[k: k + n]]
        k += n
        want = [size for _, size in p.parts] if p.parts else [p.size]
        if want == [None]:
            p = p.with_size(got[0])
        elif want != got:
            what = "+".join(str(s) for s in got)
            raise ArgumentError(
                f"{kernel}: parameter {p.index} '{p.name}' is {p.ctype} ({p.size} bytes) "
                f"in the signature but {what} bytes in the compiled kernel")
        out.append(p)
    return tuple(out)


def params_from_image(kernel: str, image: list[tuple[int, int]] | None,
                      hidden: tuple[int, ...] = ()) -> tuple[Param, ...]:
    """Parameters of a kernel known by its loaded image only: ``arg0``, ``arg1``, ...,
    typed as :func:`param_from_compiled` types parameters of unknown type.

    Raises :class:`ArgumentError` when the driver cannot report the parameters.
    """
    if image is None:
        raise ArgumentError(f"{kernel}: the driver cannot report this kernel's parameters "
                            "(cuKernelGetParamInfo needs CUDA 12.4); pass signature=")
    image = image[:len(image) - len(hidden)] if hidden else image
    return tuple(param_from_compiled(i, f"arg{i}", CompiledParam(size, size, "unknown", "image"))
                 for i, (_, size) in enumerate(image))


def from_unreadable(kernel: str, sig: KernelSignature, compiled: tuple[CompiledParam, ...]
                    ) -> tuple[tuple[Param, ...], list[str]]:
    """The parameters of a kernel whose source parameter list could not be read (``decltype``,
    a macro, an expression in a type): the compiled kernel's, named from the source where
    its parameters can still be told apart, with a note saying so."""
    parts = sig.parts if len(sig.parts) == len(compiled) else ()
    params = []
    for i, c in enumerate(compiled):
        name, p = parts[i] if parts else (f"arg{i}", None)
        if p is not None and agrees(p, c):
            params.append(_merge(p, c))
        else:
            params.append(param_from_compiled(i, name, c))
    text = signature_text(params)
    note = (f"{kernel}: cannot read its parameters from the source ({sig.error}); using the "
            f"compiled kernel's {len(compiled)}: ({text}); pass signature= to name the types")
    return tuple(params), [note]
