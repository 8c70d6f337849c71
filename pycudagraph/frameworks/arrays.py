"""Device arrays of any framework, seen the same way: address, byte range, layout key.

:func:`array_info` reads a PyTorch tensor, a CuPy array, a
:class:`~pycudagraph.DeviceBuffer` or any object with ``__cuda_array_interface__`` (Numba)
into an :class:`ArrayInfo`: its data address, the bytes its elements span (``lo`` ..
``hi``, negative strides included) and the layout key a graphed callable captures once
per (shape, strides, dtype, device, address alignment). :func:`flatten` walks the
arguments of a call (tuples, lists and dicts included) into one hashable key and the list
of arrays; :func:`substitute` rebuilds arguments with arrays replaced. :func:`owner_range`
gives the whole allocation an object owns (a tensor's storage, a CuPy memory block). No
CUDA call anywhere here: only the frameworks' own bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from ..runtime.memory import DeviceBuffer
from . import loaded

__all__ = ["ArrayInfo", "array_info", "flatten", "substitute", "owner_range", "overlaps",
           "aliasing", "align_class", "ALIGN_CAP"]

#: Alignment classes above this are one class: no kernel picks a path by more.
ALIGN_CAP = 256


@dataclass(frozen=True)
class ArrayInfo:
    """One device array argument: the object, its data address and byte span, and its
    layout key (``framework`` first)."""

    obj: object
    ptr: int
    lo: int
    hi: int
    key: tuple
    framework: str
    device: int


def align_class(ptr: int) -> int:
    """The alignment class of an address in the key: its largest power-of-two divisor,
    at most :data:`ALIGN_CAP`. No CUDA call."""
    return min(ptr & -ptr, ALIGN_CAP) if ptr else ALIGN_CAP


def _span(ptr: int, shape, byte_strides, itemsize: int) -> tuple[int, int]:
    """(lowest, one past the highest) byte address the elements touch."""
    lo = hi = 0
    for n, st in zip(shape, byte_strides):
        if n == 0:
            return ptr, ptr
        ext = (n - 1) * st
        if ext < 0:
            lo += ext
        else:
            hi += ext
    return ptr + lo, ptr + hi + itemsize


def _torch_info(t) -> ArrayInfo:
    dev = t.get_device()
    if dev < 0:
        raise ArgumentError("graphed takes CUDA tensors; a CPU tensor's values would be "
                            "baked into the graph (move it to the GPU, or pass a number)")
    ptr = t.data_ptr()
    shape, stride = tuple(t.shape), t.stride()
    size = t.element_size()
    lo, hi = _span(ptr, shape, [s * size for s in stride], size)
    return ArrayInfo(t, ptr, lo, hi, ("torch", shape, stride, t.dtype, dev, align_class(ptr)),
                     "torch", dev)


def _cupy_info(a) -> ArrayInfo:
    ptr = a.data.ptr
    dev = a.data.device_id
    lo, hi = _span(ptr, a.shape, a.strides, a.itemsize)
    return ArrayInfo(a, ptr, lo, hi, ("cupy", a.shape, a.strides, a.dtype, dev, align_class(ptr)),
                     "cupy", dev)


def _cai_info(obj, cai: dict) -> ArrayInfo:
    ptr = int(cai["data"][0])
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    strides = tuple(strides)
    if isinstance(obj, DeviceBuffer):
        dev, kind = int(obj.device), "buffer"
    else:
        dev, kind = -1, "cai"
    lo, hi = _span(ptr, shape, strides, dtype.itemsize)
    return ArrayInfo(obj, ptr, lo, hi, (kind, shape, strides, dtype.str, dev, align_class(ptr)),
                     kind, dev)


def array_info(obj) -> ArrayInfo | None:
    """The :class:`ArrayInfo` of a device array, or None for anything else. No CUDA call.

    Raises
    ------
    ArgumentError
        For a CPU tensor (its values would be baked in).
    ClosedError
        For a freed :class:`~pycudagraph.DeviceBuffer`.
    """
    torch = loaded.torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_info(obj)
    cupy = loaded.cupy()
    if cupy is not None and isinstance(obj, cupy.ndarray):
        return _cupy_info(obj)
    if isinstance(obj, (str, bytes, int, float, complex, bool, type(None), tuple, list, dict)):
        return None
    cai = getattr(obj, "__cuda_array_interface__", None)
    return _cai_info(obj, cai) if cai is not None else None


def owner_range(obj) -> tuple[int, int] | None:
    """(start, end) of the whole allocation ``obj`` owns: a tensor's storage, a CuPy
    array's memory block, a buffer; None when it owns no device memory. No CUDA call."""
    torch = loaded.torch()
    try:
        if torch is not None and isinstance(obj, torch.Tensor):
            if not obj.is_cuda:
                return None
            storage = obj.untyped_storage()
            start = storage.data_ptr()
            return (start, start + storage.nbytes()) if start else None
        cupy = loaded.cupy()
        if cupy is not None and isinstance(obj, cupy.ndarray):
            mem = obj.data.mem
            return (int(mem.ptr), int(mem.ptr) + int(mem.size)) if mem.ptr else None
        if isinstance(obj, DeviceBuffer):
            return (obj.ptr, obj.ptr + obj.nbytes) if obj.ptr else None
    except Exception:  # an exotic tensor without storage: owns nothing we can see
        return None
    return None


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether the byte ranges [start, end) ``a`` and ``b`` share a byte."""
    return a[0] < b[1] and b[0] < a[1]


def aliasing(spans) -> tuple:
    """Which arrays share bytes, and at what distance, from their ``(lo, hi, ptr)`` spans:
    part of the key, so a call whose arrays alias differently gets its own graph. No CUDA
    call."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    out, first, reach = [], None, -1
    for i in order:
        lo, hi, ptr = spans[i]
        if first is not None and lo < reach:
            out.append((first, i, ptr - spans[first][2]))
            reach = max(reach, hi)
        else:
            first, reach = i, hi
    return tuple(out)


