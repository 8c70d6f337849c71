"""Records of library functions (a graph file's kernels saved by name) checked and turned
into ``CUDA_KERNEL_NODE_PARAMS`` once, then added run by run.

A graph file of a PyTorch model holds its kernel nodes as short runs of records between
its copies and memsets (a run of about a dozen kernels in a GPT-2 layer). Checking each
run's records, reading each function's argument offsets and writing each run's params
structs cost the same fixed numpy work per run, whatever its length; :class:`FunctionRecords`
does that work once for all the records of a file, and :meth:`FunctionRecords.add` adds any
run of them (``cuGraphAddKernelNode`` per record, :func:`pycudagraph._cuda.fast.add_function_nodes`).
"""

from __future__ import annotations

import numpy as np

from .._cuda import bulk, fast
from ..errors import ArgumentError
from .arg_slots import ArgSpans
from .captured_args import function_offsets

__all__ = ["FunctionRecords"]


class FunctionRecords:
    """Records of library functions, every field checked and their params structs written
    (no CUDA call but ``cuFuncGetParamInfo``, once per function and kept by handle).

    Parameters
    ----------
    cls : type
        The node class each added node is made as
        (:class:`~pycudagraph.nodes.captured_kernel.CapturedKernelNode`).
    funcs, sizes : dict
        Per kernel index the records use: the ``CUfunction`` (an int) and its argument
        sizes in bytes, checked against ``cuFuncGetParamInfo``.
    recs, args, deps
        The records (:data:`pycudagraph._cuda.bulk.RECORD`), the argument bytes (a numpy
        array, which must stay alive and in place while nodes are added: the params structs
        point into it) and the dependencies (u32 positions of earlier records of a run).
    names : dict, optional
        Per kernel index, the name an error gives it (else "function <index>").
    """

    __slots__ = ("cls", "recs", "deps", "args", "params", "spans")

    def __init__(self, cls, funcs: dict, sizes: dict, recs, args, deps, names=None):
        self.cls = cls
        recs, raw, deps, used = bulk.check_function_records(funcs, sizes, recs, args, deps)
        self.recs, self.deps = recs, deps
        self.args = np.frombuffer(raw, np.uint8)  # the caller's bytes, not a copy
        top = used[-1] + 1 if used else 0
        func_of, starts = [0] * top, [[] for _ in range(top)]
        # per kernel: (argument index, offset in the parameter space, start, end in its bytes)
        self.spans = {}
        for k in used:
            func, n = funcs[k], sizes[k]
            try:  # the sizes checked
                offsets = function_offsets(func, n)
            except ArgumentError as exc:
                raise ArgumentError(f"{(names or {}).get(k, f'function {k}')}: {exc}") from None
            cuts = bulk.spans(n)
            self.spans[k] = tuple((i, o, a, b) for i, (o, (a, b)) in enumerate(zip(offsets, cuts)))
            func_of[k], starts[k] = func, [a for a, _ in cuts]
        self.params = bulk.function_params(func_of, starts, recs, self.args)

    def add(self, table, first: int = 0, count: int | None = None) -> list:
        """The nodes of records ``first`` ... ``first + count - 1`` (a run: their
        dependencies are positions inside it), in order, each a :attr:`cls` registered in
        ``table`` and knowing its argument bytes as they are now in ``args``: one
        ``cuGraphAddKernelNode`` per record. A refusal removes the run's nodes added
        before it and raises; the graph is as it was."""
        if not (callable(getattr(table, "register", None)) and hasattr(table, "ledger")):
            raise ArgumentError(f"FunctionRecords.add: table must be a graph's NodeTable, got "
                                f"{type(table).__name__}")
        n = len(self.recs)
        count = n - first if count is None else count
        if not (0 <= first and 0 <= count and first + count <= n):
            raise ArgumentError(f"FunctionRecords.add: records {first}..{first + count} are not "
                                f"inside the {n} records")
        recs = self.recs[first:first + count]
        size = bulk.PARAMS.itemsize
        handles = fast.add_function_nodes(int(table.raw), self.params[first * size:], recs,
                                          self.deps)
        offs = recs["arg_offset"].tolist()
        lo = min(offs, default=0)  # the run's argument bytes, copied once
        hi = int((recs["arg_offset"] + recs["arg_length"]).max(initial=lo))
        data = self.args[lo:hi].tobytes()
        cls, made, register, spans = self.cls, [], table.register, self.spans
        for h, k, off in zip(handles, recs["kernel"].tolist(), offs):
            made.append(register(cls(table, h, known=ArgSpans(data, off - lo, spans[k]))))
        return made
