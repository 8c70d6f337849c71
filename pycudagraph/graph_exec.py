"""The executable graph: launch, upload, per-node updates and whole-graph update.

Updating one kernel argument (:meth:`GraphExec.set_arg`) rewrites one slot of the
exec's own copy of that node's argument buffer and calls
``cuGraphExecKernelNodeSetParams`` with it: no recapture, no reinstantiation, no
repacking of the other arguments.

Objects replaced by an update are not dropped at once: a launch already queued may
still read them. They are kept until the exec is synchronized, destroyed, or (checked
every 256 replacements) the stream of the last launch has no work left.
"""

from __future__ import annotations

import ctypes

from . import _cuda
from ._cuda import call, rt
from ._lifetime import release
from .copies import memcpy_args, memset_params
from .errors import GraphExecUpdateError, PyCudaGraphError
from .hostfn import HostCall, pending as _pending, raise_pending
from .nodes import (ChildGraphNode, EventRecordNode, EventWaitNode, HostNode, KernelNode,
                    MemcpyNode, MemsetNode, MemsetParams, Node)
from .stream import Stream, stream_handle

__all__ = ["GraphExec"]

_F = rt.cudaGraphInstantiateFlags
_FLAGS = {"auto_free_on_launch": _F.cudaGraphInstantiateFlagAutoFreeOnLaunch,
          "device_launch": _F.cudaGraphInstantiateFlagDeviceLaunch,
          "use_node_priority": _F.cudaGraphInstantiateFlagUseNodePriority}

_UPDATE_REASONS = {
    1: "the update failed for a reason CUDA does not classify",
    2: "topology changed (nodes or edges added or removed)",
    3: "node type changed",
    4: "function changed (a kernel node launches a different kernel)",
    5: "parameters changed in a way that cannot be updated",
    6: "this kind of node cannot be updated",
    7: "function changed in a way that cannot be updated",
    8: "node attributes changed",
}

_PLAIN = (int, float, bool)
_RETIRE_CHECK = 256

_LAUNCH = None  # drv.cuGraphLaunch, bound at the first instantiate
_SET_KERNEL = None  # drv.cuGraphExecKernelNodeSetParams


def _collect_hostcall_ids(obj, out: set) -> set:
    if isinstance(obj, HostCall):
        out.add(obj.id)
    elif isinstance(obj, tuple):
        for item in obj:
            _collect_hostcall_ids(item, out)
    return out


