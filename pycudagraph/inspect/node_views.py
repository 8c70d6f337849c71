"""What an exec holds of a kernel node, and how :func:`~pycudagraph.inspect.diff.diff`
compares two values.

Every node says what it is through its facets (:meth:`Node.fields
<pycudagraph.nodes.base.Node.fields>`); an exec's own copy of a kernel's arguments (what
per-node updates made of it) is read as a :class:`KernelView`, whose :meth:`KernelView.fields`
are a kernel node's fields as the exec holds them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..compile.args import ArgPack
from ..nodes.captured_args import CapturedArgs
from ..nodes.kernel_node import pack_arguments

__all__ = ["KernelView", "held_view", "same"]

#: The fields of a kernel node an exec may change (``cuGraphExecKernelNodeSetParams``).
KERNEL_EXEC_FIELDS = frozenset({"grid", "block", "shared_mem", "args"})


@dataclass(frozen=True)
class KernelView:
    """What a kernel node launches, read the same way for every kind of kernel node.

    Attributes
    ----------
    function : int
        The ``CUfunction`` (or ``CUkernel``) handle.
    grid, block : tuple of 3 ints
    shared_mem : int
    raw : tuple of bytes
        Each argument's bytes, by index.
    names, values : tuple or None
        Parameter names and the values as stored, for a kernel with a signature.
    """

    function: int
    grid: tuple
    block: tuple
    shared_mem: int
    raw: tuple
    names: tuple | None = None
    values: tuple | None = None

    @classmethod
    def of_pack(cls, pack: ArgPack) -> "KernelView":
        """From a packed launch (a node built here, or an exec's copy of it). No CUDA call."""
        grid, block, smem = pack.dims
        return cls(pack.func, tuple(grid), tuple(block), int(smem), tuple(pack_arguments(pack)),
                   tuple(p.name for p in pack.layout.params), tuple(pack.values()))

    @classmethod
    def of_captured(cls, args: CapturedArgs) -> "KernelView":
        """From the argument bytes of a kernel node read back (No CUDA call here)."""
        p = args.params
        return cls(int(p.func) or int(p.kern), (p.gridDimX, p.gridDimY, p.gridDimZ),
                   (p.blockDimX, p.blockDimY, p.blockDimZ), int(p.sharedMemBytes),
                   tuple(args.get(i) for i in range(len(args.info))))

    #: As a kernel node's :attr:`~pycudagraph.nodes.base.Node.exec_fields`.
    exec_fields = KERNEL_EXEC_FIELDS

    @property
    def arguments(self) -> tuple:
        """Each argument's bytes, by index (:attr:`raw`). No CUDA call."""
        return self.raw

    def fields(self) -> dict:
        """A kernel node's fields: ``function``, ``grid``, ``block``, ``shared_mem`` and
        ``args`` (by name for a kernel with a signature, else each argument's bytes by
        index). No CUDA call."""
        args = (dict(zip(self.names, self.values)) if self.names is not None
                else dict(enumerate(self.raw)))
        return {"function": self.function, "grid": tuple(self.grid), "block": tuple(self.block),
                "shared_mem": self.shared_mem, "args": args}


def held_view(rec, node):
    """What the exec of ``rec`` (its record of ``node``) holds for the node: a
    :class:`KernelView` of the exec's own copy of a kernel's arguments (a packed launch or
    bytes read back), else the update twin standing for ``node``, else ``node``. Each has
    ``fields()`` and ``exec_fields``. No CUDA call for a kernel's record."""
    args = rec.args
    if args is not None:
        return KernelView.of_pack(args) if type(args) is ArgPack else KernelView.of_captured(args)
    twin = rec.twin() if rec.twin is not None else None
    return twin if twin is not None else node


def same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, float) and isinstance(b, float):  # -0.0 and NaN: by their bytes
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    handle_a, handle_b = getattr(a, "handle", None), getattr(b, "handle", None)
    if handle_a is not None and handle_b is not None:  # events, graphs: the same raw object
        try:
            return int(handle_a) == int(handle_b)
        except (TypeError, ValueError):
            pass
    try:
        equal = a == b
    except Exception:  # arrays and other objects whose == is not a bool
        return False
    return equal if isinstance(equal, bool) else False