def flatten(args: tuple, kwargs: dict) -> tuple[tuple, list[ArrayInfo]]:
    """(key, arrays) of a call: the key holds each array's layout key and every other
    argument by type and value; the arrays come in argument order. No CUDA call.

    Raises
    ------
    ArgumentError
        For an argument that is neither a device array nor hashable (a numpy array, a
        list of numbers is fine: it is walked).
    """
    infos: list[ArrayInfo] = []
    key = (tuple(_walk(a, f"argument {i}", infos) for i, a in enumerate(args)),
           tuple((k, _walk(kwargs[k], f"argument {k!r}", infos)) for k in sorted(kwargs)))
    return key + (aliasing([(i.lo, i.hi, i.ptr) for i in infos]),), infos


def _walk(v, where: str, infos: list) -> tuple:
    """The key of one argument; its arrays appended to ``infos``. A module function, not a
    closure calling itself: such a closure is a reference cycle that would hold every
    input of a call until the cyclic garbage collector runs."""
    info = array_info(v)
    if info is not None:
        infos.append(info)
        return info.key
    t = type(v)
    if t is tuple or t is list:
        return (t.__name__, tuple(_walk(x, f"{where}[{i}]", infos) for i, x in enumerate(v)))
    if t is dict:
        return ("dict", tuple((k, _walk(v[k], f"{where}[{k!r}]", infos)) for k in v))
    try:
        hash(v)
    except TypeError:
        raise ArgumentError(f"graphed: {where} is a {t.__name__}, neither a device array "
                            "nor hashable, so it cannot be part of the graph's key (pass "
                            "device arrays, numbers, strings or tuples of them)") from None
    return (t, v)


def substitute(value, replace):
    """``value`` with every device array ``a`` in it replaced by ``replace(a)`` (tuples,
    lists and dicts rebuilt, anything else kept). No CUDA call here."""
    if array_info(value) is not None:
        return replace(value)
    t = type(value)
    if t is tuple or t is list:
        return t(substitute(x, replace) for x in value)
    if t is dict:
        return {k: substitute(v, replace) for k, v in value.items()}
    return value
