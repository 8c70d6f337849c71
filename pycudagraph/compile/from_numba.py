"""Numba-CUDA kernels as pycudagraph kernels (read from the object; Numba not imported).

A Numba-CUDA kernel compiled for one set of argument types (``@cuda.jit("void(...)")``,
``dispatcher.specialize(...)``, or one entry of ``dispatcher.overloads``) knows its
Numba types (``argument_types``) and, through its code library, its loaded handle
(``library.get_cufunc().handle``: a ``CUkernel`` with numba-cuda on cuda.core).

Numba passes some arguments as several kernel parameters: an array is ``meminfo``,
``parent`` (both 0 here, as Numba's own launcher passes them), ``nitems``, ``itemsize``,
the data pointer, then its shape and its strides in bytes (``5 + 2 * ndim`` integers); a
complex number is its real and imaginary parts; a tuple, its members. Each such
argument is one :class:`~pycudagraph.compile.signature.Param` here with ``parts`` (where
each kernel parameter lies in its bytes) and a ``convert`` that reads a device array
(``__cuda_array_interface__``: Numba, CuPy, PyTorch) into those fields, checking its
dimensions, element type and layout. So the user passes one value per Python
parameter, and ``set_arg`` by name rewrites all of an array's fields at once.
"""

from __future__ import annotations

import inspect
import struct

import numpy as np

from .._cuda.context import current_device
from ..errors import ArgumentError
from .converters import pointer_value
from .origin import Origin, merge_signature, raw_handle
from .signature import Param, param_from_ctype

__all__ = ["is_numba_kernel", "numba_kernel", "numba_params"]

_INTS = {(8, True): "int8_t", (16, True): "int16_t", (32, True): "int", (64, True): "long long",
         (8, False): "uint8_t", (16, False): "uint16_t", (32, False): "unsigned int",
         (64, False): "unsigned long long"}
_FLOATS = {16: "half", 32: "float", 64: "double"}


def is_numba_kernel(obj) -> bool:
    """A Numba object: its type lives in the ``numba`` (or ``numba_cuda``) package."""
    return (type(obj).__module__ or "").split(".")[0] in ("numba", "numba_cuda")


def _is(ty, name: str) -> bool:
    return any(c.__name__ == name for c in type(ty).__mro__)


def _scalar_ctype(ty) -> str | None:
    """The C type of a Numba scalar passed as one parameter, else None."""
    if _is(ty, "Boolean"):
        return "bool"
    if _is(ty, "Integer"):
        return _INTS.get((ty.bitwidth, bool(ty.signed)))
    if _is(ty, "Float"):
        return _FLOATS.get(ty.bitwidth)
    if _is(ty, "CPointer") or _is(ty, "Record"):
        return "void*"  # a Record travels as a pointer to the record on the device
    return None


def _dtype_of(ty) -> np.dtype | None:
    """The numpy dtype of a Numba array element type, when it is a plain scalar."""
    if _is(ty, "Boolean"):
        return np.dtype(np.bool_)
    if _is(ty, "Integer"):
        return np.dtype(f"{'i' if ty.signed else 'u'}{ty.bitwidth // 8}")
    if _is(ty, "Float") or _is(ty, "Complex"):
        return np.dtype(f"{'f' if _is(ty, 'Float') else 'c'}{ty.bitwidth // 8}")
    return None


def _contiguous(shape, strides, itemsize: int, order: str) -> bool:
    dims = list(zip(shape, strides))
    if order == "C":
        dims.reverse()
    want = itemsize
    for n, s in dims:
        if n > 1 and s != want:
            return False
        want *= n
    return True


def _array_fields(ty, value) -> list[int]:
    """meminfo, parent, nitems, itemsize, data, shape..., strides... of a device array."""
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"{ty} takes a device array with __cuda_array_interface__ (a Numba "
                        "device array, a CuPy array, a PyTorch CUDA tensor)")
    shape = tuple(int(n) for n in cai["shape"])
    if len(shape) != ty.ndim:
        raise ValueError(f"{ty} takes a {ty.ndim}-d array, got a {len(shape)}-d one {shape}")
    dtype = np.dtype(cai["typestr"])
    want = _dtype_of(ty.dtype)
    if want is not None and dtype != want:
        raise ValueError(f"{ty} takes {want} elements, got {dtype}")
    itemsize = dtype.itemsize
    strides = cai.get("strides")
    if strides is None:
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    strides = tuple(int(s) for s in strides)
    if ty.layout in ("C", "F") and not _contiguous(shape, strides, itemsize, ty.layout):
        raise ValueError(f"{ty} takes a {ty.layout}-contiguous array; this one has strides "
                         f"{strides}")
    return [0, 0, int(np.prod(shape, dtype=np.int64)), itemsize, int(cai["data"][0]),
            *shape, *strides]


