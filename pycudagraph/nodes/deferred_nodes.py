"""Kernel nodes whose objects are made on first use: what a graph file's runs of kernel
records add.

A loaded graph's long runs of kernel nodes are added in bulk (one ``cuGraphAddKernelNode``
each, the params structs written in compiled code: :func:`add_run`) with no Python object
made per node: a graph that is loaded, instantiated and launched never needs them. The table keeps the records (:attr:`NodeTable.deferred
<pycudagraph.nodes.table.NodeTable>`), and the first read of a node (``table.node(h)``:
``graph.nodes``, the one walk, a save, an edge, ``exe.set_arg``) makes its
:class:`~pycudagraph.nodes.KernelNode` from its record, the same object the node-by-node
add makes: its kernel, its arguments by name, its packed launch.
"""

from __future__ import annotations

import threading

import numpy as np

from .._cuda import bulk, fast
from .._cuda.bulk import RECORD_WORDS, arg_values
from ..compile.args import ArgPack
from .kernel_node import KernelNode

__all__ = ["DeferredKernelNodes", "deferrable", "add_run"]


def deferrable(kernels: tuple, used: list) -> bool:
    """Whether nodes of the kernels ``used`` (indices into ``kernels``) can be added from
    their records with no object: each a :class:`~pycudagraph.Kernel` with one kernel
    parameter per argument slot (no hidden parameters, no argument split over several) and
    whose launch is its caller's to choose (not a Triton kernel's). No CUDA call."""
    for j in used:
        k = kernels[j]
        layout = getattr(k, "layout", None)
        if layout is None or layout.pointer_offsets != layout.offsets:
            return False
        origin = getattr(k, "origin", None)
        if origin is not None and not origin.free_launch:
            return False
    return True


def add_run(table, kernels: tuple, funcs: dict, r, d, args, used=None) -> list:
    """Add the kernel nodes of records ``r`` (a run of a graph file's records, checked by
    the file's check: their dependencies positions in ``d`` of earlier records of the run,
    their arguments in ``args``) with no object made per node, and keep their records in
    ``table.deferred``, which makes each node's :class:`KernelNode` on first use. Returns
    the node handles (ints).

    Each kernel's argument length (:func:`.bulk.checked_records`) and its limits against
    its first record (:func:`.bulk.ready`) are checked before any node is added; then one
    ``cuGraphAddKernelNode`` per record: in compiled code, each params struct written
    from its kernel's plan and each launch checked against its limits
    (:func:`pycudagraph._cuda.fast.add_record_nodes`); where that is not taken, every
    launch checked here (:func:`.bulk.check_launches`, naming a record over its kernel's
    limits) and the params structs written for the whole run
    (:func:`.bulk.function_params`, :func:`pycudagraph._cuda.fast.add_function_nodes`).
    Either removes what it added at a refusal: a failed call leaves the graph as it was.
    Each kernel's ``CUfunction`` on the current device (``Kernel.current_function``) is
    kept in ``funcs`` (kernel index -> function) for the next run and the node objects.
    ``used``: :func:`.bulk.used_kernels` of ``r``, found when not given."""
    used = used or bulk.used_kernels(r)
    r, d = bulk.checked_records(kernels, r, d, used)
    bulk.ready(kernels, r, used)  # each kernel's limits read: what the compiled add checks by
    raw = int(table.raw)
    handles = fast.add_record_nodes(raw, kernels, r, args, d)
    for j in used[0]:
        if j not in funcs:
            funcs[j] = kernels[j].current_function()
    if handles is None:  # not taken in compiled code: every launch checked here, named
        bulk.check_launches(kernels, r, used)
        func_of = [funcs.get(j, 0) for j in range(len(kernels))]
        starts = [[o - k.layout.values_offset for o in k.layout.offsets] if j in funcs else []
                  for j, k in enumerate(kernels)]
        handles = fast.add_function_nodes(raw, bulk.function_params(func_of, starts, r, args),
                                          r, d)
    if table.deferred is None:
        table.deferred = DeferredKernelNodes(kernels, funcs, args)
        # no node object holds the kernels (their modules) for the graph's execs: the
        # graph's ledger does, which every exec made from it keeps
        table.ledger.keep_also(kernels)
    table.deferred.added(handles, r)
    return handles


class DeferredKernelNodes:
    """The records of one graph's kernel nodes added without their objects.

    Parameters
    ----------
    kernels : tuple
        The :class:`~pycudagraph.Kernel` of each kernel index the records use.
    funcs : dict
        Kernel index -> the ``CUfunction`` (an int) the nodes were added with.
    args
        The argument bytes the records point into, as the nodes were added (a numpy array:
        kept, not copied, and never written again where these records point).
    """

    __slots__ = ("kernels", "funcs", "args", "runs", "index", "lock")

    def __init__(self, kernels: tuple, funcs: dict, args):
        self.kernels, self.funcs, self.args = kernels, funcs, args
        self.runs: list = []  # (node handles, their records) per run, until indexed
        self.index: dict = {}  # node handle -> its record (12 ints)
        self.lock = threading.Lock()

    def added(self, handles: list, recs) -> None:
        """The nodes of records ``recs`` were added as ``handles``. No CUDA call."""
        with self.lock:
            self.runs.append((handles, recs))

    def _indexed(self) -> dict:
        """The index, brought up to date (made at the first ask, not at the add): per node
        handle its record as 12 ints (:data:`pycudagraph._cuda.bulk.RECORD`'s words)."""
        if self.runs:
            for handles, recs in self.runs:
                words = np.ascontiguousarray(recs).view("<u4").reshape(len(recs), RECORD_WORDS)
                self.index.update(zip(handles, words.tolist()))
            self.runs = []
        return self.index

    def pack(self, h: int):
        """The packed launch node ``h`` was added with (a new :class:`ArgPack`), or None for
        a handle that is not one of these nodes. No CUDA call."""
        with self.lock:
            rec = self._indexed().get(h)
        if rec is None:
            return None
        j, g0, g1, g2, b0, b1, b2, smem, off, length = rec[:10]
        kernel = self.kernels[j]
        return ArgPack(kernel.layout, kernel, arg_values(kernel, self.args[off:off + length]),
                       (g0, g1, g2), (b0, b1, b2), smem, func=self.funcs[j])

    def make(self, table, h: int):
        """``table``'s node of handle ``h``: the one it has, else the :class:`KernelNode`
        made from its record and recorded in ``table``, once (a second thread asking
        meanwhile gets the same object); None for a handle neither knows. No CUDA call."""
        with self.lock:
            node = table.nodes.get(h)
            if node is not None or h not in self._indexed():
                return node
        pack = self.pack(h)
        with self.lock:
            node = table.nodes.get(h)
            if node is None and pack is not None:  # (None: forgotten meanwhile)
                node = table.register(KernelNode(table, h, pack), pack)
            return node

    def forget(self, h: int) -> None:
        """Node ``h`` was removed: its handle may name another node later."""
        with self.lock:
            self._indexed().pop(h, None)

    def handles(self) -> list:
        """The handles of every node of these records, in the order they were added."""
        with self.lock:
            return list(self._indexed())
