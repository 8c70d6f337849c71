"""Arrays made again from the templates of a saved graphed callable (:mod:`.graphed_index`):
scratch inputs of a key's layout, outputs placed in a loaded pool, zeroed workspaces, one
allocation per pool.

Every size comes from the index, so each is checked before anything is allocated: a dtype
is one the framework names (``torch.float32``; a numeric numpy dtype for CuPy), strides
are not negative for PyTorch, an output lies inside its pool segment or binding. A
:class:`~pycudagraph.errors.GraphFileError` names what is wrong. The frameworks make
every array (their allocators, their current stream); no CUDA call of pycudagraph's own
except for :class:`~pycudagraph.DeviceBuffer` workspaces (``cudaMalloc``, ``cudaMemset``).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..errors import GraphFileError
from ..runtime.memory import DeviceBuffer
from .arrays import ALIGN_CAP
from . import loaded

__all__ = ["Maker", "ByteBase", "loaded_workspace"]

_MAX = 1 << 40  # bytes of one array the index may ask for
#: start -> end of each workspace a load made, while it lives: a later save of the loaded
#: keys finds them as workspaces again (not as the live arrays they are)
_WORKSPACES: dict = {}


def loaded_workspace(address: int):
    """``(start, end)`` of the workspace made by a load that holds ``address``, or None.
    No CUDA call."""
    for start, end in list(_WORKSPACES.items()):
        if start <= address < end:
            return start, end
    return None


class ByteBase:
    """Device bytes an output can be a view of: a 1-D ``uint8`` array of the framework
    (``array``) whose element 0 is at ``ptr``."""

    __slots__ = ("array", "ptr", "nbytes", "framework")

    def __init__(self, array, ptr: int, nbytes: int, framework: str):
        self.array, self.ptr, self.nbytes, self.framework = array, ptr, nbytes, framework


class Maker:
    """Makes the arrays of one load on ``device`` (with the framework's current stream set
    by the caller). ``where`` names the file in errors."""

    def __init__(self, device: int, where: str):
        self.device = device
        self.where = where

    def fail(self, what: str):
        raise GraphFileError(f"{self.where}: {what}")

    def _torch(self):
        torch = loaded.torch()
        if torch is None:
            self.fail("its keys take PyTorch tensors: import torch before loading")
        return torch

    def _cupy(self):
        cupy = loaded.cupy()
        if cupy is None:
            self.fail("its keys take CuPy arrays: import cupy before loading")
        return cupy

    def dtype(self, a: dict):
        """(framework dtype, item size) of an array template, checked."""
        if a["framework"] == "torch":
            torch = self._torch()
            dt = getattr(torch, a["dtype"], None) if a["dtype"].isidentifier() else None
            if not isinstance(dt, torch.dtype):
                self.fail(f"{a['dtype']!r} is not a PyTorch dtype")
            return dt, int(torch.empty((), dtype=dt).element_size())
        try:
            dt = np.dtype(a["dtype"])
        except (TypeError, ValueError):
            self.fail(f"{a['dtype']!r} is not a numpy dtype")
        if dt.kind not in "biufc" or dt.hasobject or dt.itemsize == 0:
            self.fail(f"{a['dtype']!r} is not a numeric dtype")
        return dt, dt.itemsize

    def span(self, a: dict, itemsize: int) -> tuple[int, int]:
        """(bytes before the data address, bytes from there to the end) the array touches."""
        shape, strides = a["shape"], a["strides"]
        unit = itemsize if a["framework"] == "torch" else 1  # PyTorch counts elements
        if a["framework"] == "torch" and any(s < 0 for s in strides):
            self.fail("a PyTorch array with negative strides")
        if any(n == 0 for n in shape):
            return 0, 0
        lo = sum((n - 1) * s * unit for n, s in zip(shape, strides) if s < 0)
        hi = sum((n - 1) * s * unit for n, s in zip(shape, strides) if s > 0) + itemsize
        if hi - lo > _MAX:
            self.fail(f"an array of {hi - lo} bytes")
        return -lo, hi

    # inputs -----------------------------------------------------------------------------

    def scratch(self, a: dict):
        """A zeroed array of the template's layout whose data address has the template's
        alignment class (an offset into a bigger allocation when it is below
        ``ALIGN_CAP``)."""
        dt, itemsize = self.dtype(a)
        before, after = self.span(a, itemsize)
        pad = a["align"] if a["align"] < ALIGN_CAP else 0
        if pad % itemsize:
            self.fail(f"an alignment of {pad} bytes for {itemsize}-byte elements")
        nbytes = before + after
        if a["framework"] == "torch":
            torch = self._torch()
            if nbytes == 0:
                return torch.empty_strided(a["shape"], a["strides"], dtype=dt, device=self.device)
            raw = torch.zeros(nbytes + pad, dtype=torch.uint8, device=self.device)
            return raw[pad:pad + nbytes].view(dt).as_strided(a["shape"], a["strides"])
        cupy = self._cupy()
        if nbytes == 0:
            return cupy.empty(a["shape"], dt)
        raw = cupy.zeros(nbytes + 4 * ALIGN_CAP, cupy.uint8)
        base = int(raw.data.ptr)
        ptr = -(-(base + before) // (2 * ALIGN_CAP)) * 2 * ALIGN_CAP + pad  # its class: pad
        return cupy.ndarray(a["shape"], dt, memptr=raw.data + (ptr - base), strides=a["strides"])

    def call(self, args: list, kwargs: list) -> tuple[tuple, dict]:
        """The arguments of a call made from its templates (scratch arrays, values)."""
        return tuple(self.value(t) for t in args), {k: self.value(t) for k, t in kwargs}

    def value(self, t: dict):
        (kind, v), = t.items()
        if kind == "array":
            return self.scratch(v)
        if kind == "tuple":
            return tuple(self.value(x) for x in v)
        if kind == "list":
            return [self.value(x) for x in v]
        if kind == "dict":
            return {k: self.value(x) for k, x in v}
        return v

    # memory -----------------------------------------------------------------------------

    def workspace(self, framework: str, nbytes: int) -> ByteBase:
        """A zeroed allocation for a library workspace (:meth:`bytes`), noted for
        :func:`loaded_workspace` while it lives."""
        base = self.bytes(framework, nbytes, True)
        _WORKSPACES[base.ptr] = base.ptr + nbytes
        weakref.finalize(base.array, _WORKSPACES.pop, base.ptr, None)
        return base

    def bytes(self, framework: str, nbytes: int, zero: bool) -> ByteBase:
        """``nbytes`` of device memory of ``framework`` ("torch", "cupy", or "" for a
        :class:`~pycudagraph.DeviceBuffer`), zeroed when ``zero``."""
        if nbytes > _MAX:
            self.fail(f"an allocation of {nbytes} bytes")
        if framework == "torch":
            torch = self._torch()
            make = torch.zeros if zero else torch.empty
            arr = make(nbytes, dtype=torch.uint8, device=self.device)
            return ByteBase(arr, int(arr.data_ptr()), nbytes, framework)
        if framework == "cupy":
            cupy = self._cupy()
            arr = (cupy.zeros if zero else cupy.empty)(nbytes, cupy.uint8)
            return ByteBase(arr, int(arr.data.ptr), nbytes, framework)
        buf = DeviceBuffer.from_array(np.zeros(nbytes, np.uint8)) if zero else DeviceBuffer(nbytes)
        return ByteBase(buf, int(buf.ptr), nbytes, framework)

    def view(self, base: ByteBase, offset: int, a: dict, keep=None):
        """The output array of template ``a`` whose data address is ``offset`` bytes into
        ``base`` (checked to lie inside it)."""
        dt, itemsize = self.dtype(a)
        before, after = self.span(a, itemsize)
        if offset - before < 0 or offset + after > base.nbytes:
            self.fail(f"an output of {before + after} bytes at offset {offset} does not fit "
                      f"in its {base.nbytes}-byte place")
        if a["framework"] != base.framework:
            self.fail(f"a {a['framework']} output in {base.framework or 'a buffer'}'s memory")
        if a["framework"] == "torch":
            torch = self._torch()
            if before + after == 0:
                return torch.empty_strided(a["shape"], a["strides"], dtype=dt, device=self.device)
            if offset % itemsize:
                self.fail(f"an output at offset {offset}, not a multiple of {itemsize} bytes")
            flat = base.array[offset:offset + after].view(dt)
            return flat.as_strided(a["shape"], a["strides"])
        cupy = self._cupy()
        return cupy.ndarray(a["shape"], dt, memptr=base.array.data + offset, strides=a["strides"])

    def outputs(self, t: dict, place):
        """The outputs of a call from their template; ``place(at) -> (ByteBase, offset)``."""
        (kind, v), = t.items()
        if kind == "array":
            base, offset = place(v["at"])
            return self.view(base, offset, v)
        if kind == "tuple":
            return tuple(self.outputs(x, place) for x in v)
        if kind == "list":
            return [self.outputs(x, place) for x in v]
        if kind == "dict":
            return {k: self.outputs(x, place) for k, x in v}
        return v