def _pieces(ty) -> tuple[list[str], object]:
    """The ``struct`` format of each kernel parameter one Numba-typed argument fills, and
    the function from its value to their values."""
    ctype = _scalar_ctype(ty)
    if ctype is not None:
        p = param_from_ctype(0, "x", ctype)
        conv = pointer_value if p.kind == "pointer" else (
            (lambda v: bool(v)) if p.kind == "bool" else (lambda v: v))
        return [p.fmt], lambda v: [conv(v)]
    if _is(ty, "Array"):
        return ["q"] * (5 + 2 * ty.ndim), lambda v: _array_fields(ty, v)
    if _is(ty, "Complex"):
        f = "f" if ty.bitwidth == 64 else "d"
        return [f, f], lambda v: [complex(v).real, complex(v).imag]
    if _is(ty, "BaseTuple"):
        subs = [_pieces(t) for t in ty.types]

        def pack(value):
            items = tuple(value)
            if len(items) != len(subs):
                raise ValueError(f"{ty} takes {len(subs)} values, got {len(items)}")
            return [x for (_, f), v in zip(subs, items) for x in f(v)]
        return [fmt for fmts, _ in subs for fmt in fmts], pack
    if _is(ty, "EnumMember"):
        fmts, inner = _pieces(ty.dtype)
        return fmts, lambda v: inner(getattr(v, "value", v))
    if _is(ty, "NPDatetime") or _is(ty, "NPTimedelta"):
        return ["q"], lambda v: [int(np.asarray(v).view(np.int64))]
    raise ArgumentError(f"the Numba type {ty} is not one Kernel.from_function can pass")


def _param(index: int, name: str, ty) -> Param:
    ctype = _scalar_ctype(ty)
    if ctype is not None:  # one kernel parameter, packed as any kernel's
        return param_from_ctype(index, name, ctype)
    fmts, pack = _pieces(ty)
    parts, fmt, pos, align = [], "<", 0, 1
    for f in fmts:  # each kernel parameter at its natural alignment in the argument's bytes
        size = struct.calcsize(f)
        start = (pos + size - 1) // size * size
        fmt += f"{start - pos}x{f}" if start > pos else f
        parts.append((start, size))
        pos, align = start + size, max(align, size)
    size = (pos + align - 1) // align * align
    packer = struct.Struct(fmt)

    def convert(value):
        return packer.pack(*pack(value)).ljust(size, b"\0")
    return Param(index, name, str(ty), "struct", size, min(align, 8), f"{size}s",
                 tuple(parts), convert)


def numba_params(argtypes, names) -> tuple[Param, ...]:
    """One :class:`Param` per Numba-typed argument (see the module docstring). No CUDA call."""
    names = list(names) if len(names) == len(argtypes) else [f"arg{i}" for i in range(len(argtypes))]
    return tuple(_param(i, n, t) for i, (n, t) in enumerate(zip(names, argtypes)))


def _one_kernel(obj):
    """The compiled kernel of a dispatcher that has exactly one, or ``obj`` itself."""
    overloads = getattr(obj, "overloads", None)
    if overloads is None:
        return obj
    name = getattr(getattr(obj, "py_func", None), "__name__", "kernel")
    if len(overloads) == 1:
        return next(iter(overloads.values()))
    if not overloads:
        raise ArgumentError(
            f"Numba kernel {name} is not compiled yet: give @cuda.jit a signature "
            f"(\"void(float32[::1], float32, int32)\"), or pass dispatcher.specialize(*args)")
    raise ArgumentError(f"Numba kernel {name} has {len(overloads)} compiled versions "
                        f"({', '.join(str(k) for k in overloads)}): pass one, "
                        "dispatcher.overloads[types]")


def numba_kernel(obj, signature: str | None) -> tuple[str, str, tuple[Param, ...], Origin]:
    """(name, symbol, params, origin) of a Numba-CUDA kernel. Its handle comes from Numba
    (``library.get_cufunc()``: Numba loads it for the current device if needed).

    Raises
    ------
    ArgumentError
        For a dispatcher with no or several compiled versions, a cooperative kernel, a
        kernel with argument extensions, or a Numba type not handled here.
    """
    kern = _one_kernel(obj)
    argtypes = getattr(kern, "argument_types", None)
    library = getattr(kern, "library", None)
    py_func = getattr(kern, "py_func", None)
    if argtypes is None or library is None:
        raise ArgumentError(f"Kernel.from_function cannot use a Numba {type(obj).__name__}: "
                            "pass a kernel made with numba.cuda.jit")
    name = getattr(py_func, "__name__", None) or getattr(kern, "entry_name", "numba_kernel")
    if getattr(kern, "cooperative", False):
        raise ArgumentError(f"Numba kernel {name} synchronises its grid (a cooperative launch), "
                            "which Kernel.from_function does not make")
    if getattr(kern, "extensions", None):
        raise ArgumentError(f"Numba kernel {name} has argument extensions, which change values "
                            "at each Numba launch; Kernel.from_function cannot apply them")
    try:
        names = list(inspect.signature(py_func).parameters) if py_func is not None else []
    except (TypeError, ValueError):
        names = []
    params = merge_signature(name, "Numba kernel", numba_params(tuple(argtypes), names), signature)
    cufunc = library.get_cufunc()
    handle = getattr(cufunc, "handle", cufunc)
    if raw_handle(handle) is None and hasattr(handle, "value"):  # a ctypes pointer
        handle = int(handle.value or 0)
    found = raw_handle(handle)
    if found is None:
        raise ArgumentError(f"Numba kernel {name}: its handle is a {type(handle).__name__}, not "
                            "a CUkernel or CUfunction")
    kind, raw = found
    dev = current_device() if kind == "function" else -1
    symbol = getattr(kern, "entry_name", None) or getattr(cufunc, "name", name)
    origin = Origin(obj, "Numba kernel", handle=raw, device=dev, keep=(kern, cufunc))
    return name, str(symbol), params, origin
