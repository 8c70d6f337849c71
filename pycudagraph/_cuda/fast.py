"""The hot calls: graph launch, eager kernel launch, kernel-node add, exec argument updates,
instantiate and whole-graph update. Seven plain functions, each the one way its call is made:

========================== ====================================== ==========================
function                   driver call made                       runtime twin
========================== ====================================== ==========================
:func:`launch_graph`       ``cuGraphLaunch``                      ``cudaGraphLaunch``
:func:`launch_kernel`      ``cuLaunchKernel``                     ``cudaLaunchKernel``
:func:`add_kernel`         ``cuGraphAddKernelNode``               ``cudaGraphAddKernelNode``
:func:`set_arg`            ``cuGraphExecKernelNodeSetParams``     ``cudaGraphExecKernelNodeSetParams``
:func:`set_args`           ``cuGraphExecKernelNodeSetParams``     ``cudaGraphExecKernelNodeSetParams``
:func:`graph_instantiate`  ``cuGraphInstantiateWithFlags``        ``cudaGraphInstantiateWithFlags``
:func:`exec_update`        ``cuGraphExecUpdate``                  ``cudaGraphExecUpdate``
========================== ====================================== ==========================

Each has two routes. The compiled one (the C extension ``_native``; this is the
only module that knows it) converts the common argument kinds and makes the driver call in
one step, taking ints, bytes and sequences only. When it cannot (a value it does not
convert, a thread whose context is not current yet, a trace being recorded, several devices
in use, a failed driver call) it calls the ctypes route with the same arguments, which
converts with the full diagnosis, makes the call through ctypes, traces it
(:func:`.check.report`) and raises the :class:`~pycudagraph.errors.CudaError` naming the
call and its twin. ``PYCUDAGRAPH_NO_NATIVE=1`` (read at import) leaves only the ctypes route;
:func:`native_status` says which is active; the ctypes routes are :mod:`.routes`'. The
compiled route reads layouts from plans (``plans.py``), what an exec's launch and updates
read from the base types :data:`ExecBase`, :data:`ExecNodeBase`, :data:`ArgPackBase` and
:data:`LayoutBase` (whose methods ``GraphExec`` inherits), and addresses and handles from
the slots owners name here (:func:`pointer_slot`, :func:`node_slots`, :func:`table_slots`,
:func:`stream_slot`); ``Kernel.launch`` and ``Graph.add_kernel`` are the methods of
:data:`KernelBase` and :data:`GraphBase`, and the kernel-node add is :func:`node_maker`'s.
At the end: the kernel-node set calls, and the adds of nodes launching a library's function
(one node through ctypes, a run of them in one compiled call). See ``docs/HOT_PATH.md``.
"""

from __future__ import annotations

import ctypes
import struct

from ..errors import ArgumentError
from . import bulk, check, hot_base, routes
from .context import multi_hooks, seen
from .plans import kernel_plan, layout_plan
from .routes import NATIVE_ENV, native_status, use_driver_library
from .structs import KERNEL_NODE_PARAMS_FORMAT, KERNEL_NODE_PARAMS_SIZE

__all__ = ["launch_graph", "launch_kernel", "add_kernel", "set_arg", "set_args", "pointer_slot",
           "node_slots", "table_slots", "stream_slot", "node_maker",
           "kernel_node_set_params", "exec_kernel_node_set_params",
           "exec_update", "graph_instantiate", "native_status", "layout_plan", "kernel_plan",
           "use_driver_library", "NATIVE_ENV", "ExecBase", "ExecNodeBase", "ArgPackBase",
           "LayoutBase", "KernelBase", "GraphBase", "Plan", "register_node", "node_live",
           "add_kernel_nodes", "add_function_node", "add_function_nodes", "add_record_nodes",
           "records_pass"]

_native = routes.native  # the C extension, or None (routes.native_reason says why)
_f = routes.driver  # libcuda's entry points, as ctypes functions
_ensure = routes.ensure
_launch_graph, _launch_kernel, _add_kernel = routes.launch_graph, routes.launch_kernel, routes.add_kernel
_set_arg, _set_args = routes.set_arg, routes.set_args
_graph_instantiate, _exec_update = routes.graph_instantiate, routes.exec_update

