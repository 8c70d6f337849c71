"""Launch dimensions: :func:`dims3`, the one grid/block normaliser (its C twin is ``dims`` in
``pycudagraph/_cuda/_native_convert.c``), and :func:`shared_mem_arg`, the one for dynamic
shared memory. Both refuse what is not an int with an
:class:`~pycudagraph.errors.ArgumentError` naming the field and the value.
"""

from __future__ import annotations

from ..errors import ArgumentError
from ..runtime.values import int_arg, is_int, short_repr

__all__ = ["dims3", "shared_mem_arg"]

_U32 = 1 << 32


def dims3(value, what: str) -> tuple[int, int, int]:
    """A grid or block as 3 ints: an int, or a tuple or list of 1 to 3 ints, each in [1, 2**32).

    Numpy integers count as ints; strings, floats and bools are refused (``"12"`` is not
    (1, 2), 2.7 is not 2) with an :class:`ArgumentError` naming ``what``. The common cases
    (an int, a 3-tuple of ints) cost a few compares.
    """
    if type(value) is int and 0 < value < _U32:
        return (value, 1, 1)
    if type(value) is tuple and len(value) == 3:
        x, y, z = value
        if (type(x) is int and type(y) is int and type(z) is int
                and 0 < x < _U32 and 0 < y < _U32 and 0 < z < _U32):
            return value
    if is_int(value):
        items = (int(value),)
    elif isinstance(value, (tuple, list)):
        items = tuple(value)
        if not 1 <= len(items) <= 3:
            raise ArgumentError(f"{what} must have 1 to 3 dimensions, got {value!r}")
        for axis, v in zip("xyz", items):
            if not is_int(v):
                raise ArgumentError(f"{what} {axis} must be an int, got {short_repr(v)} "
                                    f"({type(v).__name__}) in {what}={short_repr(value)}")
        items = tuple(int(v) for v in items)
    else:
        raise ArgumentError(f"{what} must be an int or a tuple of up to 3 ints, got "
                            f"{short_repr(value)} ({type(value).__name__})")
    for axis, v in zip("xyz", items):
        if not 0 < v < _U32:
            raise ArgumentError(f"{what} {axis} must be a positive 32-bit int, got {v} "
                                f"in {what}={short_repr(value)}")
    return items + (1,) * (3 - len(items))


def shared_mem_arg(value, name: str = "") -> int:
    """Dynamic shared memory in bytes: an int in [0, 2**32)."""
    if type(value) is int and 0 <= value < _U32:
        return value
    return int_arg(value, f"{name}: shared_mem" if name else "shared_mem", 0, _U32 - 1)
