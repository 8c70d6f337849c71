"""The bits of the small floating-point types kernels take: half, bfloat16 and fp8.

Each encoder takes what a ``float`` parameter takes (a Python or numpy real number, or an
object with ``__float__`` / ``__index__``) and refuses what it refuses: strings, ``None``,
complex numbers, containers, and finite values too large for the type (a ``float``
parameter refuses 1e39 rather than pass infinity; a half refuses 1e6 the same way).
Infinity and NaN given as such are kept where the type has them. Rounding is to nearest,
ties to even, as the CUDA conversion intrinsics (``__float2half_rn``, ``__float2bfloat16``,
``__nv_cvt_float_to_fp8`` with ``__NV_NOSAT``) do. Pure Python: no CUDA call.
"""

from __future__ import annotations

import math
import struct

import numpy as np

__all__ = ["real", "half_value", "bfloat16_bits", "fp8_bits", "FP8_FORMATS"]

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")

#: fp8 format name -> (exponent bits, mantissa bits, largest finite code, has infinity)
FP8_FORMATS = {"e4m3": (4, 3, 0x7E, False), "e5m2": (5, 2, 0x7B, True)}


def real(value, type_name: str) -> float:
    """``value`` as a Python float, or a ``TypeError`` saying what ``type_name`` takes."""
    if type(value) is float:  # the common case: no checks to make
        return value
    if isinstance(value, (str, bytes, bytearray, complex, np.complexfloating)) or value is None:
        raise TypeError(f"a {type_name} parameter takes a real number, not "
                        f"{type(value).__name__}")
    if isinstance(value, (bool, np.bool_)):  # a flag is for a bool parameter, not 1.0
        raise TypeError(f"{type_name} takes no bool (True and False are for bool "
                        f"parameters); pass float({value!r}) if the number is meant")
    if not (hasattr(value, "__float__") or hasattr(value, "__index__")):
        raise TypeError(f"a {type_name} parameter takes a real number, not "
                        f"{type(value).__name__}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"a {type_name} parameter takes a real number: {exc}") from None


def _too_large(x: float, type_name: str, largest: float) -> ValueError:
    return ValueError(f"{x!r} does not fit a {type_name} (largest finite value {largest:g})")


def half_value(value) -> float:
    """The value a ``half`` parameter packs (``struct`` format ``e`` rounds it)."""
    x = real(value, "half")
    if math.isfinite(x):
        try:
            struct.pack("<e", x)
        except OverflowError:
            raise _too_large(x, "half", 65504.0) from None
    return x


def bfloat16_bits(value) -> int:
    """The 16 bits of a ``__nv_bfloat16``: the top half of the float32, rounded."""
    x = real(value, "__nv_bfloat16")
    if math.isnan(x):
        return 0x7FC0 | (0x8000 if math.copysign(1.0, x) < 0 else 0)
    try:
        bits = _U32.unpack(_F32.pack(x))[0]
    except OverflowError:
        raise _too_large(x, "__nv_bfloat16", 3.3895313892515355e38) from None
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    if math.isfinite(x) and (out & 0x7F80) == 0x7F80:  # a finite value rounded to infinity
        raise _too_large(x, "__nv_bfloat16", 3.3895313892515355e38)
    return out


def fp8_bits(value, fmt: str) -> int:
    """The 8 bits of a ``__nv_fp8_e4m3`` or ``__nv_fp8_e5m2``."""
    ebits, mbits, top, has_inf = FP8_FORMATS[fmt]
    type_name = f"__nv_fp8_{fmt}"
    x = real(value, type_name)
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign | 0x7F
    bias = (1 << (ebits - 1)) - 1
    largest = (2 - 2.0 ** -mbits if has_inf else 2 - 2.0 ** (1 - mbits)) * 2.0 ** (
        (1 << ebits) - 1 - bias - (1 if has_inf else 0))
    if math.isinf(x):
        if not has_inf:
            raise ValueError(f"{type_name} has no infinity (largest finite value {largest:g})")
        return sign | 0x7C
    a = abs(x)
    if a == 0:
        return sign
    exp = math.frexp(a)[1] - 1  # a = 1.m * 2**exp
    if exp < 1 - bias:  # subnormal: a multiple of 2**(1 - bias - mbits)
        code = round(a / 2.0 ** (1 - bias - mbits))  # a carry into the exponent is right
    else:
        m = round(a / 2.0 ** (exp - mbits))
        if m == 1 << (mbits + 1):
            exp, m = exp + 1, 1 << mbits
        code = ((exp + bias) << mbits) | (m - (1 << mbits))
    if code > top:
        raise _too_large(x, type_name, largest)
    return sign | code
