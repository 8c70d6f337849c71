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
"""

from __future__ import annotations

import ctypes
import sys

from ..errors import CudaNotAvailableError
from . import check
from .device import ensure_device, on_first_use, thread_state
from .structs import KERNEL_NODE_PARAMS_SIZE

__all__ = ["graph_launch", "launch_kernel", "add_kernel_node", "kernel_node_set_params",
           "exec_kernel_node_set_params", "exec_update"]

_VP = ctypes.c_void_p
_U = ctypes.c_uint
# libcuda symbol -> (our name, argument types)
_SYMBOLS = {
    "cuGraphLaunch": ("launch", [_VP, _VP]),
    "cuGraphAddKernelNode_v2": ("add_kernel", [_VP] * 5),
    "cuGraphKernelNodeSetParams_v2": ("node_set", [_VP] * 2),
    "cuGraphExecKernelNodeSetParams_v2": ("exec_set", [_VP] * 3),
    "cuGraphExecUpdate_v2": ("update", [_VP] * 3),
    "cuLaunchKernel": ("launch_kernel", [_VP, _U, _U, _U, _U, _U, _U, _U, _VP, _VP, _VP]),
}


class _Table:
    """The ctypes functions, set by :func:`_load` before the first device use."""

    launch = add_kernel = node_set = exec_set = update = launch_kernel = None


_f = _Table()


def _load() -> None:
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise CudaNotAvailableError(
            "dlopen", 0, "CUDA_ERROR_NO_DEVICE", f"cannot load {name}: {exc}",
            "pycudagraph needs an NVIDIA GPU and driver; none is usable on this machine") from exc
    for sym, (attr, argtypes) in _SYMBOLS.items():
        fn = getattr(lib, sym)
        fn.restype = ctypes.c_int
        fn.argtypes = argtypes
        setattr(_f, attr, fn)


on_first_use.append(_load)


def graph_launch(exec_h: int, stream_h: int, exe) -> None:
    """``cuGraphLaunch(exec, stream)``; ``exe`` names the exec in the trace."""
    if thread_state.device is None:
        ensure_device()
    rc = _f.launch(exec_h, stream_h)
    if rc or check.tracer is not None:
        check.report("cuGraphLaunch", rc, (exe, stream_h))


def launch_kernel(func: int, g, b, shared_mem: int, stream_h: int, pack, kernel) -> None:
    """``cuLaunchKernel`` of a packed launch (:class:`~pycudagraph.args.ArgPack`)."""
    if thread_state.device is None:
        ensure_device()
    rc = _f.launch_kernel(func, g[0], g[1], g[2], b[0], b[1], b[2], shared_mem, stream_h,
                          pack.address + KERNEL_NODE_PARAMS_SIZE, None)
    if rc or check.tracer is not None:
        check.report("cuLaunchKernel", rc, (kernel, pack, stream_h))


def add_kernel_node(out, graph, deps_addr, n: int, pack, deps) -> int:
    """``cuGraphAddKernelNode(&out, graph, deps, n, params)``; returns the node handle.

    ``out`` is a ``ctypes.c_void_p`` that receives the handle (the node keeps it, so one
    node can serve as a one-element dependency array). A closed or destroyed ``graph``
    raises its ``ClosedError`` before the call.
    """
    if thread_state.device is None:
        ensure_device()
    if graph._closed or graph._dead:
        graph._refuse()
    rc = _f.add_kernel(ctypes.addressof(out), graph._h, deps_addr, n, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphAddKernelNode", rc, (out, graph, list(deps), pack))
    return out.value


def kernel_node_set_params(node, pack) -> None:
    """``cuGraphKernelNodeSetParams(node, params)``."""
    if thread_state.device is None:
        ensure_device()
    rc = _f.node_set(node._h, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphKernelNodeSetParams", rc, (node, pack))


def exec_kernel_node_set_params(exe, node_h: int, pack, node) -> None:
    """``cuGraphExecKernelNodeSetParams(exec, node, params)``."""
    if thread_state.device is None:
        ensure_device()
    rc = _f.exec_set(exe._h, node_h, pack.address)
    if rc or check.tracer is not None:
        check.report("cuGraphExecKernelNodeSetParams", rc, (exe, node, pack))


def exec_update(exe, graph, info) -> int:
    """``cuGraphExecUpdate(exec, graph, &info)``: traced; returns the ``CUresult``.

    The one hot call that does not raise here: the caller builds the error from ``info``
    (why, and which node), which only it can describe.
    """
    if thread_state.device is None:
        ensure_device()
    rc = _f.update(exe._h, graph._h, ctypes.addressof(info))
    if check.tracer is not None:
        check.tracer("cuGraphExecUpdate", (exe, graph), (rc,))
    return rc