#: The hot path's base types: the C extension's (``_native_types.c``, ``_native_method.c``)
#: where it is built and on, else their Python twins (:mod:`.hot_base`). ``GraphExec``,
#: ``ExecNode``, ``ArgPack`` and ``Layout`` extend these four; their structs hold what launch,
#: set_arg and set_params read.
_bases = _native if _native is not None else hot_base
ExecBase, ExecNodeBase = _bases.ExecBase, _bases.ExecNodeBase
ArgPackBase, LayoutBase = _bases.ArgPackBase, _bases.LayoutBase
#: ``Kernel`` and ``Graph`` extend these: ``KernelBase.launch`` (``_hot``) and
#: ``GraphBase.add_kernel`` (``table``).
KernelBase, GraphBase = _bases.KernelBase, _bases.GraphBase
#: ``Plan(*, plan, converters, names=None, layout=None)``: the compiled route's view of a
#: layout (``Layout.hot``, with ``names``) or a kernel (``Kernel._hot``, with ``layout``),
#: read by member name in C (``_native_plan.c``); read-only, made by keyword.
Plan = _bases.Plan
#: ``register_node(table, node, *keep) -> node``: ``NodeTable.register``'s bookkeeping, the
#: one implementation the C node add records with too (``_native_nodes.c``'s ``record``).
register_node = _bases.register_node
#: ``node_live(node) -> bool``: ``Node.live``'s rule, the one the compiled argument updates
#: judge a node by (``_native_lookup.c``); ``Node.live`` and ``Node.check_live`` use it.
node_live = _bases.node_live

# ----------------------------------------------------------------------------------
# The hot calls

if _native is not None:
    _native.set_routes((_launch_graph, _launch_kernel, _add_kernel, _set_arg, _set_args,
                        _graph_instantiate, _exec_update), check.capture_watchers,
                       check.capture_keeps, routes.host_errors)

    def _follow_flags() -> None:
        _native.set_flags(check.tracer is not None, seen.multi)

    check.tracer_hooks.append(_follow_flags)
    multi_hooks.append(_follow_flags)
    _follow_flags()

#: ``launch_graph(exec_h, stream, exe)``: ``cuGraphLaunch`` (``cudaGraphLaunch``) of an
#: exec (``exe`` names it in the trace) on a stream (any stream-like object: see
#: :func:`stream_slot`).
launch_graph = _native.launch_graph if _native is not None else _launch_graph
#: ``launch_kernel(hot, grid, block, args, stream, shared_mem, kernel, prepare)``:
#: ``cuLaunchKernel`` (``cudaLaunchKernel``). ``hot`` is the kernel's
#: :data:`Plan` or None; ``prepare(kernel, grid, block, args, stream,
#: shared_mem)`` is the checked packing, run by the ctypes route: it returns ``(func, grid3,
#: block3, shared_mem, stream_h, device, pack)``.
launch_kernel = _native.launch_kernel if _native is not None else _launch_kernel
#: ``add_kernel(hot, grid, block, args, shared_mem, graph_h, deps, nodes, kernel, graph,
#: prepare) -> (node_h, pack)``: ``cuGraphAddKernelNode`` (``cudaGraphAddKernelNode``).
#: ``hot`` is the kernel's :data:`Plan` (with ``layout``) or None (the compiled route makes the
#: pack of the buffer it packed, of the class :func:`node_maker` names); ``deps`` the
#: dependencies (node objects, a tuple or list), ``nodes`` the graph's handle -> node dict
#: they are judged by (each the graph's own object for its handle, not removed, none twice:
#: see :func:`node_slots`), ``graph`` names the graph in the trace; ``prepare(kernel, args, grid,
#: block, shared_mem, graph, deps) -> (pack, dependency handles)`` is the checked packing and
#: judging of ``deps``, which raises the error naming what is wrong.
add_kernel = _native.add_kernel if _native is not None else _add_kernel
#: ``set_arg(exec_h, node_h, hot, address, refs, key, value, pack, exe, node)``:
#: ``cuGraphExecKernelNodeSetParams`` (``cudaGraphExecKernelNodeSetParams``) after argument
#: ``key`` (its index or its parameter's name) of the exec's pack (at ``address``; ``hot`` is
#: its layout's :data:`Plan`, with ``names``) is rewritten; the pack's ``refs`` take
#: ``value``. Returns the object replaced (for the exec to retire) or None for a plain int /
#: float / bool. A refused key, value or call leaves the pack unchanged.
set_arg = _native.set_arg if _native is not None else _set_arg
#: ``set_args(exec_h, node_h, hot, address, refs, args, pack, exe, node) -> list | None``:
#: ``cuGraphExecKernelNodeSetParams`` (``cudaGraphExecKernelNodeSetParams``) after every
#: argument of the exec's pack is rewritten from the sequence ``args`` (all converted first);
#: the pack's ``refs`` take them. Returns, per argument, the object replaced (for the exec to
#: retire) or None; None when there is none. A refused value or call leaves the pack unchanged.
set_args = _native.set_args if _native is not None else _set_args
#: ``graph_instantiate(graph_h, flags, graph) -> int``: ``cuGraphInstantiateWithFlags``, the
#: driver twin of ``cudaGraphInstantiateWithFlags``: the exec handle, or 0 if refused (no
#: raise: the caller repeats the instantiation with ``cudaGraphInstantiateWithParams``,
#: whose result code and failing node say why). ``graph`` names the graph in the trace.
graph_instantiate = _native.graph_instantiate if _native is not None else _graph_instantiate
#: ``exec_update(exec_h, graph_h, exe, graph) -> 0 or (CUresult, result, error_node_h)``:
#: ``cuGraphExecUpdate`` (``cudaGraphExecUpdate``), its ``CUgraphExecUpdateResultInfo`` on
#: the C stack; a refusal returns the code and the info's ``result`` and ``errorNode``, no
#: raise: the caller builds the error (why, and which node), which only it can describe.
exec_update = _native.exec_update if _native is not None else _exec_update


