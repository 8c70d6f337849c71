"""The kernels of realistic argument counts: 3, 10 and 30 parameters, pointers and scalars
mixed (``kernels/helpers.cu``: ``empty3``, ``args10``, ``args30``; ``floor.cu`` compiles the
same kernels in). Every figure "of N arguments" launches, builds or updates one of these.

Each library is handed the values its users would hand it: pycudagraph Python ints and
floats and its :class:`~pycudagraph.DeviceBuffer` objects (converted and checked against
the signature), raw ``cuda.bindings`` ctypes objects made once (:func:`ctypes_args`),
cuda.core and CuPy numpy scalars (:func:`numpy_values`), which they pack by their type.
No CUDA import here.
"""

from __future__ import annotations

import ctypes

COUNTS = (3, 10, 30)

#: N -> (kernel name, ((parameter name, C type), ...)), as kernels/helpers.cu declares them
KERNELS = {
    3: ("empty3", (("p", "float*"), ("a", "float"), ("n", "int"))),
    10: ("args10", (("p0", "float*"), ("a", "float"), ("p1", "float*"), ("n", "int"),
                    ("p2", "float*"), ("q", "long long"), ("p3", "float*"), ("b", "float"),
                    ("m", "int"), ("d", "double"))),
    30: ("args30", (("p0", "float*"), ("a0", "float"), ("p1", "float*"), ("n", "int"),
                    ("p2", "float*"), ("q0", "long long"), ("p3", "float*"), ("a1", "float"),
                    ("p4", "float*"), ("d0", "double"), ("p5", "float*"),
                    ("u0", "unsigned int"), ("p6", "float*"), ("a2", "float"),
                    ("p7", "float*"), ("n1", "int"), ("p8", "float*"), ("q1", "long long"),
                    ("p9", "float*"), ("a3", "float"), ("p10", "float*"), ("d1", "double"),
                    ("p11", "float*"), ("u1", "unsigned int"), ("a4", "float"),
                    ("n2", "int"), ("a5", "float"), ("n3", "int"), ("n4", "int"),
                    ("n5", "int"))),
}

#: The argument a one-argument update rewrites: index 1, a float, in every kernel.
UPDATE_INDEX = 1

CTYPES = {"float*": ctypes.c_void_p, "float": ctypes.c_float, "int": ctypes.c_int,
          "long long": ctypes.c_longlong, "double": ctypes.c_double,
          "unsigned int": ctypes.c_uint}
NUMPY = {"float": "float32", "int": "int32", "long long": "int64", "double": "float64",
         "unsigned int": "uint32"}


def name(n: int) -> str:
    return KERNELS[n][0]


def ctypes_of(n: int) -> tuple:
    return tuple(t for _, t in KERNELS[n][1])


def signature(n: int) -> str:
    """``"float* p, float a, int n"``: what ``Kernel.from_function(signature=)`` takes."""
    return ", ".join(f"{t} {p}" for p, t in KERNELS[n][1])


def values(n: int, pointers, a: float = 1.0) -> list:
    """One value per parameter: pointers taken in turn from ``pointers`` (ints, buffers,
    arrays), floats ``a``, ``a + 1``, ..., small non-negative ints (so the kernel writes
    nothing)."""
    out, ptr, k = [], 0, 0
    for _, ctype in KERNELS[n][1]:
        if ctype == "float*":
            out.append(pointers[ptr % len(pointers)])
            ptr += 1
        elif ctype in ("float", "double"):
            out.append(a + k)
        else:
            out.append(3 + k)
        k += 1
    return out


def numpy_values(n: int, pointers, a: float = 1.0) -> tuple:
    """:func:`values` with the scalars as numpy scalars of the parameters' types (what
    cuda.core and CuPy pack by type); pointers as given."""
    import numpy as np
    return tuple(v if ctype == "float*" else getattr(np, NUMPY[ctype])(v)
                 for v, (_, ctype) in zip(values(n, pointers, a), KERNELS[n][1]))


class CtypesArgs:
    """Raw arguments made once: one ctypes object per parameter and the ``void*[N]`` array
    of their addresses that ``kernelParams`` takes. :meth:`write` rewrites values in place."""

    def __init__(self, n: int, pointers, a: float = 1.0):
        self.types = ctypes_of(n)
        self.objs = [CTYPES[t](v) for t, v in zip(self.types, values(n, pointers, a))]
        self.array = (ctypes.c_void_p * n)(*[ctypes.addressof(o) for o in self.objs])
        self.address = ctypes.addressof(self.array)

    def write(self, index: int, value) -> None:
        self.objs[index].value = value

    def write_all(self, vals) -> None:
        for o, v in zip(self.objs, vals):
            o.value = v
