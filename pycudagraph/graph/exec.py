"""The executable graph: launch, upload, per-node updates and whole-graph update.

What an exec knows about each of its nodes is one
:class:`~pycudagraph.nodes.exec_node.ExecNode` record in one dict, keyed by node identity,
made by the node's class on the first per-node call. Updating one kernel argument
(:meth:`GraphExec.set_arg`) rewrites one slot of the record's copy of that node's argument
buffer and calls ``cuGraphExecKernelNodeSetParams`` with it: no recapture, no
reinstantiation, no repacking of the other arguments.

Objects replaced by an update are not dropped at once: a launch already queued may
still read them. They are kept until the exec is synchronized, destroyed, or (checked
every 256 replacements) the stream of the last launch has no work left.
"""

from __future__ import annotations

from weakref import ref

from .._cuda import call, fast, rt
from .._cuda.fast import ExecBase
from .._lifetime import Ledger, Release, release
from ..errors import ArgumentError, ClosedError, PyCudaGraphError
from ..nodes import KernelNode, Node
from ..nodes.exec_node import ExecNodes
from ..nodes.generic import exec_set_node_params
from ..nodes.kernel_node import exec_set_arg, exec_set_args
from ..nodes.table import node_arg
from ..runtime.hostfn import hostcall_ids, pending as _pending, raise_pending
from ..runtime.stream import Stream, stream_handle
from ..runtime.values import bool_arg, int_arg, raw_int
from .instantiation import destroy_boxed, instantiate_flags, instantiate_with_params
from . import exec_reuse as reuse
from .introspect import ExecIntrospection
from .node_checks import check_changes
from .update import RETIRE_CHECK, ExecUpdate

__all__ = ["GraphExec"]


_NEVER = object()  # _last_stream before the first launch
_launch_graph = fast.launch_graph


def _noop() -> None:
    return None