_bulk_add = getattr(_native, "add_kernel_nodes", None)


def add_kernel_nodes(graph, kernels: tuple, recs, argbytes, deps, *,
                     file_checked: bool = False) -> list:
    """Kernel nodes added from fixed records (``cuGraphAddKernelNode`` each, i.e.
    ``cudaGraphAddKernelNode``): what a loaded graph file's kernel nodes take.

    ``kernels``: a tuple of Kernels; ``recs``: ``n`` records of :data:`.bulk.RECORD` (12
    little-endian u32: kernel index, grid[3], block[3], shared memory, argument offset and
    length into ``argbytes``, first and count of its dependencies in ``deps``);
    ``argbytes``: per node its arguments as its kernel's Layout packs them (the argument
    slots, :func:`.bulk.arg_length` bytes); ``deps``: u32 indices of nodes made earlier in
    the same call. Returns the n :class:`~pycudagraph.nodes.KernelNode` objects, ordinary
    nodes (``set_arg`` by name works; their refs are plain ints, floats and bools).

    Every record is checked before any node is added (an :class:`ArgumentError` naming the
    record and field), and each kernel used is loaded and its launch limits read
    (``cuFuncGetAttribute``, ``Kernel.check_config``) against its first record; a refusal
    after that (a launch over the function's limits, a
    driver error) removes the nodes the call made before raising: a failed call leaves the
    graph as it was. The compiled route adds the nodes in C with no Python call per node;
    what it does not do, and the whole call on the ctypes route, is one ``graph.add_kernel``
    per node (:func:`.bulk.add_rest`), with the same results and errors.

    ``file_checked=True`` (the graph-file loader): ``recs`` and ``deps`` are the numpy
    arrays a graph file's check accepted, field by field, and only what that check could
    not see is checked here (:func:`.bulk.checked_records`: each kernel's argument length)."""
    used = None
    if file_checked:
        used = bulk.used_kernels(recs) if len(recs) else None
        r, d = bulk.checked_records(kernels, recs, deps, used)
    else:
        r, d = bulk.check_records(kernels, recs, argbytes, deps)
    bulk.ready(kernels, r, used)
    made: list = []
    try:
        if _bulk_add is not None and len(r):
            _bulk_add(graph.table, kernels, r, argbytes, d, made)
        if len(made) < len(r):
            bulk.add_rest(graph, kernels, r, argbytes, d, made)
    except BaseException:
        for node in reversed(made):  # nothing half-built stays behind
            try:
                graph.remove_node(node)
            except Exception:  # noqa: BLE001 - the first error is the one raised
                pass
        raise
    return made


