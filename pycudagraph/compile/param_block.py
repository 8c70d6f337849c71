"""A kernel's parameter block built on the CPU: what :meth:`Kernel.pack_args
<pycudagraph.compile.kernel.Kernel.pack_args>` returns.

The arguments are packed as a launch packs them (an :class:`~pycudagraph.compile.args.ArgPack`:
the same conversions and checks), then each kernel parameter's bytes are placed at its
offset in the block the kernel reads: the offset the compiled kernel records (a CUBIN's
``EIATTR_KPARAM_INFO``, or PTX ``.param`` alignments), or the next multiple of the
parameter's alignment. No CUDA call. :class:`KernelParamBlock` gives a kernel these (its
``pack_args`` and ``param_offsets``) and the compiled facts its layout is checked against.
"""

from __future__ import annotations

from ..errors import ArgumentError
from .args import ArgPack, Layout
from .reconcile import check_declared, expanded
from .signature import Param

__all__ = ["param_block", "param_offsets", "KernelParamBlock"]


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


class KernelParamBlock:
    """What a :class:`~pycudagraph.Kernel` knows of its parameter block without a GPU: the
    compiled kernel's facts, the block :meth:`pack_args` makes and where each parameter
    sits in it. Mixed into ``Kernel`` (which has ``name``, ``symbol``, ``module``,
    ``origin``, ``_declared`` and ``_layout``)."""

    __slots__ = ()

    def _compiled(self):
        """The compiled facts of this kernel (:class:`~.ptx.CompiledParam` tuple) or None."""
        origin = self.origin
        entries = origin.entries if origin is not None else getattr(self.module, "entries", {})
        return entries.get(self.symbol)

    def _compiled_params(self, params, hidden=()) -> tuple[Param, ...]:
        """``params`` checked against the compiled facts (no GPU needed). No CUDA call."""
        compiled = self._compiled()
        if compiled is not None and len(expanded(params)) == len(params):
            params = check_declared(self.name, params, compiled[:len(compiled) - len(hidden)])
        return params

    def pack_args(self, args) -> bytes:
        """The parameter block a launch hands the kernel for ``args``: each value checked as
        :meth:`launch` checks it (:class:`ArgumentError` naming the parameter and the
        value) and written at its parameter's offset. No CUDA call, no GPU needed for a
        module compiled with ``arch=``: sizes and offsets come from its PTX or CUBIN."""
        return param_block(self._known_layout(), args, self._compiled())

    def param_offsets(self) -> list[int]:
        """Where each parameter starts in the block, as :meth:`pack_args` places it: the
        compiled kernel's offsets (PTX/CUBIN), or the next multiple of each parameter's
        alignment (hidden parameters included). No CUDA call, as ``pack_args``."""
        return param_offsets(self._known_layout(), self._compiled())

    def _known_layout(self) -> Layout:
        """The layout, or without a GPU the declared signature's (checked against the
        compiled kernel). No CUDA call."""
        layout = self._layout
        if layout is None:
            if self._declared is None:
                raise ArgumentError(f"{self.name}: its parameters are known from the loaded "
                                    "image only: pass signature=, or load it on a GPU")
            hidden = self.origin.hidden if self.origin is not None else ()
            layout = Layout(self.name, self._compiled_params(self._declared, hidden), hidden)
        return layout
