"""Where each input of a graphed call sits in an exec, found once at capture, and the
set-params calls that move the exec to new input addresses.

At capture, every address the graph bakes in (one walk,
:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>`, asking each node for its
:meth:`~pycudagraph.nodes.base.Node.sites`: kernel argument slots, copy sides, memset
destinations ...) that lies inside an input's bytes ``[lo, hi)`` becomes a site of the plan:
(node, slot, input, offset from the input's data address). Kernel slots are the 8-byte slots
at 8-byte aligned positions of the parameter buffer (where a pointer can sit). A later call
with inputs at new addresses writes ``new + offset`` into the slots of the inputs that moved,
in the exec's record of each kernel node, and makes one ``cuGraphExecKernelNodeSetParams``
per kernel node touched; any other site is written by its node's
:meth:`~pycudagraph.nodes.base.Node.write_site` (``cudaGraphExecMemcpyNodeSetParams1D`` /
``cudaGraphExecMemsetNodeSetParams`` for copies and memsets): nothing is searched again.

A graph loaded from a file (``pcg.load_graphed``) says where its library kernels hold the
inputs' addresses: its relocations into the inputs' slots
(:func:`~pycudagraph.files.slot_sites.file_sites`); those nodes are planned from them,
their bytes not searched, and a byte pattern that only happens to lie inside an input's
range is never taken for its address.

What cannot be proven by looking at the graph is listed in :attr:`RebindPlan.unproven`
(a host-to-device copy may upload a table of addresses; a node whose addresses cannot be
read, or that may use addresses its sites do not show, such as a host node):
``graphed(check=True)`` compares with eager execution there.
"""

from __future__ import annotations

import ctypes
import struct

from .._cuda import fast
from ..apply.rebind import exec_walk
from ..errors import PyCudaGraphError
from ..nodes.arg_slots import may_hold, value_marks
from ..nodes.base import Node
from ..nodes.captured_args import CapturedArgs

__all__ = ["RebindPlan"]

_U64 = struct.Struct("<Q")
#: The side of a copy that names host memory (a :class:`~pycudagraph.nodes.facets.Site`'s).
_HOST_SIDE = "host"


def _label(node) -> str:
    """``KernelNode 0x...``: a node named without a driver call."""
    return f"{type(node).__name__} 0x{int(node):x}"


class _KernelSite:
    """One kernel node's slots to rewrite: (argument buffer, byte offset, input, delta),
    and the same as one flat tuple (slot address, input, delta, ...) for the compiled
    entry that writes them and sets the params in one call."""

    __slots__ = ("node", "node_h", "address", "struct", "slots", "flat")

    def __init__(self, node, rec):
        self.node = node
        self.node_h = rec.node_h
        self.struct = rec.args.struct_with()  # CUDA_KERNEL_NODE_PARAMS over the record's bytes
        self.address = int(self.struct.getPtr())
        self.slots: list = []
        self.flat: tuple = ()

    def set_slots(self, slots: list) -> None:
        """``slots``: [(argument buffer, byte offset, input, delta)]."""
        self.slots = slots
        self.flat = tuple(x for buf, k, i, delta in slots
                          for x in (ctypes.addressof(buf) + k, i, delta))

    def __repr__(self) -> str:  # how a trace shows the parameters passed
        return "&CUDA_KERNEL_NODE_PARAMS{...}"

    def write(self, exec_raw, ptrs) -> None:
        if fast.exec_kernel_node_set_slots(exec_raw, self.node_h, self, self.node, self.flat,
                                           ptrs):
            return
        for buf, k, i, delta in self.slots:
            _U64.pack_into(buf, k, ptrs[i] + delta)
        fast.exec_kernel_node_set_params(exec_raw, self.node_h, self, self.node)