def _slot(cls: type, name: str):
    """The member descriptor of slot ``name`` of ``cls`` (declared by it or a base)."""
    for c in cls.__mro__:
        if name in c.__dict__:
            return c.__dict__[name]
    raise AttributeError(f"{cls.__name__} has no slot {name!r}")


def node_maker(table, ledger, node, pack: type, fallback):
    """``add_node(table, deps, kernel, grid, block, args, shared_mem) -> node``: the kernel
    node added (``cuGraphAddKernelNode``, i.e. ``cudaGraphAddKernelNode``) and its pack and
    node objects made and recorded in the table in C, as ``fallback`` (``KernelNode.build``)
    does; anything else is ``fallback``'s, with the same arguments (the whole call on the
    ctypes route, where ``fallback`` itself is returned). ``table``, ``ledger`` and ``node``
    are ``(cls, *slot names)``: the table's ``h, nodes, closed, dead, ledger``, the ledger's
    ``held, shared`` and the node's ``_table, _h, _raw, _pack``, handed over by name (in any
    order); ``pack`` is the class of the packs made (it extends :data:`ArgPackBase`, whose
    fields are set). The new node is recorded by :data:`register_node`'s C implementation,
    which hands a shared ledger or a replaced entry to the ledger class's ``hold``. The
    kernel's plan is :data:`KernelBase`'s."""
    if _native is None:
        return fallback

    def slots(spec):
        return {name: _slot(spec[0], name) for name in spec[1:]}
    _native.set_node_maker(table[0], slots(table), ledger[0], slots(ledger), node[0],
                           slots(node), pack, fallback, ledger[0].hold)
    return _native.add_node


def stream_slot(cls: type, descriptor, resolve) -> None:
    """Objects of exactly type ``cls`` (streams) keep their handle (an int, None once closed)
    in the slot ``descriptor``: the compiled launches read a stream argument's handle there.
    ``resolve(obj)`` is the handle of any stream-like object (or raises naming what is wrong),
    which the ctypes routes use."""
    routes.set_stream_resolver(resolve)
    if _native is not None:
        _native.set_stream_slot(cls, descriptor)


def node_slots(cls: type, handle, raw, removed) -> None:
    """Objects of type ``cls`` (graph nodes) keep their handle (an int) in the slot ``handle``
    and ``removed`` in the slot ``raw`` once removed from their graph: the compiled
    :func:`add_kernel` reads a dependency's handle there (from objects of that type only)
    and judges it against the graph's node dict; :data:`node_live` reads the mark."""
    hot_base.live_rule(raw=raw, removed=removed)
    if _native is not None:
        _native.set_node_slots(cls, handle, raw, removed)


def table_slots(table, cls: type, dead) -> None:
    """Nodes (of the class :func:`node_slots` named) keep their table in the slot ``table``
    (a member descriptor); a table, of exactly type ``cls``, keeps why its graph is gone
    (``""`` while valid) in the slot ``dead``: with the removed mark, what the compiled
    updates judge a node live by, :data:`node_live` (which ``Node.check_live`` uses)."""
    hot_base.live_rule(table=table, table_cls=cls, dead=dead)
    if _native is not None:
        _native.set_table_slots(table, cls, dead)


def pointer_slot(cls: type, descriptor) -> None:
    """Objects of exactly type ``cls`` keep their device address in the slot ``descriptor``
    (``cls.__dict__[name]``), 0 once freed: the compiled route reads a pointer argument's
    address there, as :func:`~pycudagraph.runtime.pointers.device_pointer` does, and hands a
    freed one (0) to the converter, which raises. No effect on the ctypes route."""
    if _native is not None:
        _native.set_pointer_slot(cls, descriptor)


# ----------------------------------------------------------------------------------
# Other calls, through ctypes

