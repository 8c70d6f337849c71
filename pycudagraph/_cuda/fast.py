"""The hot calls: graph launch, eager kernel launch, kernel-node add and set, exec update.

They go to libcuda through ctypes with plain integers, skipping the Python wrapper objects
of ``cuda.bindings``. Each is checked and traced like every other call (:func:`.check.report`,
whether it failed or not) and works from any thread: the first call in a thread makes the
current device's context current there (:func:`.device.ensure_device`).

Driver names are used because these are the driver twins of the runtime calls a reader
looks up: ``cuGraphLaunch`` is ``cudaGraphLaunch``, ``cuGraphAddKernelNode`` is
``cudaGraphAddKernelNode``, ``cuGraphExecKernelNodeSetParams`` is
``cudaGraphExecKernelNodeSetParams``, ``cuGraphExecUpdate`` is ``cudaGraphExecUpdate``,
``cuLaunchKernel`` is ``cudaLaunchKernel``.

Two paths make these calls. The compiled one (:mod:`._native`, a plain C extension with
no CUDA header: it receives the driver entry points from :func:`_load`) converts the
common argument kinds and makes the driver call in one step; it hands back anything it
does not handle (a value it does not convert, a thread whose context is not ensured yet,
a trace being recorded) or a failed call, and the callers then run the functions below,
which ensure the context, diagnose, trace and raise. ``PYCUDAGRAPH_NO_NATIVE=1`` turns the
compiled path off; :func:`native_status` says which path is active (``pycudagraph info``).
See ``docs/HOT_PATH.md``.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys

from ..errors import CudaNotAvailableError
from . import check
from .context import ensure_device, on_first_use, thread_state
from .structs import KERNEL_NODE_PARAMS_SIZE

__all__ = ["graph_launch", "launch_kernel", "add_kernel_node", "kernel_node_set_params",
           "exec_kernel_node_set_params", "exec_update", "native", "native_status",
           "native_layout", "NATIVE_ENV", "graph_instantiate"]

#: Set to 1 to use the ctypes path even where the compiled one is built.
NATIVE_ENV = "PYCUDAGRAPH_NO_NATIVE"


def _import_native():
    if os.environ.get(NATIVE_ENV, "").strip() not in ("", "0"):
        return None, f"disabled by {NATIVE_ENV}=1"
    try:
        mod = importlib.import_module(__package__ + "._native")  # a C extension, if built
    except ImportError as exc:
        return None, f"not built ({exc})"
    return mod, ""


#: The compiled hot calls (``pycudagraph._cuda._native``), or None: then the ctypes path.
native, _native_reason = _import_native()

_VP = ctypes.c_void_p
_U = ctypes.c_uint
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


def _load() -> None:
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
    if native is not None:
        native.init(table, vars(check))


def _ensure() -> None:
    """The context is current in this thread; the compiled path may run here from now on."""
    if thread_state.device is None:
        ensure_device()
    if native is not None:
        native.mark_thread()


def native_status() -> str:
    """Which path the hot calls take: ``"compiled (...)"`` or ``"ctypes (why)"``."""
    if native is not None:
        return f"compiled ({native.__name__}, {os.path.basename(native.__file__)})"
    return f"ctypes ({_native_reason})"


# Argument kinds of the compiled path (its K_* codes); others are packed in Python.
_INT_KINDS = {"b": 0, "B": 1, "h": 2, "H": 3, "i": 4, "I": 5, "q": 6, "Q": 7}


def native_layout(params, offsets, size: int, converters):
    """The compiled path's view of a :class:`~pycudagraph.compile.args.Layout`, or None without it.

    Kinds it packs itself: integers, ``float``/``double``, ``bool`` and pointers (through
    the slot's converter); half, bfloat16, vector and struct parameters make the whole
    call go through the Python packing.
    """
    if native is None:
        return None
    kinds = bytearray()
    for p in params:
        if p.kind == "pointer":
            kinds.append(native.K_PTR)
        elif p.kind == "bool":
            kinds.append(native.K_BOOL)
        elif p.kind == "float":
            kinds.append(native.K_F32 if p.fmt == "f" else native.K_F64)
        elif p.kind == "int" and p.fmt in _INT_KINDS:
            kinds.append(_INT_KINDS[p.fmt])
        else:
            kinds.append(native.K_OTHER)
    return native.Layout(bytes(kinds), tuple(offsets), size, tuple(converters))


on_first_use.append(_load)


def graph_launch(exec_h: int, stream_h: int, exe) -> None:
    """``cuGraphLaunch(exec, stream)``; ``exe`` names the exec in the trace."""
    _ensure()
    rc = _f.launch(exec_h, stream_h)
    if rc or check.tracer is not None:
        check.report("cuGraphLaunch", rc, (exe, stream_h))


def launch_kernel(func: int, g, b, shared_mem: int, stream_h: int, pack, kernel) -> None:
    """``cuLaunchKernel`` of a packed launch (:class:`~pycudagraph.compile.args.ArgPack`)."""
    _ensure()
    rc = _f.launch_kernel(func, g[0], g[1], g[2], b[0], b[1], b[2], shared_mem, stream_h,
                          pack.address + KERNEL_NODE_PARAMS_SIZE, None)
    if rc or check.tracer is not None:
        check.report("cuLaunchKernel", rc, (kernel, pack, stream_h))


def add_kernel_node(out, table, deps_addr, n: int, pack, deps) -> int:
    """``cuGraphAddKernelNode(&out, graph, deps, n, params)``; returns the node handle.

    ``out`` is a ``ctypes.c_void_p`` that receives the handle (the node keeps it, so one
    node can serve as a one-element dependency array); ``table`` is the graph's
    :class:`~pycudagraph.nodes.table.NodeTable`: a closed or destroyed graph raises its
    ``ClosedError`` before the call.
    """
    _ensure()
    graph_h = int(table.raw)
    rc = _f.add_kernel(ctypes.addressof(out), graph_h, deps_addr, n, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphAddKernelNode", rc, (out, table.graph, list(deps), pack))
    return out.value


def kernel_node_set_params(node, pack) -> None:
    """``cuGraphKernelNodeSetParams(node, params)``."""
    _ensure()
    rc = _f.node_set(int(node), pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphKernelNodeSetParams", rc, (node, pack))


def exec_kernel_node_set_params(exe, node_h: int, pack, node) -> None:
    """``cuGraphExecKernelNodeSetParams(exec, node, params)``; ``exe`` is the raw exec
    handle (an int or a ``cudaGraphExec_t``)."""
    _ensure()
    rc = _f.exec_set(int(exe), node_h, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack))


def exec_update(exe, graph, info) -> int:
    """``cuGraphExecUpdate(exec, graph, &info)``: traced; returns the ``CUresult``.

    The one hot call that does not raise here: the caller builds the error from ``info``
    (why, and which node), which only it can describe.
    """
    _ensure()
    rc = _f.update(int(exe.handle), int(graph.handle), ctypes.addressof(info))
    if check.tracer is not None:
        check.tracer("cuGraphExecUpdate", (exe, graph), (rc,))
    return rc


def graph_instantiate(graph, flags: int) -> int:
    """``cuGraphInstantiateWithFlags(&exec, graph, flags)``: the exec handle, or 0 if refused.

    The driver twin of ``cudaGraphInstantiateWithFlags``. Traced; a refusal does not raise
    here: the caller repeats the instantiation with ``cudaGraphInstantiateWithParams``,
    whose result code and failing node say why.
    """
    _ensure()
    out = _VP()
    rc = _f.instantiate(ctypes.addressof(out), int(graph.handle), flags)
    if check.tracer is not None:
        check.tracer("cuGraphInstantiateWithFlags", (graph, flags), (rc,))
    return 0 if rc else (out.value or 0)
