"""A kernel's parameter block built on the CPU: what :meth:`Kernel.pack_args
<pycudagraph.compile.kernel.Kernel.pack_args>` returns.

The arguments are packed as a launch packs them (an :class:`~pycudagraph.compile.args.ArgPack`:
the same conversions and checks), then each kernel parameter's bytes are placed at its
offset in the block the kernel reads: the offset the compiled kernel records (a CUBIN's
``EIATTR_KPARAM_INFO``, or PTX ``.param`` alignments), or the next multiple of the
parameter's alignment. No CUDA call.
"""

from __future__ import annotations

from .args import ArgPack

__all__ = ["param_block", "param_offsets"]


def _alignments(layout) -> list[int]:
    """The alignment of each kernel parameter (an argument may fill several, or none)."""
    out = []
    for p in layout.params:
        if p.parts:
            out.extend(_natural(size) for _, size in p.parts)
        else:
            out.append(max(p.align, 1))
    out.extend(_natural(size) for size in layout.hidden)
    return out


def _natural(size: int) -> int:
    align = 1
    while align < min(size, 8):
        align *= 2
    return align


def param_offsets(layout, compiled=None) -> list[int]:
    """Where each kernel parameter starts in the parameter block."""
    sizes = layout.param_sizes
    if (compiled is not None and len(compiled) == len(sizes)
            and all(c.offset is not None for c in compiled)):
        return [c.offset for c in compiled]
    out, pos = [], 0
    for size, align in zip(sizes, _alignments(layout)):
        pos = (pos + align - 1) // align * align
        out.append(pos)
        pos += size
    return out


def param_block(layout, args, compiled=None) -> bytes:
    """The parameter block for ``args`` (one value per argument of ``layout``).

    Raises
    ------
    ArgumentError
        A wrong number of arguments, or a value its parameter cannot take (naming the
        kernel, the parameter and the value).
    """
    raw = ArgPack(layout, None, args, 1, 1).raw()  # every value converted and checked
    sizes = layout.param_sizes
    offsets = param_offsets(layout, compiled)
    block = bytearray(max((o + n for o, n in zip(offsets, sizes)), default=0))
    for off, src, n in zip(offsets, layout.pointer_offsets, sizes):
        block[off: off + n] = raw[src: src + n]
    return bytes(block)
