"""CuPy kernels as pycudagraph kernels (read from the object; CuPy not imported).

A ``cupy.RawKernel`` (also what ``cupy.RawModule.get_function`` returns) holds its
source (``code``) and its name in the image (``name``: an ``extern "C"`` name, or the
mangled name of a C++ kernel); ``raw.kernel`` compiles and loads it for the current
device (CuPy's ``cuModuleLoadData``) and gives a ``cupy.cuda.function.Function`` whose
``ptr`` is the ``CUfunction``. That function belongs to the current device's context.

Parameters come from the source when it declares the kernel readably (names and C
types, checked against the image's sizes when the kernel is first packed); otherwise
from the image (``cuFuncGetParamInfo``: sizes only) or ``signature=``. A bare
``Function`` has no source: the image or ``signature=`` tell.
"""

from __future__ import annotations

from .._cuda.context import current_device
from .._cuda import dr
from ..errors import ArgumentError
from .cxx_names import mangled_bare_name
from .origin import Origin, merge_signature, parse_signature
from .signature import Param, kernel_candidates, template_kernels

__all__ = ["is_cupy_kernel", "cupy_kernel"]


def is_cupy_kernel(obj) -> bool:
    """A CuPy object: its type lives in the ``cupy`` package."""
    return (type(obj).__module__ or "").split(".")[0] == "cupy"


def _source_params(code: str | None, name: str) -> tuple[Param, ...] | None:
    """The kernel's parameters read from its source, or None when it does not tell."""
    if not code:
        return None
    found = kernel_candidates(code).get(name)
    if found is None and name.startswith("_Z"):
        bare = mangled_bare_name(name)
        plain = [c for c in kernel_candidates(code).get(bare, []) if not c.extern_c]
        found = plain if len(plain) == 1 and not template_kernels(code).get(bare) else None
    readable = [c for c in found or [] if c.error is None]
    if not readable:
        return None  # not found, unreadable, or a template instance
    return readable[-1].params  # struct sizes, if any, come from the image


def cupy_kernel(obj, signature: str | None) -> tuple[str, str, tuple[Param, ...] | None, Origin]:
    """(name, symbol, params or None, origin) of a CuPy ``RawKernel`` or ``Function``.

    A ``RawKernel`` is compiled and loaded by CuPy for the current device (its
    ``kernel`` property); None params: read from the image at first use.

    Raises
    ------
    ArgumentError
        For CuPy objects that are not raw kernels (``ElementwiseKernel`` ...), or a
        cooperative ``RawKernel`` (``enable_cooperative_groups=True``).
    """
    kind = type(obj).__name__
    if kind == "RawKernel":
        name = obj.name
        if getattr(obj, "enable_cooperative_groups", False):
            raise ArgumentError(f"CuPy RawKernel {name}: it was built with "
                                "enable_cooperative_groups=True and needs a cooperative launch, "
                                "which Kernel.from_function does not make")
        func = obj.kernel  # compiled and loaded by CuPy for the current device
        known = _source_params(getattr(obj, "code", None), name)
    elif kind == "Function" and hasattr(obj, "ptr"):
        func, name, known = obj, f"cupy Function 0x{int(obj.ptr):x}", None
    else:
        raise ArgumentError(
            f"Kernel.from_function takes a cupy.RawKernel (also from RawModule.get_function) "
            f"or a cupy.cuda.function.Function, not a cupy {kind}")
    if known is not None:
        params = merge_signature(name, "CuPy source", known, signature)
    else:
        params = parse_signature(name, signature) if signature is not None else None
    ptr = int(func.ptr)
    if not ptr:
        raise ArgumentError(f"CuPy kernel {name}: its function is not loaded (ptr is 0)")
    origin = Origin(obj, "CuPy kernel", handle=dr.CUfunction(ptr), device=current_device(),
                    keep=(func,))
    return name, name, params, origin