class GraphExec(ExecBase, ExecUpdate, ExecIntrospection):
    """An instantiated graph (``cudaGraphExec_t``), made by :meth:`Graph.instantiate` or
    adopted with :meth:`GraphExec.wrap`.

    Holds its source graph and a copy of everything the graph's nodes point at, so it
    stays launchable whatever happens to the Python objects that built it.
    """

    # what launch, set_arg and set_params read (_h, _last_stream, _block, _nodes) is the
    # base's (fast.ExecBase: a C type where the extension is built), with those methods
    __slots__ = ("_raw", "_addr", "graph", "_taken", "_ledger", "_pending", "_host_ids", "_fin",
                 "_retirer", "__weakref__")

    def __init__(self, raw, graph=None, *, owner=None, owned: bool = True,
                 flags: int | None = None):
        """Make an exec for a handle (:meth:`wrap`, an upload stream's
        :meth:`instantiate`) or, with ``flags``, by instantiating ``graph``. (A plain
        :meth:`instantiate` runs the same set-up and call, :meth:`_instantiate`, in fewer
        frames.)

        Parameters
        ----------
        raw : cudaGraphExec_t or None
            The exec; None with ``flags``: instantiate ``graph`` here.
        graph : Graph, optional
            The graph it was instantiated from (per-node calls address its nodes).
        owner : object, optional
            Kept alive as long as the exec (an adopted exec's maker).
        owned : bool
            Destroy the exec (``cudaGraphExecDestroy``) when this object goes.
        flags : int, optional
            With ``raw`` None: ``cuGraphInstantiateWithFlags(&exec, graph, flags)``; where
            the driver refuses, ``cudaGraphInstantiateWithParams`` says why.
        """
        if graph is not None and getattr(graph, "table", None) is None:
            raise ArgumentError(f"GraphExec: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        if flags is not None:
            if raw is not None or graph is None or not owned:
                raise ArgumentError("GraphExec: flags= instantiates a graph: give raw=None, "
                                    "the graph, and owned=True")
            self._instantiate(graph, owner, int_arg(flags, "GraphExec: flags", 0, 2**64 - 1))
            return
        h = raw_int(raw, "GraphExec")
        self._keep(graph, owner)
        self._bind(raw, h, owned)

    def _instantiate(self, graph, owner, flags: int) -> None:
        """Instantiate ``graph`` into this exec, all but the handle set up before the driver
        call: Python work right after a large instantiate ran several times slower, the
        CPU caches cold (benchmarks/profile_instantiate.py). The finalizer destroys the
        handle in its box, none until the call fills it."""
        table = graph.table
        if table.closed or table.dead:  # a closed graph: ClosedError, as graph.handle says it
            table.refuse()
        rbox = reuse.new_box(graph, flags) if owner is None else None  # parked when released
        self._keep(graph, owner if rbox is None else rbox)
        self._raw = None
        box = [0] if rbox is None else rbox.follow(self._taken, self._nodes)
        self._fin = Release(self, destroy_boxed if rbox is None else reuse.release_exec, box)
        table.execs.add_ref(ref(self))  # the raw graph stays should another thread close it
        try:
            h = box[0] = fast.graph_instantiate(table.h, flags, graph)
        finally:
            if not box[0]:  # refused (or raised): undone
                self._fin.detach()
                table.execs.discard(self)
        if h:
            self._h = self._addr = h  # the cudaGraphExec_t object: made on first need
            return
        raw = instantiate_with_params(graph, flags)  # makes it, or says why the driver refused
        self._bind(raw, int(raw), True)

    def _keep(self, graph, owner) -> None:
        """Everything but the handle: the records, and what the exec keeps of ``graph``
        (its ledger dicts, shared, and what it keeps as a whole) and ``owner``. No CUDA call."""
        self.graph = graph
        self._nodes = ExecNodes()  # id(node) -> ExecNode: the one record of each node
        self._ledger = Ledger(self._nodes, owner=self)
        self._taken, extras = graph.table.exec_keep() if graph is not None else ([], ())
        self._ledger.extra = [self._taken, extras, owner, graph]  # what it keeps as a whole
        self._pending = None  # the graph of an update whose nodes are not paired yet
        self._host_ids = None  # ids of the host callables this exec can run, found on need
        self._last_stream = _NEVER  # the stream object of the last launch (kept alive)
        self._block = None  # why launches are refused (block_launches), or None
        self._retirer = None  # what its records retire through (_retire_fn), made on need

    def _bind(self, raw, h: int, owned: bool) -> None:
        """The handle (``raw``, its address ``h``); the graph learns of the exec; the
        finalizer that destroys it (``cudaGraphExecDestroy``) if ``owned``."""
        self._raw = raw
        self._h = self._addr = h
        if self.graph is not None:
            self.graph.table.execs.add(self)
        self._fin = release(self, rt.cudaGraphExecDestroy, raw) if owned else _noop

    @classmethod
    def instantiate(cls, graph, upload_stream=None, auto_free_on_launch: bool = False,
                    device_launch: bool = False, use_node_priority: bool = False) -> "GraphExec":
        """Instantiate ``graph`` (see :meth:`Graph.instantiate`):
        ``cuGraphInstantiateWithFlags``, or ``cudaGraphInstantiateWithParams`` with an
        upload stream or to say why the driver refused."""
        flags = instantiate_flags(auto_free_on_launch, device_launch, use_node_priority,
                                  upload_stream is not None)
        if getattr(graph, "table", None) is None:
            raise ArgumentError(f"instantiate: graph must be a pycudagraph.Graph, got "
                                f"{type(graph).__name__}")
        if upload_stream is None:
            # Not cls(None, graph, flags=flags): the frames a call returns through right
            # after a large instantiate run with cold CPU caches, so it makes the fewest
            # (benchmarks/profile_instantiate.py: the type call and __init__ cost ~1%).
            exe = cls.__new__(cls)
            if reuse.ready and cls._from_parked(exe, graph, flags):  # cuGraphExecUpdate of a
                return exe  # released exec of the same topology (graph/exec_reuse.py)
            cls._instantiate(exe, graph, None, flags)
            return exe
        upload_h = stream_handle(upload_stream)
        return cls(instantiate_with_params(graph, flags, upload_h), graph)

    @classmethod
    def wrap(cls, handle, owner=None, graph=None) -> "GraphExec":
        """Adopt a ``cudaGraphExec_t`` made elsewhere, not owning it; ``graph`` (a
        :class:`Graph`) is its source graph, needed for per-node calls and :meth:`rebind`.
        No CUDA call (:mod:`pycudagraph.graph.foreign`)."""
        from .foreign import exec_handle
        return cls(exec_handle(handle, graph), graph, owner=owner, owned=False)

    def rebind(self, old, new, missing_ok: bool = False) -> int:
        """Patch every kernel argument slot holding device address ``old`` to ``new``
        (``cuGraphExecKernelNodeSetParams``); see :func:`pycudagraph.apply.rebind.rebind`."""
        from ..apply.rebind import rebind
        return rebind(self, old, new, missing_ok)

    @property
    def handle(self):
        """The raw ``cudaGraphExec_t`` (cuda.bindings object); :class:`ClosedError` once closed.
        No CUDA call.

        An exec made by exec reuse (:func:`pycudagraph.exec_reuse`) is an update of a
        released exec, and CUDA names its nodes by those of the graph that exec was first
        instantiated from: a raw per-node call (``cudaGraphExecKernelNodeSetParams``) takes
        ``exe.exec_node(node).node_h``, not ``node.handle``."""
        if self._h is None:
            self._refuse()
        raw = self._raw
        if raw is None:  # instantiated here: made on first need, not after the call
            raw = self._raw = rt.cudaGraphExec_t(self._h)
        return raw

    @property
    def closed(self) -> bool:
        """Whether the exec was closed. No CUDA call."""
        return self._h is None

    def _refuse(self, stream=None) -> None:
        """Raise the :class:`ClosedError` of this closed exec (or of the closed ``stream``)."""
        if self._h is not None and isinstance(stream, Stream):
            stream_handle(stream)  # raises the stream's ClosedError
        raise ClosedError(f"GraphExec 0x{self._addr:x}", "was closed")

    # What the exec keeps -------------------------------------------------------------

    def _hostcalls(self) -> set:
        """Ids of the host callables this exec can run (their exceptions are its to raise).

        Found when first needed, after a host node raised somewhere, not at instantiate or
        update: walking every node's kept objects there cost about 0.5 us per node."""
        if self._host_ids is None:
            self._host_ids = hostcall_ids(self._ledger.snapshot())
        return self._host_ids

    def _retire(self, old) -> None:
        """Keep ``old`` (what an update replaced) until no launch can read it; every
        256th (``RETIRE_CHECK``), :meth:`_retire_check`."""
        retired = self._ledger.retired  # kept until Ledger.clear_retired
        retired.append(old)
        if len(retired) % RETIRE_CHECK == 0:
            self._retire_check()

    def _retire_check(self) -> None:
        """Let the retired go if the last launch's stream has no work left
        (``cudaStreamQuery``), or if the exec was never launched."""
        h = self._last_handle()
        if h is _NEVER or (h is not None and
                           rt.cudaStreamQuery(h)[0] == rt.cudaError_t.cudaSuccess):
            self._ledger.clear_retired()

    def _last_handle(self):
        """The last launch's stream handle; ``None`` if that Stream was closed since."""
        last = self._last_stream
        if last is _NEVER:
            return _NEVER
        if type(last) is Stream and last.closed:
            return None
        return stream_handle(last)

    # Launch ------------------------------------------------------------------------

    def _launch_checked(self, stream=None) -> None:
        """:meth:`launch` (``cuGraphLaunch``) with every check: a blocked or closed exec or a
        closed stream refused, then the launch, then a host node's pending exception."""
        if self._block is not None:  # launches blocked (block_launches): nothing launched
            raise PyCudaGraphError(self._block)
        h = self._h
        if h is None:  # this exec was closed
            self._refuse(stream)
        _launch_graph(h, stream, self)  # a closed stream is refused there
        self._last_stream = stream
        if _pending:
            self._after_launch()

    def block_launches(self, reason: str | None) -> None:
        """Refuse every :meth:`launch` with ``PyCudaGraphError(reason)`` (before any driver
        call: nothing is launched) until ``block_launches(None)``. No CUDA call.

        Parameters
        ----------
        reason : str or None
            The error's message; ``None`` lifts the block.
        """
        if reason is not None and type(reason) is not str:
            raise ArgumentError(f"block_launches: reason must be a str or None, got "
                                f"{type(reason).__name__}")
        self._block = reason

    @property
    def launch_block(self) -> str | None:
        """Why launches are refused (:meth:`block_launches`), or None. No CUDA call."""
        return self._block

    def _after_launch(self) -> None:
        """Raise the first pending exception of one of this exec's host nodes."""
        raise_pending(ids=self._hostcalls())

    def upload(self, stream=None) -> None:
        """Upload the exec's work descriptors ahead of the first launch (``cudaGraphUpload``)."""
        call(rt.cudaGraphUpload, self.handle, stream_handle(stream))

    def profile(self, stream, repeats: int = 10, method: str = "auto"):
        """Per-node GPU time: a :class:`~pycudagraph.profile.profile.Profile` (``p[node]``
        median microseconds per launch, ``p.total_us``, ``p.critical_path``, ``str(p)``).

        Instantiates a twin from :attr:`graph` (``cudaGraphInstantiate``) and launches it
        ``repeats + 1`` times (``cudaGraphLaunch``), timing each node with CUPTI activity
        records (``cuptiActivityEnable``, ``cuptiGetGraphNodeId``; ``method="cupti"``) or
        with ``%globaltimer`` stamp kernels in a clone (``cudaGraphClone``,
        ``cudaGraphAddKernelNode``, ``cudaGraphAddDependencies``; ``method="stamps"``);
        ``"auto"`` takes CUPTI where it is installed. Then launches this exec ``repeats + 1``
        times between events (``cudaEventRecord``, ``cudaEventElapsedTime``) for
        ``total_us``. See :mod:`pycudagraph.profile.profile` for what each method sees.
        """
        from ..profile.profile import profile_exec
        return profile_exec(self, stream, repeats, method)

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

    def _set_arg_checked(self, node: KernelNode, index_or_name, value) -> None:
        """:meth:`set_arg` (``cuGraphExecKernelNodeSetParams``) with every check, for what
        the base's method does not take: a twin, a node without a record yet, a removed
        node, a closed exec, several devices, argument bytes read back from the driver."""
        rec = self._nodes.get(id(node))
        if rec is None or rec.node is not node:  # twins go the long way
            node_arg(None, node, "node", "set_arg")
            if "args" not in node.exec_fields:  # a kernel node's arguments
                raise ArgumentError(f"set_arg: node must be a KernelNode, got {node!r}")
            rec = self.exec_node(node)
        else:
            node.check_live()  # removed, or its graph destroyed: ClosedError
        exec_set_arg(rec, index_or_name, value)

    def _set_params_checked(self, node: Node, **changes) -> None:
        """:meth:`set_params` with every check, for what the base's method does not take
        (any change but every argument of a kernel node with a record). Fields not given
        keep their values.

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
        :meth:`update`. External-semaphore nodes take ``semaphores`` and ``values``
        (``cudaGraphExecExternalSemaphoresSignalNodeSetParams``,
        ``cudaGraphExecExternalSemaphoresWaitNodeSetParams``); batch memory-op nodes take
        ``ops`` (``cuGraphExecBatchMemOpNodeSetParams``). A refused change leaves the exec
        as it was.
        """
        if type(node) is KernelNode and len(changes) == 1 and "args" in changes:
            rec = self._nodes.get(id(node))  # the common case: every argument, as set_arg
            if rec is not None and rec.node is node:
                node.check_live()
                exec_set_args(rec, changes["args"])
                return
        node_arg(None, node, "node", "set_params")
        check_changes(node, changes)
        rec = self.exec_node(node)
        rec.node.exec_set(rec, **changes)
        self._host_ids = None  # a host node or child graph may run other callables now

    def set_memcpy_3d(self, node, dst, src, width: int, height: int = 1, depth: int = 1,
                      **layout) -> None:
        """Change a copy node of the exec (``cudaGraphExecMemcpyNodeSetParams``).

        CUDA documents ``cudaErrorInvalidValue`` when the node's original or new memory
        operands are multidimensional; for a box the exec refuses, change the graph
        (``Graph.set_memcpy_3d``) and instantiate it again.
        """
        if getattr(node, "exec_set_3d", None) is None:  # a copy node's own call
            raise ArgumentError(f"set_memcpy_3d: {node!r} is not a copy node")
        rec = self.exec_node(node)
        rec.node.exec_set_3d(rec, dst, src, width, height, depth, **layout)

    def set_node_params(self, node, params, keep=()) -> None:
        """Change one node of the exec from a raw ``cudaGraphNodeParams``
        (``cudaGraphExecNodeSetParams``, CUDA 12.2+); the graph is not changed.

        Parameters
        ----------
        node : Node
            A node of the graph the exec was made from.
        params : cuda.bindings.runtime.cudaGraphNodeParams
        keep : sequence
            Objects the parameters point at, kept alive as long as the exec needs them.
        """
        rec = self.exec_node(node)
        exec_set_node_params(self.handle, rec.node.handle, params)
        rec.hold("node params", params, *keep)
        self._host_ids = None

    def set_enabled(self, node: Node, flag: bool) -> None:
        """Enable or disable a kernel, memcpy or memset node (``cudaGraphNodeSetEnabled``)."""
        node_arg(None, node, "node", "set_enabled")
        rec = self.exec_node(node)
        flag = bool_arg(flag, "set_enabled: flag")
        if not rec.node.can_disable:
            raise ArgumentError(f"set_enabled: {type(rec.node).__name__} nodes cannot be "
                                "turned off in an exec; cudaGraphNodeSetEnabled takes kernel, "
                                "memcpy and memset nodes")
        call(rt.cudaGraphNodeSetEnabled, self.handle, rec.node.handle, 1 if flag else 0)

    def is_enabled(self, node: Node) -> bool:
        """Whether a node is enabled in this exec (``cudaGraphNodeGetEnabled``)."""
        node_arg(None, node, "node", "is_enabled")
        rec = self.exec_node(node)
        return bool(call(rt.cudaGraphNodeGetEnabled, self.handle, rec.node.handle))

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
        self._ledger.close()  # keeps the records (a launch may still read them), uncounted
        self._nodes = ExecNodes()  # so a per-node call finds none and refuses
        for graph in (self.graph, self._pending):
            if graph is not None:
                graph.table.execs.discard(self)
                if graph.table.closed:
                    graph.close()
        self._pending = None

    def __repr__(self) -> str:
        addr = getattr(self, "_addr", None)  # never raises, even half made
        if addr is None:
            return "<pycudagraph.GraphExec (not made)>"
        state = " closed" if getattr(self, "_h", None) is None else ""
        return f"<pycudagraph.GraphExec 0x{addr:x}{state}>"
