"""``Kernel.from_function``: which kind of object was given, and who reads it.

==================================== =================================== ======================
object                               read by                             handle
==================================== =================================== ======================
``CUfunction`` / int                 :mod:`.origin` (sizes from the      the function (one
                                     image, ``cuFuncGetParamInfo``)      device's context)
``CUkernel`` / ``cudaKernel_t``      :mod:`.origin`                      the kernel (any device)
CuPy ``RawKernel``, ``Function``     :mod:`.from_cupy` (source parse)    CuPy's ``CUfunction``
Triton ``CompiledKernel``            :mod:`.from_triton` (metadata, PTX) its CUBIN, loaded here
Numba-CUDA kernel / dispatcher       :mod:`.from_numba` (Numba types)    Numba's ``CUkernel``
==================================== =================================== ======================

The frameworks are not imported here: each object is recognised by the package its type
comes from, and read through its attributes.
"""

from __future__ import annotations

from ..errors import ArgumentError
from .from_cupy import cupy_kernel, is_cupy_kernel
from .from_numba import is_numba_kernel, numba_kernel
from .from_triton import is_triton_kernel, triton_kernel
from .origin import adopt_handle, param_info, raw_handle

__all__ = ["adopt", "param_info"]


def adopt(cls, obj, signature: str | None = None):
    """A ``cls`` (:class:`~pycudagraph.compile.kernel.Kernel`) for a kernel made elsewhere.

    See :meth:`Kernel.from_function <pycudagraph.compile.kernel.Kernel.from_function>`.
    """
    if isinstance(obj, cls):
        raise ArgumentError(f"Kernel.from_function: {obj!r} is already a pycudagraph Kernel")
    if signature is not None and not isinstance(signature, str):
        raise ArgumentError(f"Kernel.from_function: signature= takes a C parameter list "
                            f"(str), got {type(signature).__name__}")
    if is_triton_kernel(obj):
        name, symbol, params, origin = triton_kernel(obj, signature)
    elif is_numba_kernel(obj):
        name, symbol, params, origin = numba_kernel(obj, signature)
    elif is_cupy_kernel(obj):
        name, symbol, params, origin = cupy_kernel(obj, signature)
    elif raw_handle(obj) is not None or raw_handle(getattr(obj, "handle", None)) is not None:
        name, params, origin = adopt_handle(obj, signature)  # also cuda.core's Kernel (.handle)
        symbol = name
    else:
        raise ArgumentError(
            f"Kernel.from_function cannot use a {type(obj).__module__}.{type(obj).__name__}: "
            "it takes a CUfunction / CUkernel / cudaKernel_t (or an int CUfunction), a CuPy "
            "RawKernel, a Triton compiled kernel or a Numba-CUDA kernel")
    return cls(None, name, params, symbol=symbol, origin=origin)
