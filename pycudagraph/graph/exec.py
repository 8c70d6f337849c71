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

from .._cuda import call, fast, rt
from ..nodes import captured_kernel as captured
from . import foreign
from ..nodes.copy3d import ExecCopy3D
from .update import ExecUpdate
from ..nodes.generic import ExecGeneric
from .introspect import ExecIntrospection
from .._cuda.context import seen
from .._lifetime import Ledger, release
from ..compile.args import ArgPack
from ..errors import ArgumentError, ClosedError, CudaError, PyCudaGraphError
from .exec_node import find_node, forget_removed
from ..runtime.hostfn import hostcall_ids, pending as _pending, raise_pending
from ..nodes import KernelNode, Node
from ..runtime.stream import Stream, stream_handle
from .node_checks import check_changes, node_arg

__all__ = ["GraphExec", "forget_removed"]

_F = rt.cudaGraphInstantiateFlags
_FLAGS = {"auto_free_on_launch": _F.cudaGraphInstantiateFlagAutoFreeOnLaunch,
          "device_launch": _F.cudaGraphInstantiateFlagDeviceLaunch,
          "use_node_priority": _F.cudaGraphInstantiateFlagUseNodePriority}

_PLAIN = (int, float, bool)
_NEVER = object()  # _last_stream before the first launch
_RETIRE_CHECK = 256
_graph_launch = fast.graph_launch
_exec_set = fast.exec_kernel_node_set_params
_native_launch = fast.native.graph_launch if fast.native is not None else None
_native_set_arg = fast.native.exec_set_arg if fast.native is not None else None