class _NodeSite:
    """A node's sites other than kernel slots: [(site, input, delta)], each written by the
    node's ``write_site`` (``cudaGraphExecMemcpyNodeSetParams1D`` /
    ``cudaGraphExecMemsetNodeSetParams`` for copies and memsets)."""

    __slots__ = ("node", "rec", "fields")

    def __init__(self, node, rec):
        self.node = node
        self.rec = rec
        self.fields: list = []

    def write(self, _exec_raw, ptrs) -> None:
        self.node.write_sites(self.rec, [(site, ptrs[i] + d) for site, i, d in self.fields])


class RebindPlan:
    """The sites of each input of one exec (see the module docstring).

    Parameters
    ----------
    exe : GraphExec
        The exec to update; its records (``exe.exec_node``) hold the argument bytes.
    graph : Graph
        Its captured graph.
    inputs : list of ArrayInfo
        The inputs as captured (their ``ptr``, ``lo``, ``hi``).
    known : FileSites, optional
        For a graph loaded from a file: the nodes whose addresses its relocations give
        (:class:`~pycudagraph.files.slot_sites.FileSites`, for the inputs' slots); their
        sites are taken from it, their bytes not searched.

    Attributes
    ----------
    slots : list of int
        How many addresses of each input the graph holds.
    captured : list of (int, int, int)
        Where each input was when the graph was made: its data address and byte span
        ``(ptr, lo, hi)`` (the graph holds these addresses; the exec holds :attr:`bound`).
    unproven : list of str
        Why rebinding could still miss an address (see the module docstring).
    """

    def __init__(self, exe, graph, inputs, known=None):
        self.exe = exe
        self._raw = int(exe.handle)
        self.bound = [info.ptr for info in inputs]
        self.captured = [(info.ptr, info.lo, info.hi) for info in inputs]
        self.slots = [0] * len(inputs)
        self.unproven: list[str] = []
        self._by_input: list[list] = [[] for _ in inputs]
        ranges = [(info.lo, info.hi, info.ptr) for info in inputs]

        def which(v: int):
            for i, (lo, hi, ptr) in enumerate(ranges):
                if lo <= v < hi:
                    return i, v - ptr
            return None

        def inside(values) -> bool:
            return any(lo <= v < hi for v in values for lo, hi, _ in ranges)

        marks = value_marks([(lo, hi) for lo, hi, _ in ranges])
        accounted = known.accounted if known is not None else ()
        for node, settable in exec_walk(graph):
            if id(node) in accounted:  # its file says where its input addresses are
                sites = known.sites.get(id(node))
                if sites is not None or node.hidden_addresses:
                    self._plan_node(node, not settable, which, inside, sites=sites or [])
                continue
            self._plan_node(node, not settable, which, inside, marks)

    def _plan_node(self, node, inside_child: bool, which, inside, marks=None,
                   sites=None) -> None:
        """The node's sites holding an input address, planned (see the module docstring).
        ``sites``: the node's sites as its graph file's relocations give them (nothing is
        searched); else those :meth:`_sites` finds."""
        if node.hidden_addresses:
            self.unproven.append(f"{_label(node)} {node.hidden_addresses}; rebinding does "
                                 "not reach inside it")
        if sites is None:
            sites = self._sites(node, inside, marks)
            if sites is None:
                return
        if any(s.side == _HOST_SIDE and s.place == "src" for s in sites):
            self.unproven.append(f"{_label(node)} copies host memory to the device: if it "
                                 "uploads a table of addresses, rebinding cannot see them")
        hits = [(s,) + found for s in sites for found in (which(s.address),) if found]
        if not hits:
            return
        where = "a kernel argument" if hits[0][0].arg is not None else f"{hits[0][0].place}"
        if inside_child:
            raise PyCudaGraphError(f"graphed: an input address sits in {where} of "
                                   f"{_label(node)}, inside a child graph node, which an exec "
                                   "cannot change node by node; this input key cannot be "
                                   "rebound")
        if type(node).write_site is Node.write_site or not node.exec_fields:
            raise PyCudaGraphError(f"graphed: an input address sits in {where} of "
                                   f"{_label(node)}, which an exec cannot change node by node "
                                   "(a 2D/3D copy, a batch memory operation ...); this input "
                                   "key cannot be rebound")
        rec = self.exe.exec_node(node)
        slots = [h for h in hits if h[0].arg is not None]
        if slots:
            self._plan_kernel(node, rec, slots)
        others = [h for h in hits if h[0].arg is None]
        if others:
            site = _NodeSite(node, rec)
            site.fields = others
            self._add(site, [i for _, i, _ in others])

    def _sites(self, node, inside, marks) -> list | None:
        """The node's sites in use; None when none can lie in an input or they cannot be
        read (said in :attr:`unproven`). A kernel node none of whose addresses lies in an
        input is passed at a search of its argument bytes
        (:meth:`~pycudagraph.nodes.kernel_sites.KernelSites.arg_spans`) for the inputs'
        ``marks`` (:func:`~pycudagraph.nodes.arg_slots.may_hold`), or at a look at its slot
        values (:meth:`~pycudagraph.nodes.kernel_sites.KernelSites.addresses`): its sites
        are made only when one lies in an input."""
        spans = getattr(node, "arg_spans", None) if marks is not None else None
        if spans is not None:
            try:
                if not may_hold(spans(), marks):
                    return None
            except PyCudaGraphError:
                pass  # said below, as the sites' reader says it
        quick = getattr(node, "addresses", None)
        if quick is not None:
            try:
                if not inside(quick()):
                    return None
            except PyCudaGraphError:
                pass  # said below, as the sites' reader says it
        try:
            return [s for s in node.sites() if s.role == "use"]
        except PyCudaGraphError as exc:  # arguments in 'extra', bodies the driver hides
            self.unproven.append(f"{_label(node)}: its addresses cannot be read ({exc})")
            return None

    def _add(self, site, inputs: list) -> None:
        for i in inputs:
            self.slots[i] += 1
        for i in sorted(set(inputs)):
            self._by_input[i].append(site)

    def _plan_kernel(self, node, rec, hits) -> None:
        """Kernel slots: written into the record's own bytes, one call per node."""
        if not isinstance(rec.args, CapturedArgs):
            raise PyCudaGraphError(f"graphed: {_label(node)} was built, not captured; its "
                                    "arguments are rebound with exe.set_arg instead")
        site = _KernelSite(node, rec)
        site.set_slots([(rec.args.bufs[s.arg], s.offset, i, delta) for s, i, delta in hits])
        self._add(site, [i for _, i, _ in hits])

    def sites(self, changed) -> list:
        """The sites to rewrite when inputs ``changed`` (indices) moved. No CUDA call."""
        if len(changed) == 1:
            return self._by_input[changed[0]]
        seen, out = set(), []
        for i in changed:
            for site in self._by_input[i]:
                if id(site) not in seen:
                    seen.add(id(site))
                    out.append(site)
        return out

    def apply(self, ptrs: list, changed: list) -> int:
        """Point the exec at inputs ``ptrs`` (``changed``: the indices that moved); returns
        the number of set-params calls (``cuGraphExecKernelNodeSetParams``,
        ``cudaGraphExecMemcpyNodeSetParams1D``, ``cudaGraphExecMemsetNodeSetParams``). On
        a failure the sites already changed are set back and the error is raised."""
        raw = self._raw
        sites = self._by_input[changed[0]] if len(changed) == 1 else self.sites(changed)
        done = 0
        try:
            for site in sites:
                site.write(raw, ptrs)
                done += 1
        except BaseException:
            for site in sites[:done]:
                try:
                    site.write(raw, self.bound)
                except Exception:  # noqa: BLE001 - the first error is the one to raise
                    pass
            for site in sites:  # the bytes of the failed site too
                if isinstance(site, _KernelSite):
                    for buf, k, i, delta in site.slots:
                        _U64.pack_into(buf, k, self.bound[i] + delta)
            raise
        self.bound = list(ptrs)
        return done
