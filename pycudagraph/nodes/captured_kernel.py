"""Kernel nodes pycudagraph did not build (captured from PyTorch, CuPy, cuBLAS, or listed
in a graph made elsewhere): :class:`CapturedKernelNode`, the kernel node read back from the
driver. Its launch is read with ``cuGraphKernelNodeGetParams`` and its arguments are bytes
addressed by index (:class:`~pycudagraph.nodes.captured_args.CapturedArgs`).
"""

from __future__ import annotations

import numpy as np

from .._cuda import call, check, context, dr, fast
from ..compile.dims import dims3, shared_mem_arg
from .captured_args import CapturedArgs, function_offsets, function_params
from .function_records import FunctionRecords
from .exec_node import ExecNode
from .kernel_node import KernelNode, KernelParams, short_kernel_name

__all__ = ["CapturedKernelNode"]


class CapturedKernelNode(KernelNode):
    """A kernel node read back from the driver (captured, listed, cloned from a graph made
    elsewhere): no signature; its launch is read with ``cuGraphKernelNodeGetParams`` and
    its arguments are addressed by index, as bytes (:class:`CapturedArgs`)."""

    __slots__ = ("_known",)  # the argument spans it was built with, until changed here

    def __init__(self, table, h: int, pack=None, known=None):
        super().__init__(table, h, pack)
        self._known = known

    @classmethod
    def read(cls, table, h: int) -> "CapturedKernelNode":
        return cls(table, h)

    @classmethod
    def build_function(cls, table, deps, func: int, grid, block, shared_mem: int, args,
                       keep=()) -> "CapturedKernelNode":
        """A node launching the ``CUfunction`` ``func`` (a library's kernel, found by name)
        with argument bytes ``args``, the sizes checked with ``cuFuncGetParamInfo``:
        ``cuGraphAddKernelNode`` (the driver twin of ``cudaGraphAddKernelNode``). Its
        arguments are addressed by index, as a captured node's; ``keep`` is held alive."""
        raw_deps, n = table.dep_list(deps)
        if check.tracer is None:  # one packed buffer through ctypes (fast.add_function_node)
            offsets = function_offsets(func, [len(a) for a in args])  # the sizes checked
            dims = (*dims3(grid, "grid"), *dims3(block, "block"), shared_mem_arg(shared_mem))
            h = fast.add_function_node(int(table.raw), [int(d) for d in raw_deps], int(func),
                                       dims, args)
        else:  # through cuda.bindings: the trace shows the params struct's fields
            p, _bufs, offsets = function_params(func, grid, block, shared_mem, args)
            h = call(dr.cuGraphAddKernelNode, dr.CUgraph(int(table.raw)),
                     [dr.CUgraphNode(int(d)) for d in raw_deps], n, p)
        # the bytes just added: its sites are read from them, not read back (a graph file's
        # rebind plan looks at every node); set_params here forgets them
        known = [(i, off, bytes(a)) for i, (off, a) in enumerate(zip(offsets, args))]
        return table.register(cls(table, int(h), known=known), *keep)

    @classmethod
    def run_records(cls, funcs: dict, sizes: dict, recs, args, deps,
                    names: dict | None = None) -> FunctionRecords:
        """Records of library functions (a graph file's kernels saved by name) checked and
        their params structs written once, to add run by run (:meth:`FunctionRecords.add
        <pycudagraph.nodes.function_records.FunctionRecords.add>`, one
        ``cuGraphAddKernelNode`` per record, each node knowing its arguments as
        :meth:`build_function` knows them). ``funcs`` and ``sizes`` give, per kernel index,
        the ``CUfunction`` and its argument sizes (checked once per function against
        ``cuFuncGetParamInfo``); ``recs``, ``args`` and ``deps`` are a graph file's checked
        records (:data:`.bulk.RECORD`), argument bytes (a numpy array) and dependencies
        (earlier records of a run); ``names`` per kernel index for errors."""
        return FunctionRecords(cls, funcs, sizes, recs, args, deps, names)

    def arg_spans(self) -> list:
        """``(index, offset, bytes)`` of every argument as the graph holds it: the bytes it
        was built with (:meth:`build_function`; for records of a graph file an
        :class:`~pycudagraph.nodes.arg_slots.ArgSpans` over the file's bytes) until
        :meth:`set_params` changes them, else read back (``cuGraphKernelNodeGetParams``,
        ``cuFuncGetParamInfo``)."""
        known = self._known
        return known if known is not None else CapturedArgs.of(self).spans()

    @property
    def kernel_name(self) -> str:
        """A readable form of the kernel's (mangled) name (``cuGraphKernelNodeGetParams``,
        ``cuFuncGetName``)."""
        return short_kernel_name(self.mangled_name)

    @property
    def mangled_name(self) -> str:
        """The name in the kernel image (``cuFuncGetName`` / ``cuKernelGetName``)."""
        p = self.driver_params()
        if int(p.func):
            name = call(dr.cuFuncGetName, p.func)
        else:
            name = call(dr.cuKernelGetName, p.kern)
        return check.decode(name)

    @property
    def kernel(self):
        """``None``: the kernel was not loaded by pycudagraph. No CUDA call."""
        return None

    @property
    def function(self) -> int:
        """The ``CUfunction`` the node launches, as an int (``cuGraphKernelNodeGetParams``;
        ``cuKernelGetFunction`` in the current context when the node names a ``CUkernel``)."""
        p = self.driver_params()
        if int(p.func):
            return int(p.func)
        return int(call(dr.cuKernelGetFunction, p.kern))

    @property
    def arg_bytes(self) -> tuple:
        """``(offset, bytes)`` of each argument as the graph holds it, ``offset`` being its
        place in the parameter space (``cuGraphKernelNodeGetParams``, ``cuFuncGetParamInfo``)."""
        args = CapturedArgs.of(self)
        return tuple((off, args.get(i)) for i, (off, _) in enumerate(args.info))

    @property
    def params(self) -> KernelParams:
        """Kernel name, grid, block and dynamic shared memory (``cuGraphKernelNodeGetParams``)."""
        p = self.driver_params()
        return KernelParams(self.kernel_name, (p.gridDimX, p.gridDimY, p.gridDimZ),
                            (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes)

    @property
    def arguments(self) -> list[bytes]:
        """Each argument's bytes as the graph holds them (``cuGraphKernelNodeGetParams``,
        sizes from ``cuFuncGetParamInfo``)."""
        args = CapturedArgs.of(self)
        return [args.get(i) for i in range(len(args.info))]

    def set_params(self, args=None, grid=None, block=None, shared_mem=None) -> None:
        """Change the node in its graph (``cuGraphKernelNodeSetParams``); ``args`` by index
        ({index: value}) or a full sequence, each value encoded to its argument's size."""
        self.check_live()
        state = CapturedArgs.of(self)
        keep = state.apply(args, f"set_params(KernelNode 0x{self._h:x})")
        context.ensure_device()
        self._known = None  # read back from now on (also should the call below fail)
        call(dr.cuGraphKernelNodeSetParams, dr.CUgraphNode(self._h),
             state.struct_with(grid, block, shared_mem))
        objs = [v for _, v in keep if not isinstance(v, (int, float, bytes, np.generic))]
        if objs:
            self._table.keep_also(self, *objs)

    def fields(self) -> dict:
        """``function``, ``grid``, ``block``, ``shared_mem`` and ``args``: each argument's
        bytes by index (``cuGraphKernelNodeGetParams``, ``cuFuncGetParamInfo``); the name is
        :meth:`label`, the addresses :meth:`sites`."""
        args = CapturedArgs.of(self)
        p = args.params
        return {"function": int(p.func) or int(p.kern),
                "grid": (p.gridDimX, p.gridDimY, p.gridDimZ),
                "block": (p.blockDimX, p.blockDimY, p.blockDimZ),
                "shared_mem": int(p.sharedMemBytes),
                "args": {i: args.get(i) for i in range(len(args.info))}}

    def exec_record(self, exec_raw, source: tuple, retire) -> ExecNode:
        """The exec's record, with the exec's own copy of the argument bytes."""
        rec = ExecNode(self, exec_raw, source, retire)
        rec.args = CapturedArgs.of(self)
        return rec

    def exec_set(self, rec: ExecNode, args=None, grid=None, block=None, shared_mem=None,
                  **attributes) -> None:
        """``cuGraphExecKernelNodeSetParams`` with the exec's copy of the argument bytes."""
        if attributes:
            return super().exec_set(rec, args, grid, block, shared_mem, **attributes)
        rec.args.exec_set(rec, args, grid, block, shared_mem)
