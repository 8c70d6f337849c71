"""The addresses a kernel node bakes in, and their one writer into an exec: the ``sites``,
``exec_sites`` and ``write_site`` facets of
:class:`~pycudagraph.nodes.kernel_node.KernelNode` (and of the kernel node read back,
:class:`~pycudagraph.nodes.captured_kernel.CapturedKernelNode`).

The arguments are read as ``(index, offset, bytes)`` spans, from the launch packed here
(:func:`~pycudagraph.nodes.arg_slots.pack_spans`, by the argument's index) or, for a node read
back, from the one copy of its parameter buffer
(:class:`~pycudagraph.nodes.captured_args.CapturedArgs`, by index); the slots are read by the
one scanner, :func:`~pycudagraph.nodes.arg_slots.arg_sites`.
"""

from __future__ import annotations

from ..compile.args import ArgPack
from ..errors import ArgumentError
from .arg_slots import arg_addresses, arg_sites, pack_spans, patch_slot
from .captured_args import CapturedArgs
from .exec_node import ExecNode
from .facets import site_pairs

__all__ = ["KernelSites", "spans_of"]


def spans_of(args) -> list:
    """``(index, offset, bytes)`` of every argument of ``args``: a launch packed here (an
    ``ArgPack``) or the argument bytes of a node read back (``CapturedArgs``). No CUDA call."""
    return pack_spans(args) if type(args) is ArgPack else args.spans()


def _record(rec, where: str) -> ExecNode:
    """``rec`` checked to be an exec's record of a node (:class:`ArgumentError` otherwise)."""
    if not isinstance(rec, ExecNode):
        raise ArgumentError(f"KernelNode.{where}: rec must be an exec's record of the node "
                            f"(exe.exec_node(node)), got {type(rec).__name__}")
    return rec


class KernelSites:
    """The kernel node's site facets (mixed into ``KernelNode``)."""

    __slots__ = ()

    def sites(self) -> list:
        """Every 8-byte aligned slot of every argument (inside by-value structs too) whose
        value is at least ``1 << 16``, as :class:`~pycudagraph.nodes.facets.Site` objects
        (``"arg 2"``, ``"arg 2 +16"``). No CUDA call for a node built here; for a node read back, its
        parameter buffer is read once (``cuGraphKernelNodeGetParams``,
        ``cuFuncGetParamInfo``), and arguments it cannot read (passed in ``extra``) raise
        :class:`~pycudagraph.errors.PyCudaGraphError`."""
        return arg_sites(self.arg_spans())

    def arg_spans(self) -> list:
        """``(index, offset, bytes)`` of every argument as the graph holds it: from the
        launch packed here, or read back (``cuGraphKernelNodeGetParams``,
        ``cuFuncGetParamInfo``) for a node pycudagraph did not pack."""
        pack = self._pack
        return spans_of(pack if pack is not None else CapturedArgs.of(self))

    def addresses(self) -> list:
        """The addresses of :meth:`sites`, with no site made (a quick look for a range): the
        same reads (``cuGraphKernelNodeGetParams``, ``cuFuncGetParamInfo`` once for a node
        read back; no CUDA call for a node built here), the same errors."""
        return arg_addresses(self.arg_spans())

    def exec_sites(self, rec: ExecNode) -> list:
        """:meth:`sites` as the exec of ``rec`` holds them (its own copy of the arguments,
        which per-node updates change). No CUDA call."""
        return arg_sites(spans_of(_record(rec, "exec_sites").args))

    def write_site(self, rec: ExecNode, site, address: int) -> None:
        """``address`` into the argument slot ``site`` names, in the exec of ``rec``
        (``cuGraphExecKernelNodeSetParams``): see :meth:`write_sites`."""
        self.write_sites(rec, [(site, address)])

    def write_sites(self, rec: ExecNode, pairs) -> None:
        """Each ``(site, address)`` of ``pairs`` into its argument slot, in the exec of
        ``rec``, with one ``cuGraphExecKernelNodeSetParams`` through the record's own copy of
        the arguments (:meth:`exec_set`, so what the exec keeps follows). Everything is
        checked before the call; a refused value or a failed call changes nothing."""
        args = _record(rec, "write_sites").args
        pairs = site_pairs(pairs, "KernelNode.write_sites")
        built = type(args) is ArgPack
        current = {i: data for i, _, data in spans_of(args)}
        values: dict = {}
        for site, address in pairs:
            if site.arg not in current:
                raise ArgumentError(f"{self!r} has no argument slot {site!r}")
            i = site.arg
            if built and args.layout.params[i].parts:
                raise ArgumentError(f"{args.layout.kernel_name}() argument {i} fills several "
                                    "kernel parameters: give it a new value with exe.set_arg")
            if built and len(current[i]) == 8 and site.offset == 0:
                values[i] = address  # a whole pointer: the converter keeps what it gets
                continue
            try:
                data = patch_slot(values.get(i, current[i]), site.offset, address)
            except ArgumentError as exc:
                raise ArgumentError(f"{self!r} argument {i}: {exc}") from None
            values[i] = data
        if values:
            self.exec_set(rec, args=values)
