"""A kernel's parameter block built on the CPU: what :meth:`Kernel.pack_args
<pycudagraph.compile.kernel.Kernel.pack_args>` returns.

Each argument is converted and checked by the kernel's :class:`~pycudagraph.compile.args.Layout`
(the same checks a launch makes) and written at its parameter's offset in the block the
kernel reads: the offset the compiled kernel records (a CUBIN's ``EIATTR_KPARAM_INFO``, or
PTX ``.param`` alignments), or the next multiple of the parameter's alignment. No CUDA call.
"""

from __future__ import annotations

__all__ = ["param_block", "param_offsets"]


def param_offsets(params, compiled=None) -> list[int]:
    """Where each parameter starts in the parameter block."""
    out, pos = [], 0
    for i, p in enumerate(params):
        known = compiled[i].offset if compiled is not None and i < len(compiled) else None
        pos = known if known is not None else (pos + p.align - 1) // p.align * p.align
        out.append(pos)
        pos += p.size
    return out


def param_block(layout, args, compiled=None) -> bytes:
    """The parameter block for ``args`` (one value per parameter of ``layout``).

    Raises
    ------
    ArgumentError
        A wrong number of arguments, or a value its parameter cannot take (naming the
        kernel, the parameter and the value).
    """
    if (not isinstance(args, (tuple, list, str, bytes, dict))
            and hasattr(args, "__iter__")):
        args = tuple(args)  # a generator: read once
    layout.convert(args)  # the count and every value, as a launch checks them
    params = layout.params
    offsets = param_offsets(params, compiled)
    block = bytearray(max((o + p.size for o, p in zip(offsets, params)), default=0))
    for i, (p, off) in enumerate(zip(params, offsets)):
        block[off: off + p.size] = layout.slots[i].pack(layout.check_one(i, args[i]))
    return bytes(block)