def kernel_node_set_params(node, pack) -> None:
    """``cuGraphKernelNodeSetParams(node, params)`` (``cudaGraphKernelNodeSetParams``)."""
    _ensure()
    rc = _f.node_set(int(node), pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphKernelNodeSetParams", rc, (node, pack), "cudaGraphKernelNodeSetParams")


_exec_set_slots = getattr(_native, "exec_node_set_slots", None)
_NO_SLOTS, _NO_PTRS = (), []  # exec_node_set_slots with nothing to write: the call alone


def exec_kernel_node_set_slots(exe: int, node_h: int, pack, node, slots: tuple,
                               ptrs: list) -> bool:
    """Write pointer slots into ``pack``'s argument buffers and make
    ``cuGraphExecKernelNodeSetParams(exec, node, params)`` in one compiled call
    (``_native.exec_node_set_slots``): ``slots`` is a flat tuple ``(address, input, delta,
    ...)``, each 8 bytes at ``address`` becoming ``ptrs[input] + delta``. False where it is
    not made there (the ctypes route, a trace open, a value it cannot read): then nothing
    was written, and the caller writes the bytes and calls
    :func:`exec_kernel_node_set_params`."""
    if _exec_set_slots is None:
        return False
    rc = _exec_set_slots(exe, node_h, pack.address, slots, ptrs)
    if rc < 0:
        return False
    if rc:
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                     "cudaGraphExecKernelNodeSetParams")
    return True


def exec_kernel_node_set_params(exe, node_h: int, pack, node) -> None:
    """``cuGraphExecKernelNodeSetParams(exec, node, params)`` (``cudaGraphExecKernelNodeSetParams``);
    ``exe`` is the raw exec handle (an int or a ``cudaGraphExec_t``). The compiled route makes
    the call with no Python frame between (``_native.exec_node_set_slots`` with no slots)
    where it can."""
    rc = (-1 if _exec_set_slots is None else
          _exec_set_slots(int(exe), node_h, pack.address, _NO_SLOTS, _NO_PTRS))
    if rc < 0:  # not made there (a trace open, a thread with no context marked yet ...)
        _ensure()
        rc = _f.exec_set(int(exe), node_h, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                     "cudaGraphExecKernelNodeSetParams")


def add_function_node(graph_h: int, deps_h: list, func: int, dims: tuple, args: list) -> int:
    """``cuGraphAddKernelNode(&node, graph, deps, n, params)`` (``cudaGraphAddKernelNode``)
    for a ``CUfunction`` pycudagraph did not compile (a library's kernel, found by name):
    ``dims`` is grid xyz, block xyz and shared memory (7 checked ints), ``args`` the bytes
    of each argument (their sizes checked by the caller against ``cuFuncGetParamInfo``).
    The params struct, pointer array and argument bytes are packed into one buffer (the
    driver copies them during the call). Returns the node handle. Traced and checked as
    every ctypes call (:func:`.check.report`); the caller passes the ``cuda.bindings``
    route when a trace is open, whose record shows the struct's fields."""
    _ensure()
    n = len(args)
    head = KERNEL_NODE_PARAMS_SIZE + 8 * n
    blob = b"".join(args)
    mem = ctypes.create_string_buffer(head + len(blob))
    base = ctypes.addressof(mem)
    struct.pack_into(KERNEL_NODE_PARAMS_FORMAT, mem, 0, func, *dims,
                     base + KERNEL_NODE_PARAMS_SIZE, 0, 0, 0)
    at, ptrs = base + head, []
    for a in args:
        ptrs.append(at)
        at += len(a)
    struct.pack_into(f"<{n}Q", mem, KERNEL_NODE_PARAMS_SIZE, *ptrs)
    ctypes.memmove(base + head, blob, len(blob))
    nd = len(deps_h)
    out = ctypes.c_void_p()
    rc = _f.add_kernel(ctypes.addressof(out), graph_h,
                       struct.pack(f"<{nd}Q", *deps_h) if nd else None, nd, base)
    if rc or check.tracer is not None:
        check.report("cuGraphAddKernelNode", rc, (graph_h, list(deps_h), func, dims),
                     "cudaGraphAddKernelNode")
    return out.value


_param_nodes = getattr(_native, "add_param_nodes", None)


