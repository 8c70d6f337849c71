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

Each has two routes, both here. The compiled one (the C extension ``_native``; this is the
only module that knows it) converts the common argument kinds and makes the driver call in
one step, taking ints, bytes and sequences only. When it cannot (a value it does not
convert, a thread whose context is not current yet, a trace being recorded, several devices
in use, a failed driver call) it calls the ctypes route below with the same arguments, which
converts with the full diagnosis, makes the call through ctypes, traces it
(:func:`.check.report`) and raises the :class:`~pycudagraph.errors.CudaError` naming the
call and its twin. ``PYCUDAGRAPH_NO_NATIVE=1`` (read at import) leaves only the ctypes route;
:func:`native_status` says which is active. The compiled route reads layouts from plans
(``plans.py``) and addresses and handles from the slots owners name here
(:func:`pointer_slot`, :func:`node_slots`, :func:`stream_slot`); it also makes methods in C
(:func:`method_launch`, :func:`method_kernel_launch`, :func:`method_graph_add_kernel`,
:func:`method_exec_updates`) and the kernel-node add (:func:`node_maker`). Two more ctypes
calls (kernel-node set) are at the end. See ``docs/HOT_PATH.md``.
"""

from __future__ import annotations

import ctypes
import importlib
import inspect
import os
import struct
import sys

from ..errors import CudaNotAvailableError
from . import check
from .context import (current_device, ensure_device, multi_hooks, on_first_use, seen,
                      switch_device, thread_state)
from .plans import kernel_plan, layout_plan
from .structs import KERNEL_NODE_PARAMS_SIZE, ExecUpdateResultInfo

__all__ = ["launch_graph", "launch_kernel", "add_kernel", "set_arg", "set_args", "pointer_slot",
           "node_slots", "stream_slot", "method_launch", "method_kernel_launch", "node_maker",
           "method_graph_add_kernel", "method_exec_updates", "kernel_node_set_params",
           "exec_kernel_node_set_params", "exec_update", "graph_instantiate", "native_status",
           "layout_plan", "kernel_plan", "use_driver_library", "NATIVE_ENV"]

#: Set to 1 to use the ctypes route even where the compiled one is built.
NATIVE_ENV = "PYCUDAGRAPH_NO_NATIVE"


def _import_native():
    if os.environ.get(NATIVE_ENV, "").strip() not in ("", "0"):
        return None, f"disabled by {NATIVE_ENV}=1"
    try:
        mod = importlib.import_module(__package__ + "._native")  # a C extension, if built
    except ImportError as exc:
        return None, f"not built ({exc})"
    return mod, ""


_native, _native_reason = _import_native()

_VP = ctypes.c_void_p
_U = ctypes.c_uint
_PLAIN = (int, float, bool)
_Q = struct.Struct("<Q")
# libcuda symbol -> (our name, argument types)
_SYMBOLS = {
    "cuGraphLaunch": ("launch", [_VP, _VP]),
    "cuGraphAddKernelNode_v2": ("add_kernel", [_VP] * 5),
    "cuGraphKernelNodeSetParams_v2": ("node_set", [_VP] * 2),
    "cuGraphExecKernelNodeSetParams_v2": ("exec_set", [_VP] * 3),
    "cuGraphExecUpdate_v2": ("update", [_VP] * 3),
    "cuGraphInstantiateWithFlags": ("instantiate", [_VP, _VP, ctypes.c_ulonglong]),
    "cuLaunchKernel": ("launch_kernel", [_VP, _U, _U, _U, _U, _U, _U, _U, _VP, _VP, _VP]),
}


class _Table:
    """The ctypes functions, set by :func:`_load` before the first device use."""

    launch = add_kernel = node_set = exec_set = update = launch_kernel = instantiate = None


_f = _Table()


def _load(name: str | None = None) -> None:
    """Open libcuda (or ``name``) and hand its entry points to both routes."""
    if name is None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise CudaNotAvailableError(
            "dlopen", 0, "CUDA_ERROR_NO_DEVICE", f"cannot load {name}: {exc}",
            "pycudagraph needs an NVIDIA GPU and driver; none is usable on this machine") from exc
    table = {}
    for sym, (attr, argtypes) in _SYMBOLS.items():
        fn = getattr(lib, sym)
        fn.restype = ctypes.c_int
        fn.argtypes = argtypes
        setattr(_f, attr, fn)
        table[sym] = ctypes.cast(fn, _VP).value
    if _native is not None:
        _native.set_driver(table)


def use_driver_library(path: str) -> None:
    """Test hook: make both routes call the entry points of the library at ``path`` (a
    stand-in for libcuda such as ``tests/support/driver_stub.c``) from now on, in this process."""
    _load(path)


def _ensure() -> None:
    """The context is current in this thread; the compiled route may run here from now on."""
    if thread_state.device is None:
        ensure_device()
    if _native is not None:
        _native.mark_thread()


def native_status() -> str:
    """Which route the hot calls take: ``"compiled (...)"`` or ``"ctypes (why)"``."""
    if _native is not None:
        return f"compiled ({_native.__name__}, {os.path.basename(_native.__file__)})"
    return f"ctypes ({_native_reason})"


on_first_use.append(_load)

# ----------------------------------------------------------------------------------
# The ctypes routes (the compiled functions call them when they hand a call on)

def _plain_stream(obj) -> int:
    """A stream handle from None (0: the legacy stream) or an int (until :func:`stream_slot`
    names the resolver of every stream-like object)."""
    if obj is None:
        return 0
    if type(obj) is int:
        return obj
    raise TypeError(f"cannot use {type(obj).__name__} as a CUDA stream here")


_stream_handle = _plain_stream


def _launch_graph(exec_h: int, stream, exe) -> None:
    stream_h = _stream_handle(stream)  # a closed Stream raises its ClosedError
    _ensure()
    rc = _f.launch(exec_h, stream_h)
    if rc or check.tracer is not None:
        check.report("cuGraphLaunch", rc, (exe, stream_h), "cudaGraphLaunch")


def _launch_kernel(hot, grid, block, args, stream, shared_mem, kernel, prepare) -> None:
    func, g, b, smem, s, dev, pack = prepare(kernel, grid, block, args, stream, shared_mem)
    back = None
    if seen.multi and dev != thread_state.device:  # CUDA launches on the current device
        back = current_device()
        switch_device(dev)
    try:
        _ensure()
        rc = _f.launch_kernel(func, g[0], g[1], g[2], b[0], b[1], b[2], smem, s,
                              pack.address + KERNEL_NODE_PARAMS_SIZE, None)
        if rc or check.tracer is not None:
            check.report("cuLaunchKernel", rc, (kernel, pack, s), "cudaLaunchKernel")
    finally:
        if back is not None:
            switch_device(back)


def _add_kernel(hot, grid, block, args, shared_mem, graph_h: int, deps, nodes: dict, kernel,
                graph, prepare) -> tuple:
    pack, deps_h = prepare(kernel, args, grid, block, shared_mem, graph, deps)
    _ensure()
    n = len(deps_h)
    out = _VP()
    deps_arg = None if not n else _Q.pack(*deps_h) if n == 1 else struct.pack(f"<{n}Q", *deps_h)
    rc = _f.add_kernel(ctypes.addressof(out), graph_h, deps_arg, n, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphAddKernelNode", rc, (out, graph, list(deps), pack),
                     "cudaGraphAddKernelNode")
    return out.value, pack


def _set_arg(exec_h: int, node_h: int, hot, address: int, refs: list, key, value, pack, exe,
             node):
    layout, t = pack.layout, type(key)
    if t is int and 0 <= key < layout.count:
        index = key
    elif t is str and key in layout.index:
        index = layout.index[key]
    else:
        index = layout.slot_index(key)  # raises naming a key that names no parameter
    if _native is not None and t is not int and t is not str:
        # a numpy integer, say: the compiled route takes the index it names
        return _native.set_arg(exec_h, node_h, hot, address, refs, index, value, pack, exe, node)
    saved = pack.write(index, value)  # the slot writer: raises for a value that does not fit
    _ensure()
    rc = _f.exec_set(exec_h, node_h, address)
    if rc or check.tracer is not None:
        if rc:
            pack.restore(index, saved)  # refused: the exec's pack is as it was
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                     "cudaGraphExecKernelNodeSetParams")
    old = refs[index]
    refs[index] = value
    return None if old is value or type(old) in _PLAIN else old


def _set_args(exec_h: int, node_h: int, hot, address: int, refs: list, args, pack, exe,
              node) -> list | None:
    state = pack.state()
    try:
        old = pack.apply(args)  # the checked packing: raises for a value that does not fit
        _ensure()
        rc = _f.exec_set(exec_h, node_h, address)
        if rc or check.tracer is not None:
            check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                         "cudaGraphExecKernelNodeSetParams")
    except BaseException:
        pack.reset(state)  # refused: the exec's pack (bytes and refs) is as it was
        raise
    out = [None if o is v or type(o) in _PLAIN else o for o, v in zip(old, pack.refs)]
    return out if any(o is not None for o in out) else None


def _exec_update(exec_h: int, graph_h: int, exe, graph):
    _ensure()
    info = ExecUpdateResultInfo()
    rc = _f.update(exec_h, graph_h, ctypes.addressof(info))
    if check.tracer is not None:
        check.tracer("cuGraphExecUpdate", (exe, graph), (rc,))
    return (rc, info.result, info.errorNode or 0) if rc else 0


def _graph_instantiate(graph_h: int, flags: int, graph) -> int:
    _ensure()
    out = _VP()
    rc = _f.instantiate(ctypes.addressof(out), graph_h, flags)
    if check.tracer is not None:
        check.tracer("cuGraphInstantiateWithFlags", (graph, flags), (rc,))
    return 0 if rc else (out.value or 0)


# ----------------------------------------------------------------------------------
# The hot calls

if _native is not None:
    _native.set_routes((_launch_graph, _launch_kernel, _add_kernel, _set_arg, _set_args,
                        _graph_instantiate, _exec_update), check.capture_watchers)

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
#: ``(kernel_plan, converters)`` or None; ``prepare(kernel, grid, block, args, stream,
#: shared_mem)`` is the checked packing, run by the ctypes route: it returns ``(func, grid3,
#: block3, shared_mem, stream_h, device, pack)``.
launch_kernel = _native.launch_kernel if _native is not None else _launch_kernel
#: ``add_kernel(hot, grid, block, args, shared_mem, graph_h, deps, nodes, kernel, graph,
#: prepare) -> (node_h, pack)``: ``cuGraphAddKernelNode`` (``cudaGraphAddKernelNode``).
#: ``hot`` is ``(kernel_plan, converters, layout)`` or None (the compiled route makes the
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
#: its layout's ``(plan, converters, names)``) is rewritten; the pack's ``refs`` take
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


def method_launch(cls: type, handle: str, last: str, block: str, after: str,
                  pending: list) -> None:
    """Make ``cls.launch`` (an exec's graph launch, ``cuGraphLaunch``) a method in C that does
    what the Python method does without its frame: the launch of the handle in slot
    ``handle`` on the stream (read as :func:`launch_graph` reads it), the stream kept in slot
    ``last``, then ``cls.<after>(exe)`` when ``pending`` (host nodes' errors) is not empty;
    while slot ``block`` holds a reason (not None), the Python method's (which refuses).
    Anything else is the Python method's (kept, and called with the same arguments). No
    effect on the ctypes route."""
    if _native is None:
        return
    python = cls.__dict__["launch"]
    cls.launch = _native.exec_launch_method(cls, _slot(cls, handle), _slot(cls, last),
                                            _slot(cls, block), python, cls.__dict__[after],
                                            pending,
                                            _doc("launch($self, stream=None)", python))


def _slot(cls: type, name: str):
    """The member descriptor of slot ``name`` of ``cls`` (declared by it or a base)."""
    for c in cls.__mro__:
        if name in c.__dict__:
            return c.__dict__[name]
    raise AttributeError(f"{cls.__name__} has no slot {name!r}")


def _doc(signature: str, method) -> str:
    """A method in C's docstring: its signature line, then the Python method's text."""
    return f"{signature}\n--\n\n" + inspect.cleandoc(method.__doc__ or "")


def node_maker(table, ledger, kernel, node, pack, fallback, record):
    """``add_node(table, deps, kernel, grid, block, args, shared_mem) -> node``: the kernel
    node added (``cuGraphAddKernelNode``, i.e. ``cudaGraphAddKernelNode``) and its pack and
    node objects made and recorded in the table in C, as ``fallback`` (``KernelNode.build``)
    does; anything else is ``fallback``'s, with the same arguments (the whole call on the
    ctypes route, where ``fallback`` itself is returned). Each argument but ``fallback`` is
    ``(cls, *slot names)``: the table's ``h, nodes, closed, dead, ledger``, the ledger's
    ``held, shared``, the kernel's ``_hot``, the node's ``_table, _h, _raw, _pack`` and the
    pack's ``layout, buf, address, refs, kernel``; ``record(table, node, pack)`` records a
    node whose table changed under the add (while the GIL was released)."""
    if _native is None:
        return fallback

    def slots(spec):
        return tuple(_slot(spec[0], name) for name in spec[1:])
    _native.set_node_maker(table[0], slots(table), ledger[0], slots(ledger), kernel[0],
                           _slot(*kernel), node[0], slots(node), pack[0], slots(pack), fallback,
                           record)
    return _native.add_node


def method_kernel_launch(cls: type, hot: str, prepare, keeps: list, keep) -> None:
    """``cls.launch`` (``cuLaunchKernel``) as a method in C: :func:`launch_kernel` with the
    plan in slot ``hot`` and ``prepare`` (the checked packing), then ``keep(args)`` while
    ``keeps`` (open captures' lists) is not empty; a call it cannot parse is the Python
    method's. No effect on the ctypes route."""
    if _native is not None:
        python = cls.__dict__["launch"]
        cls.launch = _native.kernel_launch_method(
            cls, _slot(cls, hot), python, prepare, keeps, keep,
            _doc("launch($self, grid, block, args=(), stream=None, shared_mem=0)", python))


def method_graph_add_kernel(cls: type) -> None:
    """``cls.add_kernel`` as a method in C: the node maker's ``add_node(table, deps, ...)``
    (``table``: a slot) as the Python method calls it, which takes any other call."""
    if _native is not None:
        python = cls.__dict__["add_kernel"]
        cls.add_kernel = _native.graph_add_kernel_method(cls, _slot(cls, "table"), python, _doc(
            "add_kernel($self, kernel, grid, block, args=(), shared_mem=0, deps=(), *, "
            "priority=None, cluster=None, cooperative=None, access_policy=None, "
            "mem_sync_domain=None, device_updatable=None)", python))


def method_exec_updates(classes: tuple, slots: tuple, removed) -> None:
    """``set_arg`` and ``set_params`` of ``classes[0]`` (GraphExec) as methods in C for a
    kernel node the exec has a record of: :func:`set_arg` / :func:`set_args` with the
    record's handles and pack, the replaced objects handed to its ``retire``; anything else
    is the Python methods'. ``classes``: (GraphExec, ExecNode, Node, NodeTable, ArgPack,
    Layout, KernelNode); ``slots``: ``(class, slot name)`` of the exec's ``_h, _nodes``, the
    record's ``node, node_h, exec_raw, exec_h, args, retire``, the node's ``_raw, _table``,
    the table's ``dead``, the pack's ``layout, address, refs``, the layout's ``hot``;
    ``removed``: a removed node's mark. No effect on the ctypes route."""
    if _native is not None:
        cls = classes[0]
        arg, params = cls.__dict__["set_arg"], cls.__dict__["set_params"]
        cls.set_arg, cls.set_params = _native.exec_update_methods(
            classes, tuple(_slot(owner, name) for owner, name in slots), removed, arg, params,
            _doc("set_arg($self, node, index_or_name, value)", arg),
            _doc("set_params($self, node, /, **changes)", params))


def stream_slot(cls: type, descriptor, resolve) -> None:
    """Objects of exactly type ``cls`` (streams) keep their handle (an int, None once closed)
    in the slot ``descriptor``: the compiled launches read a stream argument's handle there.
    ``resolve(obj)`` is the handle of any stream-like object (or raises naming what is wrong),
    which the ctypes routes use."""
    global _stream_handle
    _stream_handle = resolve
    if _native is not None:
        _native.set_stream_slot(cls, descriptor)


def node_slots(cls: type, handle, raw, removed) -> None:
    """Objects of type ``cls`` (graph nodes) keep their handle (an int) in the slot ``handle``
    and ``removed`` in the slot ``raw`` once removed from their graph: the compiled
    :func:`add_kernel` reads a dependency's handle there (from objects of that type only)
    and judges it against the graph's node dict. No effect on the ctypes route."""
    if _native is not None:
        _native.set_node_slots(cls, handle, raw, removed)


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


def exec_kernel_node_set_params(exe, node_h: int, pack, node) -> None:
    """``cuGraphExecKernelNodeSetParams(exec, node, params)`` (``cudaGraphExecKernelNodeSetParams``);
    ``exe`` is the raw exec handle (an int or a ``cudaGraphExec_t``)."""
    _ensure()
    rc = _f.exec_set(int(exe), node_h, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                     "cudaGraphExecKernelNodeSetParams")