class GraphExec(ExecUpdate, ExecIntrospection, ExecGeneric, ExecCopy3D):
    """An instantiated graph (``cudaGraphExec_t``), made by :meth:`Graph.instantiate`.

    Holds its source graph and a snapshot of everything the graph's nodes point at,
    so it stays launchable whatever happens to the Python objects that built it.
    """

    __slots__ = ("_raw", "_h", "_addr", "graph", "_packs", "_src", "_held", "_ledger", "_aliases",
                 "_pending", "_host_ids", "_host_scan", "_last_stream", "_fin", "__weakref__")

    @classmethod
    def _instantiate(cls, graph, upload_stream, auto_free_on_launch, device_launch,
                     use_node_priority) -> "GraphExec":
        flags = 0
        for name, on in (("auto_free_on_launch", auto_free_on_launch),
                         ("device_launch", device_launch),
                         ("use_node_priority", use_node_priority)):
            if on:
                flags |= int(_FLAGS[name])
        if upload_stream is not None:
            flags |= int(_F.cudaGraphInstantiateFlagUpload)
            upload_h = stream_handle(upload_stream)
        graph_raw = graph._raw  # a closed graph raises ClosedError here
        h = fast.graph_instantiate(graph, flags) if upload_stream is None else 0
        if h:
            raw = rt.cudaGraphExec_t(h)
        else:  # with an upload stream, or to say why the driver refused
            params = rt.cudaGraphInstantiateParams()
            params.flags = flags
            if upload_stream is not None:
                params.uploadStream = upload_h
            try:
                raw = call(rt.cudaGraphInstantiateWithParams, graph_raw, params)
            except CudaError as exc:
                exc.hint = f"result: {params.result_out.name}"
                bad = find_node(graph, params.errNode_out) if int(params.errNode_out) else None
                if bad is not None:
                    exc.hint += f"; failing node: {bad.describe()}"
                exc.args = (exc._text(),)
                raise
        self = cls.__new__(cls)
        self._raw = raw
        self._h = self._addr = int(raw)
        self.graph = graph
        self._packs = {}
        self._src = {}  # node handle -> its ArgPack, as looked up or paired by an update
        self._held = graph._held_now()  # bodies' ledgers too; read on first per-node update
        self._ledger = Ledger({"graph": graph.keepalive()}, owner=self)
        self._aliases = {}
        self._pending = None
        self._host_ids = set()
        self._host_scan = True  # the ledger is scanned on first need (_hostcalls), not here
        self._last_stream = _NEVER  # the stream object of the last launch (kept alive)
        graph._execs.add(self)
        self._fin = release(self, rt.cudaGraphExecDestroy, raw)
        return self

    @classmethod
    def wrap(cls, handle, owner=None, graph=None) -> "GraphExec":
        """Adopt a ``cudaGraphExec_t`` made elsewhere, not owning it; ``graph`` (a
        :class:`Graph`) is its source graph, needed for per-node calls and :meth:`rebind`.
        No CUDA call."""
        return foreign.wrap_exec(cls, handle, owner, graph, _NEVER)

    def rebind(self, old, new, missing_ok: bool = False) -> int:
        """Patch every kernel argument slot holding device address ``old`` to ``new``
        (``cuGraphExecKernelNodeSetParams``); see :func:`pycudagraph.nodes.captured_kernel.rebind`."""
        return captured.rebind(self, old, new, missing_ok)

    @property
    def handle(self):
        """The raw ``cudaGraphExec_t`` (cuda.bindings object); :class:`ClosedError` once closed.
        No CUDA call."""
        if self._h is None:
            self._refuse()
        return self._raw

    def _refuse(self, stream=None) -> None:
        """Raise the :class:`ClosedError` of this closed exec (or of the closed ``stream``)."""
        if self._h is not None and isinstance(stream, Stream):
            stream_handle(stream)  # raises the stream's ClosedError
        raise ClosedError(f"GraphExec 0x{self._addr:x}", "was closed")

    def _forget(self, gone: set) -> None:
        """Nodes (handles) of the exec's graph were removed: per-node updates through them
        refuse."""
        for key in [k for k, (_, h) in self._packs.items() if k in gone or h in gone]:
            del self._packs[key]
        for key in [k for k, h in self._aliases.items() if h in gone]:
            del self._aliases[key]  # an update's twin of it must not reach its handle
        for h in gone:
            self._src.pop(h, None)
            for held in self._held:
                held.pop(h, None)

    def _source_pack(self, h: int):
        """The ArgPack kernel node ``h`` of the exec's graph had when the exec took it
        (instantiation, or the update that paired it), or None for one pycudagraph did not
        build. Found in the ledger copies made at instantiation, on first need."""
        src = self._src.get(h)
        if src is None:
            for held in self._held:
                keep = held.get(h)
                if keep and type(keep[0]) is ArgPack:
                    src = self._src[h] = keep[0]
                    break
        return src

    # The ledger --------------------------------------------------------------------

    def _hold(self, key, *objs) -> None:
        """Keep ``objs`` under ``key``; what was kept there is retired (a launch may read it)."""
        old = self._ledger.held.get(key)
        if old is not None:
            self._retire(old)
        self._ledger.hold(key, *objs)

    def _hostcalls(self) -> set:
        """Ids of the host callables this exec can run (their exceptions are its to raise).

        Found when first needed, after a host node raised somewhere, not at instantiate or
        update: walking every node's kept objects there cost about 0.5 us per node."""
        if self._host_scan:
            hostcall_ids(self._ledger.snapshot(), self._host_ids)
            self._host_scan = False
        return self._host_ids

    def _retire(self, old) -> None:
        n = self._ledger.retire(old)
        if n % _RETIRE_CHECK == 0:
            h = self._last_handle()
            if h is _NEVER or (h is not None and
                               rt.cudaStreamQuery(h)[0] == rt.cudaError_t.cudaSuccess):
                self._ledger.clear_retired()

    def _last_handle(self):
        """The last launch's stream handle; ``None`` if that Stream was closed since."""
        last = self._last_stream
        if last is _NEVER:
            return _NEVER
        if type(last) is Stream and last._h is None:
            return None
        return stream_handle(last)

    # Launch ------------------------------------------------------------------------

    def launch(self, stream=None) -> None:
        """Launch the graph on ``stream`` (``cuGraphLaunch``, i.e. ``cudaGraphLaunch``).

        Raises the first pending exception of one of this exec's host nodes.

        Parameters
        ----------
        stream : Stream or stream-like, optional
            ``None`` is the legacy default stream.
        """
        h = self._h
        s = stream._h if type(stream) is Stream else stream_handle(stream)
        if _native_launch is None or _native_launch(h, s):
            # The checked path: a closed exec or stream, this thread's first call, a trace,
            # a failed launch (the compiled call makes none of these).
            if h is None or s is None:  # this exec or the stream was closed
                self._refuse(stream)
            _graph_launch(h, s, self)
        self._last_stream = stream
        if _pending:
            raise_pending(ids=self._hostcalls())

    def upload(self, stream=None) -> None:
        """Upload the exec's work descriptors ahead of the first launch (``cudaGraphUpload``)."""
        if self._h is None:
            self._refuse()
        call(rt.cudaGraphUpload, self._raw, stream_handle(stream))

    def synchronize(self) -> None:
        """Wait for the last launch's stream (``cudaStreamSynchronize``; ``cudaDeviceSynchronize``
        if that :class:`Stream` was closed since), release retired objects, and raise a
        pending host-node exception."""
        h = self._last_handle()
        if h is None:  # that stream was closed: its work may still run
            call(rt.cudaDeviceSynchronize)
        elif h is not _NEVER:
            call(rt.cudaStreamSynchronize, h)
        self._ledger.clear_retired()
        if _pending:
            raise_pending(ids=self._hostcalls())

    # Per-node updates ----------------------------------------------------------------

    def _kernel_entry(self, node):
        """(exec-owned ArgPack, raw node handle) for a kernel node, made on first use."""
        entry = self._packs.get(node._h) if isinstance(node, Node) else None
        if entry is not None:
            return entry
        if not isinstance(node, KernelNode):
            node_arg(None, node, "node", "set_arg")
            raise ArgumentError(f"set_arg: node must be a KernelNode, got {node!r}")
        h = self._paired(node)
        entry = self._packs.get(h)
        if entry is None:
            src = self._source_pack(h)
            if src is None:
                if node._pack is None:
                    raise PyCudaGraphError(f"{node!r} was not built by pycudagraph (captured); "
                                           "update it with a whole-graph update()")
                raise PyCudaGraphError(f"{node!r} is not a node of the graph this exec was "
                                       "made from")
            entry = (src.copy(), h)
            self._packs[h] = entry
            self._ledger.hold(("args", h), entry[0])  # what set_arg puts in it is held
        if not node.graph._dead:  # a twin of a graph destroyed just now is not kept as a key
            self._packs[node._h] = entry
        return entry

    def set_arg(self, node: KernelNode, index_or_name, value) -> None:
        """Change one argument of a kernel node (``cuGraphExecKernelNodeSetParams``).

        Only that argument's slot is rewritten; the exec's next launch uses it.

        Parameters
        ----------
        node : KernelNode
            A node of the graph the exec was made from (or of its bodies), or its twin
            in a graph given to :meth:`update`.
        index_or_name : int or str
            The kernel parameter, by position or name.
        value
            Converted and checked as the kernel's signature says.
        """
        try:
            entry = self._packs.get(node._h)
        except AttributeError:
            entry = None
        if entry is None:
            if type(node) is KernelNode and node._pack is None:  # captured: by index
                return captured.exec_set_arg(self, self._member(node), index_or_name, value)
            entry = self._kernel_entry(node)
        pack, h = entry
        if seen.multi:  # the value's device against the node's: the checked path only
            pack.kernel._check_pack_args(pack, {index_or_name: value}, "set_arg")
        elif _native_set_arg is not None:
            r = _native_set_arg(self._h, h, pack, index_or_name, value)
            if not r:
                return  # done by the compiled path
            if type(r) is tuple:  # done; r[0] is the object it replaced
                self._retire(r[0])
                return
        layout = pack.layout
        i = (index_or_name if type(index_or_name) is int and 0 <= index_or_name < layout.count
             else layout.slot_index(index_or_name))
        conv = layout.converters[i]
        try:
            layout.slots[i].pack_into(pack.buf, layout.offsets[i], conv(value) if conv else value)
        except Exception:
            i = layout.slot_index(i)
            pack.restore(i)
            layout.check_one(i, value)
            raise
        _exec_set(self, h, pack, node)
        refs = pack.refs
        old = refs[i]
        refs[i] = value
        if type(old) not in _PLAIN:
            self._retire(old)

    def set_params(self, node: Node, **changes) -> None:
        """Change parameters of one node of the exec; fields not given keep their values.

        =============== =========================================================== ========================================
        node            changes                                                     raw call
        =============== =========================================================== ========================================
        KernelNode      args (sequence or {index/name: v}), grid, block, shared_mem ``cuGraphExecKernelNodeSetParams``
        MemcpyNode      dst, src, nbytes                                            ``cudaGraphExecMemcpyNodeSetParams1D``
        MemsetNode      dst, value, count, element_size, height, pitch              ``cudaGraphExecMemsetNodeSetParams``
        HostNode        fn, args                                                    ``cudaGraphExecHostNodeSetParams``
        ChildGraphNode  graph                                                       ``cudaGraphExecChildGraphNodeSetParams``
        EventRecordNode event                                                       ``cudaGraphExecEventRecordNodeSetEvent``
        EventWaitNode   event                                                       ``cudaGraphExecEventWaitNodeSetEvent``
        =============== =========================================================== ========================================

        ``node`` may be in a conditional node's body, or be its twin in a graph given to
        :meth:`update`.
        External-semaphore nodes take ``semaphores`` and ``values``
        (``cudaGraphExecExternalSemaphoresSignalNodeSetParams``,
        ``cudaGraphExecExternalSemaphoresWaitNodeSetParams``); batch memory-op nodes take
        ``ops`` (``cuGraphExecBatchMemOpNodeSetParams``).
        """
        node_arg(None, node, "node", "set_params")
        if changes:
            check_changes(node, changes)
        node._exec_set(self, self._member(node), **changes)

    def _paired(self, node) -> int:
        """The handle of the node of this exec's graph that ``node`` stands for (its own, or
        its update twin's), the last update's nodes paired first. A closed exec or a dead
        node raises :class:`ClosedError`. An update graph closed while it waited is
        destroyed once the twin is known (that forgets its twins)."""
        if self._h is None:
            self._refuse()
        node._check_live()
        closing = self._resolve_update()
        h = self._aliases.get(node._h, node._h)
        if closing is not None:
            closing.close()
        return h

    def _member(self, node) -> Node:
        """The node of this exec's graph that ``node`` stands for (itself, or its update twin)."""
        h = self._paired(node)
        if h != node._h:  # its twin: a node of the graph, or of a body of one of its nodes
            twin = self.graph._nodes.get(h) or find_node(self.graph, h)
            if twin is None:
                raise PyCudaGraphError(f"{node!r} stands for no node of this exec's graph")
            return twin
        if not self.graph._holds(node):
            raise PyCudaGraphError(f"{node!r} is not a node of the graph this exec was made from")
        return node

    def set_enabled(self, node: Node, flag: bool) -> None:
        """Enable or disable a kernel, memcpy or memset node (``cudaGraphNodeSetEnabled``)."""
        node_arg(None, node, "node", "set_enabled")
        target = self._member(node)
        call(rt.cudaGraphNodeSetEnabled, self._raw, target.handle, 1 if flag else 0)

    def is_enabled(self, node: Node) -> bool:
        """Whether a node is enabled in this exec (``cudaGraphNodeGetEnabled``)."""
        node_arg(None, node, "node", "is_enabled")
        target = self._member(node)
        return bool(call(rt.cudaGraphNodeGetEnabled, self._raw, target.handle))

    def close(self) -> None:
        """Destroy the exec now (``cudaGraphExecDestroy``); idempotent.

        A launch in flight finishes (CUDA frees the exec when it completes). Every later
        call on the exec raises :class:`ClosedError`; buffers whose ``free()`` waited for
        it are freed now. If its graph was closed and this was its last exec, the graph
        is destroyed too.
        """
        if self._h is None:
            return
        self._fin()
        self._h = None
        self._raw = None
        self._packs.clear()
        self._ledger.close()
        for graph in (self.graph, self._pending):
            if graph is not None:
                graph._execs.discard(self)
                if graph._closed:
                    graph.close()
        self._pending = None

    def __repr__(self) -> str:
        state = " closed" if self._h is None else ""
        return f"<pycudagraph.GraphExec 0x{self._addr:x}{state}>"