def add_function_nodes(graph_h: int, params, recs, deps) -> list[int]:
    """``cuGraphAddKernelNode`` (``cudaGraphAddKernelNode``) for each record of a run of
    library functions' nodes, with the params struct :func:`.bulk.function_params` wrote
    for it in ``params``; its dependencies are the nodes of the records ``deps[first ..
    first + count)`` names (earlier ones of the same call). Returns the node handles.

    The compiled route makes the calls with no Python work per node
    (``_native.add_param_nodes``); the ctypes route (and the compiled one with a trace open,
    which then shows each call) makes the same calls one by one. At a refusal, or a record
    whose dependencies are not earlier records (:class:`ArgumentError`, before its call),
    the nodes the call made are removed (``cuGraphDestroyNode``) before it raises: the
    graph is as it was."""
    _ensure()
    base = params.ctypes.data
    got = _param_nodes(graph_h, base, bulk.PARAMS.itemsize, recs, deps) \
        if _param_nodes is not None else None
    if got is None:
        got = _add_param_nodes(graph_h, base, recs, deps)
    handles, code = got
    if code:
        for h in reversed(handles):
            _f.destroy_node(h)
        if code < 0:
            raise ArgumentError(f"add_function_nodes: record {len(handles)}: a dependency is "
                                "not an earlier record of the call (or past the deps given)")
        check.report("cuGraphAddKernelNode", code, (graph_h, len(handles)),
                     "cudaGraphAddKernelNode")
    return handles


_record_nodes = getattr(_native, "add_record_nodes", None)
#: ``records_pass(recs, nargs, ndeps, relocs, blocks, nkernels, sizes, nslots) -> bool``: a
#: graph file's kernel records and relocations judged in one pass in compiled code
#: (``files/bulk_format.records_pass``); None on the ctypes route.
records_pass = getattr(_native, "records_pass", None)


def add_record_nodes(graph_h: int, kernels: tuple, recs, args, deps) -> list[int] | None:
    """``cuGraphAddKernelNode`` (``cudaGraphAddKernelNode``) for each record of a run of
    kernel records (:func:`add_kernel_nodes`'s ``kernels``, ``recs``, ``argbytes`` and
    ``deps``, checked by the caller: :func:`.bulk.checked_records`), each params struct
    written in compiled code from its kernel's plan (function, 1-D limits, argument
    places) with no Python work per node. Returns the node handles; None where the
    compiled route does not take the whole run (no extension or the ctypes route, several
    devices in use, a kernel whose limits are not read yet, a launch not 1-D or over them):
    the nodes it added are removed first, and the caller adds the run its own way
    (:func:`add_function_nodes`), which checks and names what is wrong. A driver refusal
    removes what was added and raises: the graph is as it was."""
    _ensure()
    got = _record_nodes(graph_h, kernels, recs, args, deps) if _record_nodes is not None else None
    if got is None:
        return None
    handles, code = got
    if code:
        for h in reversed(handles):
            _f.destroy_node(h)
        if code < 0:
            return None
        check.report("cuGraphAddKernelNode", code, (graph_h, len(handles)),
                     "cudaGraphAddKernelNode")
    return handles


def _add_param_nodes(graph_h: int, base: int, recs, deps) -> tuple:
    """The ctypes twin of ``_native.add_param_nodes``: ``(handles, code)``, each call traced
    when a trace is open."""
    w = recs.view("<u4").reshape(len(recs), bulk.RECORD_WORDS)[:, 10:12].tolist()
    d = deps.tolist() if len(deps) else []
    handles: list = []
    out = ctypes.c_void_p()
    at = ctypes.addressof(out)
    stride = bulk.PARAMS.itemsize
    for i, (first, count) in enumerate(w):
        ix = d[first:first + count]
        if first + count > len(d) or any(j >= i for j in ix):
            return handles, -1
        dh = [handles[j] for j in ix]
        rc = _f.add_kernel(at, graph_h, struct.pack(f"<{count}Q", *dh) if count else None,
                           count, base + i * stride)
        if rc:
            return handles, rc
        if check.tracer is not None:
            check.report("cuGraphAddKernelNode", rc, (graph_h, dh), "cudaGraphAddKernelNode")
        handles.append(out.value)
    return handles, 0