class GraphExec:
    """An instantiated graph (``cudaGraphExec_t``), made by :meth:`Graph.instantiate`.

    Holds its source graph and a snapshot of everything the graph's nodes point at,
    so it stays launchable whatever happens to the Python objects that built it.
    """

    __slots__ = ("_raw", "_h", "graph", "_packs", "_src", "_keep", "_retired",
                 "_host_ids", "_last_stream", "_fin", "_state", "__weakref__")

    @classmethod
    def _instantiate(cls, graph, upload_stream, auto_free_on_launch, device_launch,
                     use_node_priority) -> "GraphExec":
        global _LAUNCH, _SET_KERNEL
        flags = 0
        for name, on in (("auto_free_on_launch", auto_free_on_launch),
                         ("device_launch", device_launch),
                         ("use_node_priority", use_node_priority)):
            if on:
                flags |= int(_FLAGS[name])
        params = rt.cudaGraphInstantiateParams()
        if upload_stream is not None:
            flags |= int(_F.cudaGraphInstantiateFlagUpload)
            params.uploadStream = stream_handle(upload_stream)
        params.flags = flags
        err, raw = rt.cudaGraphInstantiateWithParams(graph._raw, params)
        if _cuda.tracer is not None:
            _cuda.tracer("cudaGraphInstantiateWithParams", (raw, graph, flags), (err,))
        if err:
            hint = f"result: {params.result_out.name}"
            if int(params.errNode_out):
                hint += f"; failing node: {graph._node(params.errNode_out).describe()}"
            raise _cuda.error_for("cudaGraphInstantiateWithParams", err, hint)
        if _LAUNCH is None:
            _LAUNCH = _cuda.drv.cuGraphLaunch
            _SET_KERNEL = _cuda.drv.cuGraphExecKernelNodeSetParams
        self = cls.__new__(cls)
        self._raw = raw
        self._h = int(raw)
        self.graph = graph
        self._packs = {}
        self._src = {h: n._pack for h, n in graph._nodes.items()
                     if type(n) is KernelNode and n._pack is not None}
        self._keep = graph.keepalive()
        self._retired = []
        self._host_ids = _collect_hostcall_ids(self._keep, set())
        self._last_stream = None
        self._state = {}
        graph._execs.add(self)
        self._fin = release(self, rt.cudaGraphExecDestroy, raw)
        return self

    @property
    def handle(self):
        """The raw ``cudaGraphExec_t`` (cuda.bindings object)."""
        return self._raw

    # Launch ------------------------------------------------------------------------

    def launch(self, stream=None) -> None:
        """Launch the graph on ``stream`` (``cuGraphLaunch``, i.e. ``cudaGraphLaunch``).

        Raises the first pending exception of one of this exec's host nodes.
        """
        s = stream._h if type(stream) is Stream else stream_handle(stream)
        rc = _LAUNCH(self._h, s)
        if rc:
            _cuda.raise_driver("cuGraphLaunch", rc)
        self._last_stream = s
        if _pending:
            raise_pending(ids=self._host_ids)
        if _cuda.tracer is not None:
            _cuda.tracer("cuGraphLaunch", (self, s), (rc,))

    def upload(self, stream=None) -> None:
        """Upload the exec's work descriptors ahead of the first launch (``cudaGraphUpload``)."""
        call(rt.cudaGraphUpload, self._raw, stream_handle(stream))

    def synchronize(self) -> None:
        """Wait for the last launch's stream (``cudaStreamSynchronize``), release retired
        objects, and raise a pending host-node exception."""
        if self._last_stream is not None:
            call(rt.cudaStreamSynchronize, self._last_stream)
        self._retired.clear()
        if _pending:
            raise_pending(ids=self._host_ids)

    # Per-node updates ----------------------------------------------------------------

    def _retire(self, old) -> None:
        retired = self._retired
        retired.append(old)
        if len(retired) % _RETIRE_CHECK == 0 and self._last_stream is not None:
            if rt.cudaStreamQuery(self._last_stream)[0] == rt.cudaError_t.cudaSuccess:
                retired.clear()

    def _kernel_entry(self, node):
        """(exec-owned ArgPack, raw node handle) for a kernel node, made on first use."""
        entry = self._packs.get(node._h) if isinstance(node, Node) else None
        if entry is not None:
            return entry
        if not isinstance(node, KernelNode):
            raise TypeError(f"expected a KernelNode, got {node!r}")
        self._resolve_update()
        h = self._state.get(("alias", node._h), node._h)
        entry = self._packs.get(h)
        if entry is None:
            src = self._src.get(h)
            if src is None:
                if node._pack is None:
                    raise PyCudaGraphError(f"{node!r} was not built by pycudagraph (captured); "
                                           "update it with a whole-graph update()")
                raise PyCudaGraphError(f"{node!r} is not a node of the graph this exec was made from")
            entry = (src.copy(), h)
            self._packs[h] = entry
        self._packs[node._h] = entry
        return entry

    def set_arg(self, node: KernelNode, index_or_name, value) -> None:
        """Change one argument of a kernel node (``cuGraphExecKernelNodeSetParams``).

        Only that argument's slot is rewritten; the exec's next launch uses it.
        """
        entry = self._packs.get(node._h)
        if entry is None:
            entry = self._kernel_entry(node)
        pack, h = entry
        layout = pack.layout
        i = (index_or_name if type(index_or_name) is int and index_or_name >= 0
             else layout.slot_index(index_or_name))
        conv = layout.converters[i]
        try:
            layout.slots[i].pack_into(pack.buf, layout.offsets[i], conv(value) if conv else value)
        except Exception:
            i = layout.slot_index(i)
            pack.restore(i)
            layout.check_one(i, value)
            raise
        rc = _SET_KERNEL(self._h, h, pack.address)
        if rc:
            _cuda.raise_driver("cuGraphExecKernelNodeSetParams", rc)
        refs = pack.refs
        old = refs[i]
        refs[i] = value
        if type(old) not in _PLAIN:
            self._retire(old)
        if _cuda.tracer is not None:
            _cuda.tracer("cuGraphExecKernelNodeSetParams", (self, node, pack), (rc,))

    def set_params(self, node: Node, **changes) -> None:
        """Change parameters of one node of the exec; fields not given keep their values.

        ============== ===================================== =========================================
        node           changes                               raw call
        ============== ===================================== =========================================
        KernelNode     args (sequence or {index/name: v}),   ``cuGraphExecKernelNodeSetParams``
                       grid, block, shared_mem
        MemcpyNode     dst, src, nbytes                      ``cudaGraphExecMemcpyNodeSetParams1D``
        MemsetNode     dst, value, count, element_size,      ``cudaGraphExecMemsetNodeSetParams``
                       height, pitch
        HostNode       fn, args                              ``cudaGraphExecHostNodeSetParams``
        ChildGraphNode graph                                 ``cudaGraphExecChildGraphNodeSetParams``
        EventRecordNode event                                ``cudaGraphExecEventRecordNodeSetEvent``
        EventWaitNode  event                                 ``cudaGraphExecEventWaitNodeSetEvent``
        ============== ===================================== =========================================
        """
        for cls, method in _SETTERS:
            if isinstance(node, cls):
                return method(self, node, **changes)
        raise TypeError(f"set_params does not support {node.type} nodes")

    def _set_kernel(self, node, args=None, grid=None, block=None, shared_mem=None) -> None:
        pack, h = self._kernel_entry(node)
        old_refs = pack.apply(args, grid, block, shared_mem)
        rc = _SET_KERNEL(self._h, h, pack.address)
        if rc:
            _cuda.raise_driver("cuGraphExecKernelNodeSetParams", rc)
        for old in old_refs:
            if type(old) not in _PLAIN:
                self._retire(old)

    def _member(self, node) -> Node:
        self._resolve_update()
        h = self._state.get(("alias", node._h), node._h)
        if h != node._h:
            return self.graph._node(h)
        if node.graph is not self.graph and node._h not in self.graph._nodes:
            raise PyCudaGraphError(f"{node!r} is not a node of the graph this exec was made from")
        return node

    def _set_memcpy(self, node, dst=None, src=None, nbytes=None) -> None:
        target = self._member(node)
        cur = self._state.get(("memcpy", target._h)) or (target.params.dst, target.params.src,
                                                          target.params.nbytes)
        new_dst = cur[0] if dst is None else dst
        new_src = cur[1] if src is None else src
        n = cur[2] if nbytes is None else nbytes  # the size stays unless given
        d, s, n, kind = memcpy_args(new_dst, new_src, n)
        call(rt.cudaGraphExecMemcpyNodeSetParams1D, self._raw, target.handle, d, s, n, kind)
        self._retire(cur)
        self._state[("memcpy", target._h)] = (new_dst, new_src, n)

    def _set_memset(self, node, **changes) -> None:
        target = self._member(node)
        cur = self._state.get(("memset", target._h)) or (target.params, None)
        p = memset_params(cur[0], **changes)
        call(rt.cudaGraphExecMemsetNodeSetParams, self._raw, target.handle, p)
        view = MemsetParams(int(p.dst), int(p.value), int(p.elementSize), int(p.width),
                            int(p.height), int(p.pitch))
        self._retire(cur)
        self._state[("memset", target._h)] = (view, changes.get("dst"))

    def _set_host(self, node, fn, args=()) -> None:
        target = self._member(node)
        hc = HostCall(fn, args)
        call(rt.cudaGraphExecHostNodeSetParams, self._raw, target.handle, self.graph._host_params(hc))
        self._host_ids.add(hc.id)
        self._keep = self._keep + (hc,)

    def _set_child(self, node, graph) -> None:
        target = self._member(node)
        call(rt.cudaGraphExecChildGraphNodeSetParams, self._raw, target.handle, graph._raw)
        self._keep = self._keep + (graph.keepalive(),)
        self._host_ids |= _collect_hostcall_ids(graph.keepalive(), set())

    def _set_event(self, node, event) -> None:
        target = self._member(node)
        fn = (rt.cudaGraphExecEventRecordNodeSetEvent if isinstance(node, EventRecordNode)
              else rt.cudaGraphExecEventWaitNodeSetEvent)
        call(fn, self._raw, target.handle, event.handle)
        self._keep = self._keep + (event,)

    def set_enabled(self, node: Node, flag: bool) -> None:
        """Enable or disable a kernel, memcpy or memset node (``cudaGraphNodeSetEnabled``)."""
        target = self._member(node)
        call(rt.cudaGraphNodeSetEnabled, self._raw, target.handle, 1 if flag else 0)

    def is_enabled(self, node: Node) -> bool:
        """Whether a node is enabled in this exec (``cudaGraphNodeGetEnabled``)."""
        target = self._member(node)
        return bool(call(rt.cudaGraphNodeGetEnabled, self._raw, target.handle))

    # Whole-graph update ------------------------------------------------------------

    def update(self, graph) -> None:
        """Take all node parameters from ``graph``, which has the same topology
        (``cuGraphExecUpdate``, the driver twin of ``cudaGraphExecUpdate``).

        Nodes are paired in creation order, as CUDA pairs nodes built by the API (done
        lazily, at the next per-node update). Afterwards the nodes of ``graph`` are
        accepted by :meth:`set_arg` and :meth:`set_params` as aliases of the paired nodes.

        Raises
        ------
        GraphExecUpdateError
            Naming the reason (topology changed, function changed, ...) and the node.
        """
        info = _cuda.ExecUpdateResultInfo()
        err = _cuda.drv.cuGraphExecUpdate(self._h, graph._h, ctypes.addressof(info))
        if _cuda.tracer is not None:
            _cuda.tracer("cuGraphExecUpdate", (self, graph), (err,))
        if err:
            reason = _UPDATE_REASONS.get(info.result, f"result code {info.result}")
            node = graph._node(info.errorNode) if info.errorNode else None
            hint = reason + (f"; node: {node.describe()}" if node is not None else "")
            exc = _cuda.error_for("cuGraphExecUpdate", err, hint, cls=GraphExecUpdateError)
            exc.reason, exc.node = reason, node
            raise exc
        self._retire(tuple(entry[0] for entry in self._packs.values()))
        self._packs.clear()
        self._state = {k: v for k, v in self._state.items() if k[0] == "alias"}
        self._state["pending"] = graph  # nodes are paired on the next per-node update
        self._retire(self._keep)
        self._keep = graph.keepalive() + (graph,)
        self._host_ids = _collect_hostcall_ids(self._keep, set())

    def _resolve_update(self) -> None:
        """Pair the last update's nodes with the exec's (creation order, as CUDA pairs them)."""
        graph = self._state.pop("pending", None)
        if graph is None:
            return
        old_nodes = _cuda.graph_nodes(self.graph._raw)
        new_nodes = _cuda.graph_nodes(graph._raw)
        for old_raw, new_raw in zip(old_nodes, new_nodes):
            old_h, new = int(old_raw), graph._node(new_raw)
            if new._h != old_h:
                self._state[("alias", new._h)] = old_h
            if type(new) is KernelNode and new._pack is not None:
                self._src[old_h] = new._pack

    def close(self) -> None:
        """Destroy the exec now (``cudaGraphExecDestroy``); idempotent."""
        self._fin()
        self._retired.clear()

    def __repr__(self) -> str:
        return f"<pycudagraph.GraphExec 0x{self._h:x}>"


_SETTERS = ((KernelNode, GraphExec._set_kernel), (MemcpyNode, GraphExec._set_memcpy),
            (MemsetNode, GraphExec._set_memset), (HostNode, GraphExec._set_host),
            (ChildGraphNode, GraphExec._set_child), (EventRecordNode, GraphExec._set_event),
            (EventWaitNode, GraphExec._set_event))
