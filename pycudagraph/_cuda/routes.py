"""The ctypes routes of the hot calls, and what both routes share: the C extension (if
built and not switched off), libcuda's entry points, the thread's readiness, the stream
resolver and the list of host nodes' pending errors. :mod:`pycudagraph._cuda.fast` (the hot
calls) and :mod:`pycudagraph._cuda.hot_base` (the pure-Python base types) read them from here;
nothing else does. See ``docs/HOT_PATH.md``.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import struct

from . import check
from .context import current_device, ensure_device, on_first_use, seen, switch_device, thread_state
from .structs import KERNEL_NODE_PARAMS_SIZE, ExecUpdateResultInfo

__all__ = ["NATIVE_ENV", "native_status", "use_driver_library", "host_errors",
           "set_stream_resolver"]

#: Host nodes' exceptions not raised yet, ``(call id, name, exception)`` (appended on CUDA's
#: host thread by :mod:`pycudagraph.runtime.hostfn`): a launch that finds it not empty raises
#: the first that is its exec's.
host_errors: list = []

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


native, native_reason = _import_native()

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
    "cuGraphDestroyNode": ("destroy_node", [_VP]),
}


class _Table:
    """The ctypes functions, set by :func:`load` before the first device use."""

    launch = add_kernel = node_set = exec_set = update = launch_kernel = instantiate = None
    destroy_node = None


driver = _Table()


def load(name: str | None = None) -> None:
    """Open libcuda (or ``name``) and hand its entry points to both routes."""
    lib = check.open_driver(
        check.DRIVER_LIBRARY if name is None else name,
        "pycudagraph needs an NVIDIA GPU and driver; none is usable on this machine")
    table = {}
    for sym, (attr, argtypes) in _SYMBOLS.items():
        fn = getattr(lib, sym)
        fn.restype = ctypes.c_int
        fn.argtypes = argtypes
        setattr(driver, attr, fn)
        table[sym] = ctypes.cast(fn, _VP).value
    if native is not None:
        native.set_driver(table)


def use_driver_library(path: str) -> None:
    """Test hook: make both routes call the entry points of the library at ``path`` (a
    stand-in for libcuda such as ``tests/support/driver_stub.c``) from now on, in this process."""
    load(path)


def ensure() -> None:
    """The context is current in this thread; the compiled route may run here from now on."""
    if thread_state.device is None:
        ensure_device()
    if native is not None:
        native.mark_thread()


def native_status() -> str:
    """Which route the hot calls take: ``"compiled (...)"`` or ``"ctypes (why)"``."""
    if native is not None:
        return f"compiled ({native.__name__}, {os.path.basename(native.__file__)})"
    return f"ctypes ({native_reason})"


on_first_use.append(load)

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


def set_stream_resolver(resolve) -> None:
    """``resolve(obj)``: the handle of any stream-like object (or it raises naming what is
    wrong); what the ctypes routes use (``fast.stream_slot`` sets it)."""
    global _stream_handle
    _stream_handle = resolve


def launch_graph(exec_h: int, stream, exe) -> None:
    stream_h = _stream_handle(stream)  # a closed Stream raises its ClosedError
    ensure()
    rc = driver.launch(exec_h, stream_h)
    if rc or check.tracer is not None:
        check.report("cuGraphLaunch", rc, (exe, stream_h), "cudaGraphLaunch")


def launch_kernel(hot, grid, block, args, stream, shared_mem, kernel, prepare) -> None:
    func, g, b, smem, s, dev, pack = prepare(kernel, grid, block, args, stream, shared_mem)
    back = None
    if seen.multi and dev != thread_state.device:  # CUDA launches on the current device
        back = current_device()
        switch_device(dev)
    try:
        ensure()
        rc = driver.launch_kernel(func, g[0], g[1], g[2], b[0], b[1], b[2], smem, s,
                              pack.address + KERNEL_NODE_PARAMS_SIZE, None)
        if rc or check.tracer is not None:
            check.report("cuLaunchKernel", rc, (kernel, pack, s), "cudaLaunchKernel")
    finally:
        if back is not None:
            switch_device(back)


def add_kernel(hot, grid, block, args, shared_mem, graph_h: int, deps, nodes: dict, kernel,
                graph, prepare) -> tuple:
    pack, deps_h = prepare(kernel, args, grid, block, shared_mem, graph, deps)
    ensure()
    n = len(deps_h)
    out = _VP()
    deps_arg = None if not n else _Q.pack(*deps_h) if n == 1 else struct.pack(f"<{n}Q", *deps_h)
    rc = driver.add_kernel(ctypes.addressof(out), graph_h, deps_arg, n, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphAddKernelNode", rc, (out, graph, list(deps), pack),
                     "cudaGraphAddKernelNode")
    return out.value, pack


def set_arg(exec_h: int, node_h: int, hot, address: int, refs: list, key, value, pack, exe,
             node):
    layout, t = pack.layout, type(key)
    if t is int and 0 <= key < layout.count:
        index = key
    elif t is str and key in layout.index:
        index = layout.index[key]
    else:
        index = layout.slot_index(key)  # raises naming a key that names no parameter
    if native is not None and t is not int and t is not str:
        # a numpy integer, say: the compiled route takes the index it names
        return native.set_arg(exec_h, node_h, hot, address, refs, index, value, pack, exe, node)
    saved = pack.write(index, value)  # the slot writer: raises for a value that does not fit
    ensure()
    rc = driver.exec_set(exec_h, node_h, address)
    if rc or check.tracer is not None:
        if rc:
            pack.restore(index, saved)  # refused: the exec's pack is as it was
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                     "cudaGraphExecKernelNodeSetParams")
    old = refs[index]
    refs[index] = value
    return None if old is value or type(old) in _PLAIN else old


def set_args(exec_h: int, node_h: int, hot, address: int, refs: list, args, pack, exe,
              node) -> list | None:
    state = pack.state()
    try:
        old = pack.apply(args)  # the checked packing: raises for a value that does not fit
        ensure()
        rc = driver.exec_set(exec_h, node_h, address)
        if rc or check.tracer is not None:
            check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack),
                         "cudaGraphExecKernelNodeSetParams")
    except BaseException:
        pack.reset(state)  # refused: the exec's pack (bytes and refs) is as it was
        raise
    out = [None if o is v or type(o) in _PLAIN else o for o, v in zip(old, pack.refs)]
    return out if any(o is not None for o in out) else None


def exec_update(exec_h: int, graph_h: int, exe, graph):
    ensure()
    info = ExecUpdateResultInfo()
    rc = driver.update(exec_h, graph_h, ctypes.addressof(info))
    if check.tracer is not None:
        check.tracer("cuGraphExecUpdate", (exe, graph), (rc,))
    return (rc, info.result, info.errorNode or 0) if rc else 0


def graph_instantiate(graph_h: int, flags: int, graph) -> int:
    ensure()
    out = _VP()
    rc = driver.instantiate(ctypes.addressof(out), graph_h, flags)
    if check.tracer is not None:
        check.tracer("cuGraphInstantiateWithFlags", (graph, flags), (rc,))
    return 0 if rc else (out.value or 0)
