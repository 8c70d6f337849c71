"""Where each input of a graphed call sits in an exec, found once at capture, and the
set-params calls that move the exec to new input addresses.

At capture, every address the graph bakes in (:func:`~pycudagraph.inspect.audit.walk_nodes`:
kernel argument slots, copy sides, memset destinations) that lies inside an input's bytes
``[lo, hi)`` becomes a site: (node, slot, input, offset from the input's data address).
Only 8-byte slots at 8-byte aligned positions of the parameter buffer are read (where a
pointer can sit). A later call with inputs at new addresses writes ``new + offset`` into
the slots of the inputs that moved and makes one ``cuGraphExecKernelNodeSetParams`` per
kernel node touched (``cudaGraphExecMemcpyNodeSetParams1D`` /
``cudaGraphExecMemsetNodeSetParams`` for copies and memsets): nothing is searched again.

What cannot be proven by looking at the graph is listed in :attr:`RebindPlan.unproven`
(a host-to-device copy may upload a table of addresses; a host or batch memory-operation
node may use one): ``graphed(check=True)`` compares with eager execution there.
"""

from __future__ import annotations

import struct

from .._cuda import fast
from ..errors import PyCudaGraphError
from ..inspect.audit import pointer_slots, walk_nodes
from ..nodes import BatchMemOpNode, HostNode, KernelNode, MemcpyNode, MemsetNode
from ..nodes.captured_args import CapturedArgs

__all__ = ["RebindPlan"]

_U64 = struct.Struct("<Q")


def _label(node) -> str:
    """``KernelNode 0x...``: a node named without a driver call."""
    return f"{type(node).__name__} 0x{int(node):x}"


class _KernelSite:
    """One kernel node's slots to rewrite: (argument buffer, byte offset, input, delta)."""

    __slots__ = ("node", "node_h", "address", "struct", "slots")

    def __init__(self, node, rec):
        self.node = node
        self.node_h = rec.node_h
        self.struct = rec.args.struct_with()  # CUDA_KERNEL_NODE_PARAMS over the record's bytes
        self.address = int(self.struct.getPtr())
        self.slots: list = []

    def __repr__(self) -> str:  # how a trace shows the parameters passed
        return "&CUDA_KERNEL_NODE_PARAMS{...}"

    def write(self, exec_raw, ptrs) -> None:
        for buf, k, i, delta in self.slots:
            _U64.pack_into(buf, k, ptrs[i] + delta)
        fast.exec_kernel_node_set_params(exec_raw, self.node_h, self, self.node)


class _NodeSite:
    """A copy or memset node: {field: (input, delta)}, set through the node's
    ``exec_set`` (``cudaGraphExecMemcpyNodeSetParams1D`` / ``cudaGraphExecMemsetNodeSetParams``)."""

    __slots__ = ("node", "rec", "fields")

    def __init__(self, node, rec):
        self.node = node
        self.rec = rec
        self.fields: dict = {}

    def write(self, _exec_raw, ptrs) -> None:
        self.node.exec_set(self.rec, **{f: ptrs[i] + d for f, (i, d) in self.fields.items()})


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

    Attributes
    ----------
    slots : list of int
        How many addresses of each input the graph holds.
    unproven : list of str
        Why rebinding could still miss an address (see the module docstring).
    """

    def __init__(self, exe, graph, inputs):
        self.exe = exe
        self._raw = exe.handle
        self.bound = [info.ptr for info in inputs]
        self.slots = [0] * len(inputs)
        self.unproven: list[str] = []
        self._by_input: list[list] = [[] for _ in inputs]
        ranges = [(info.lo, info.hi, info.ptr) for info in inputs]

        def which(v: int):
            for i, (lo, hi, ptr) in enumerate(ranges):
                if lo <= v < hi:
                    return i, v - ptr
            return None

        for node, inside_child in walk_nodes(graph):
            if isinstance(node, KernelNode):
                self._plan_kernel(node, inside_child, which)
            elif isinstance(node, (MemcpyNode, MemsetNode)):
                self._plan_copy(node, inside_child, which)
            elif isinstance(node, (HostNode, BatchMemOpNode)):
                self.unproven.append(f"{_label(node)} may use input addresses it was given at "
                                     "capture; rebinding does not reach inside it")

    def _site_for(self, node, inside_child: bool, what: str):
        if inside_child:
            raise PyCudaGraphError(f"graphed: an input address sits in {what} of {_label(node)}, "
                                    "inside a child graph node, which an exec cannot change "
                                    "node by node; this input key cannot be rebound")
        return self.exe.exec_node(node)

    def _plan_kernel(self, node, inside_child, which) -> None:
        try:
            graph_args = CapturedArgs.of(node)
        except Exception as exc:  # arguments in 'extra': not readable, not rebindable
            self.unproven.append(f"{_label(node)}: its arguments cannot be read ({exc})")
            return
        hits = []
        for a, (offset, _size) in enumerate(graph_args.info):
            for k, v in pointer_slots(graph_args.get(a), offset):
                found = which(v)
                if found is not None:
                    hits.append((a, k) + found)
        if not hits:
            return
        rec = self._site_for(node, inside_child, "a kernel argument")
        if not isinstance(rec.args, CapturedArgs):
            raise PyCudaGraphError(f"graphed: {_label(node)} was built, not captured; its "
                                    "arguments are rebound with exe.set_arg instead")
        site = _KernelSite(node, rec)
        for a, k, i, delta in hits:
            site.slots.append((rec.args.bufs[a], k, i, delta))
            self.slots[i] += 1
        for i in sorted({h[2] for h in hits}):
            self._by_input[i].append(site)

    def _plan_copy(self, node, inside_child, which) -> None:
        p = node.params
        fields = (("src", p.src), ("dst", p.dst)) if isinstance(node, MemcpyNode) else \
            (("dst", p.dst),)
        hits = {f: which(v) for f, v in fields if which(v) is not None}
        if isinstance(node, MemcpyNode) and p.kind == "host->device":
            self.unproven.append(f"{_label(node)} copies host memory to the device: if it uploads "
                                 "a table of addresses, rebinding cannot see them")
        if not hits:
            return
        if isinstance(node, MemcpyNode) and p.height * p.depth > 1:
            raise PyCudaGraphError(f"graphed: {_label(node)} is a 2D/3D copy of an input; an exec "
                                    "can move only 1D copies; this input key cannot be rebound")
        site = _NodeSite(node, self._site_for(node, inside_child, "a copy or memset"))
        site.fields = hits
        for i, _ in hits.values():
            self.slots[i] += 1
        for i in sorted({i for i, _ in hits.values()}):
            self._by_input[i].append(site)

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
        done = []
        raw = self._raw
        try:
            for site in self.sites(changed):
                site.write(raw, ptrs)
                done.append(site)
        except BaseException:
            for site in done:
                try:
                    site.write(raw, self.bound)
                except Exception:  # noqa: BLE001 - the first error is the one to raise
                    pass
            for site in self.sites(changed):  # the bytes of the failed site too
                if isinstance(site, _KernelSite):
                    for buf, k, i, delta in site.slots:
                        _U64.pack_into(buf, k, self.bound[i] + delta)
            raise
        self.bound = list(ptrs)
        return len(done)
