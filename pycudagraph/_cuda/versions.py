"""Versions, and every difference between cuda-bindings 12.x and 13.x.

:func:`require` is the one gate for version-dependent features: it raises
:class:`~pycudagraph.errors.NotSupportedError` naming the CUDA version a feature needs.
The shims below hide calls whose Python signature changed in 13.x (edge data added).
"""

from __future__ import annotations

import cuda.bindings
from cuda.bindings import nvrtc
from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

from ..errors import CudaError, CudaNotAvailableError, NotSupportedError
from .check import call
from .no_gpu import format_version

__all__ = ["node_type", "BINDINGS_VERSION", "BINDINGS_MAJOR", "driver_version", "runtime_version",
           "nvrtc_version", "format_version", "require", "graph_add_dependencies",
           "graph_remove_dependencies", "graph_get_edges", "node_dependencies",
           "node_dependents", "graph_nodes", "graph_root_nodes", "require_bindings",
           "graph_add_node", "graph_get_edges_with_data", "conditional_handle_create",
           "kernel_node_copy_attributes", "node_get_params", "gated", "stream_capture_info",
           "stream_update_capture_dependencies", "node_edges_with_data"]


def _version_tuple(text: str) -> tuple[int, int]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


#: cuda-bindings version as (major, minor); 12.x and 13.x differ in some signatures.
BINDINGS_VERSION: tuple[int, int] = _version_tuple(cuda.bindings.__version__)
BINDINGS_MAJOR: int = BINDINGS_VERSION[0]


def driver_version() -> int:
    """CUDA version the driver supports, as 1000*major + 10*minor (``cudaDriverGetVersion``)."""
    err, v = rt.cudaDriverGetVersion()
    if err or v == 0:
        raise CudaNotAvailableError(
            "cudaDriverGetVersion", int(err), "cudaErrorInsufficientDriver",
            "no NVIDIA driver was found on this machine")
    return v


def runtime_version() -> int:
    """Version of the CUDA runtime in cuda-bindings (``cudaRuntimeGetVersion``)."""
    return call(rt.cudaRuntimeGetVersion)


def nvrtc_version() -> tuple[int, int]:
    """NVRTC version as (major, minor) (``nvrtcVersion``)."""
    return tuple(call(nvrtc.nvrtcVersion))


def require(feature: str, version: int) -> None:
    """Raise :class:`NotSupportedError` unless the driver supports CUDA ``version``."""
    have = driver_version()
    if have < version:
        raise NotSupportedError(feature, format_version(version), f"a CUDA {format_version(have)} driver")


def require_bindings(feature: str, name: str) -> None:
    """Raise :class:`NotSupportedError` when cuda-bindings lacks the raw function ``name``."""
    if not hasattr(rt, name):
        raise NotSupportedError(feature, "12.3 bindings (cuda-bindings >= 12.3)",
                                f"cuda-bindings {cuda.bindings.__version__} without {name}")


def gated(name: str, version: int):
    """The runtime function ``name``; :class:`NotSupportedError` when cuda-bindings lacks
    it or the driver is older than ``version`` (``13010`` for CUDA 13.1)."""
    fn = getattr(rt, name, None)
    if fn is None:
        raise NotSupportedError(name, f"{format_version(version)} (cuda-bindings >= "
                                f"{format_version(version)})",
                                f"cuda-bindings {cuda.bindings.__version__} without {name}")
    require(name, version)
    return fn


# ----------------------------------------------------------------------------------
# Signature shims: cuda-bindings 13 added edge data to these calls (12.x has them as *_v2)

def _edges_arg(edge_data=None):
    return (edge_data,) if BINDINGS_MAJOR >= 13 else ()


def graph_add_dependencies(graph, frm: list, to: list, edge_data=None) -> None:
    """``cudaGraphAddDependencies`` (12.x without, 13.x with an edge-data argument).

    Edge data on 12.x goes through ``cudaGraphAddDependencies_v2``.
    """
    if edge_data is not None and BINDINGS_MAJOR < 13:
        require_bindings("edge data", "cudaGraphAddDependencies_v2")
        call(rt.cudaGraphAddDependencies_v2, graph, frm, to, edge_data, len(frm))
        return
    call(rt.cudaGraphAddDependencies, graph, frm, to, *_edges_arg(edge_data), len(frm))


def graph_remove_dependencies(graph, frm: list, to: list, edge_data=None) -> None:
    """``cudaGraphRemoveDependencies`` (12.x without, 13.x with an edge-data argument)."""
    if edge_data is not None and BINDINGS_MAJOR < 13:
        require_bindings("edge data", "cudaGraphRemoveDependencies_v2")
        call(rt.cudaGraphRemoveDependencies_v2, graph, frm, to, edge_data, len(frm))
        return
    call(rt.cudaGraphRemoveDependencies, graph, frm, to, *_edges_arg(edge_data), len(frm))


def _lossless(name: str):
    """The topology query ``name``, in the form that does not refuse edges with data.

    The 12.x plain forms fail with ``cudaErrorLossyQuery`` once a graph has a programmatic
    edge (measured with cuda-bindings 12.9 on a CUDA 13.0 driver); their ``_v2`` forms
    (12.3+) return the edge data too, and are used where the bindings have them. 13.x's
    plain forms are the data-returning ones.
    """
    if BINDINGS_MAJOR < 13 and hasattr(rt, name + "_v2"):
        return getattr(rt, name + "_v2")
    return getattr(rt, name)


def graph_get_edges(graph) -> tuple[list, list]:
    """``cudaGraphGetEdges``: the (from, to) lists, queried in two calls (count, then fill)."""
    fn = _lossless("cudaGraphGetEdges")
    res = call(fn, graph, 0)
    count = res[-1]
    if count == 0:
        return [], []
    res = call(fn, graph, count)
    return list(res[0][:count]), list(res[1][:count])


def graph_get_edges_with_data(graph) -> tuple[list, list, list]:
    """``cudaGraphGetEdges`` with edge data (``cudaGraphGetEdges_v2`` on 12.x):
    the (from, to, ``cudaGraphEdgeData``) lists."""
    fn = rt.cudaGraphGetEdges
    if BINDINGS_MAJOR < 13:
        require_bindings("edge data", "cudaGraphGetEdges_v2")
        fn = rt.cudaGraphGetEdges_v2
    count = call(fn, graph, 0)[-1]
    if count == 0:
        return [], [], []
    res = call(fn, graph, count)
    return list(res[0][:count]), list(res[1][:count]), list(res[2][:count])


def graph_add_node(graph, deps: list, params, edge_data=None):
    """``cudaGraphAddNode`` (13.x takes edge data; 12.x has it in ``cudaGraphAddNode_v2``)."""
    require_bindings("cudaGraphAddNode", "cudaGraphAddNode")
    if BINDINGS_MAJOR >= 13:
        return call(rt.cudaGraphAddNode, graph, deps, edge_data, len(deps), params)
    if edge_data is not None:
        return call(rt.cudaGraphAddNode_v2, graph, deps, edge_data, len(deps), params)
    return call(rt.cudaGraphAddNode, graph, deps, len(deps), params)


def conditional_handle_create(graph, default: int | None, device: int | None = None):
    """``cudaGraphConditionalHandleCreate(graph, defaultLaunchValue, flags)``: with a default,
    ``cudaGraphCondAssignDefault`` sets the value at the start of every launch. With a
    device ordinal: ``cudaGraphConditionalHandleCreate_v2(graph, ctx, ...)``, ``ctx`` being
    ``cudaDeviceGetExecutionCtx(device)`` (13.x bindings and driver)."""
    require_bindings("conditional nodes", "cudaGraphConditionalHandleCreate")
    flags = 0 if default is None else int(rt.cudaGraphConditionalHandleFlags.cudaGraphCondAssignDefault)
    if device is None:
        return call(rt.cudaGraphConditionalHandleCreate, graph, int(default or 0), flags)
    create = gated("cudaGraphConditionalHandleCreate_v2", 13000)
    ctx = call(gated("cudaDeviceGetExecutionCtx", 13000), device)
    return call(create, graph, ctx, int(default or 0), flags)


def kernel_node_copy_attributes(dst, src) -> None:
    """``cudaGraphKernelNodeCopyAttributes(dst, src)`` on 13.x.

    12.x's runtime binding names its parameters (hSrc, hDst), and called so it copied
    nothing (measured: cuda-bindings 12.9, CUDA 13.0 driver, H100); there the driver's
    ``cuGraphKernelNodeCopyAttributes(dst, src)``, whose order never changed, is used.
    """
    if BINDINGS_MAJOR >= 13:
        call(rt.cudaGraphKernelNodeCopyAttributes, dst, src)
    else:
        call(dr.cuGraphKernelNodeCopyAttributes, dr.CUgraphNode(int(dst)), dr.CUgraphNode(int(src)))


def node_get_params(node):
    """``cudaGraphNodeGetParams`` (driver 13.2 or newer; cuda-bindings 13.x)."""
    if not hasattr(rt, "cudaGraphNodeGetParams"):
        raise NotSupportedError("reading node parameters (cudaGraphNodeGetParams)", "13.2",
                                f"cuda-bindings {cuda.bindings.__version__}")
    require("reading node parameters (cudaGraphNodeGetParams)", 13020)
    return call(rt.cudaGraphNodeGetParams, node)


def _sized_list(fn, handle) -> list:
    count = call(fn, handle, 0)[-1]
    if count == 0:
        return []
    res = call(fn, handle, count)
    return list(res[0][:count])


def node_dependencies(node) -> list:
    """``cudaGraphNodeGetDependencies`` (count, then fill; ``_v2`` on 12.x, see _lossless)."""
    return _sized_list(_lossless("cudaGraphNodeGetDependencies"), node)


def node_dependents(node) -> list:
    """``cudaGraphNodeGetDependentNodes`` (count, then fill; ``_v2`` on 12.x)."""
    return _sized_list(_lossless("cudaGraphNodeGetDependentNodes"), node)


def graph_nodes(graph) -> list:
    """``cudaGraphGetNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphGetNodes, graph)


def graph_root_nodes(graph) -> list:
    """``cudaGraphGetRootNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphGetRootNodes, graph)


def stream_capture_info(stream) -> tuple:
    """``cudaStreamGetCaptureInfo``: (status, id, graph, dependencies, edge data or None).

    13.x returns edge data; 12.x has it in ``cudaStreamGetCaptureInfo_v3`` (``None`` where
    the bindings lack that).
    """
    if BINDINGS_MAJOR >= 13:
        status, cid, graph, deps, data, n = call(rt.cudaStreamGetCaptureInfo, stream)
    elif hasattr(rt, "cudaStreamGetCaptureInfo_v3"):
        status, cid, graph, deps, data, n = call(rt.cudaStreamGetCaptureInfo_v3, stream)
    else:
        status, cid, graph, deps, n = call(rt.cudaStreamGetCaptureInfo, stream)
        data = None
    n = int(n or 0)
    return (status, cid, graph, list(deps or [])[:n],
            None if data is None else [_edge_copy(d) for d in list(data)[:n]])


def _edge_copy(d):
    """A ``cudaGraphEdgeData`` of our own: the bindings' ones view the driver's array, which
    is valid only until the next call on the stream."""
    c = rt.cudaGraphEdgeData()
    c.from_port, c.to_port, c.type = int(d.from_port), int(d.to_port), int(d.type)
    return c


def stream_update_capture_dependencies(stream, deps: list, edge_data, flags: int) -> None:
    """``cudaStreamUpdateCaptureDependencies`` (13.x takes edge data; 12.x has it in
    ``cudaStreamUpdateCaptureDependencies_v2``)."""
    if BINDINGS_MAJOR >= 13:
        call(rt.cudaStreamUpdateCaptureDependencies, stream, deps, edge_data, len(deps), flags)
    elif edge_data is not None:
        require_bindings("edge data", "cudaStreamUpdateCaptureDependencies_v2")
        call(rt.cudaStreamUpdateCaptureDependencies_v2, stream, deps, edge_data, len(deps), flags)
    else:
        call(rt.cudaStreamUpdateCaptureDependencies, stream, deps, len(deps), flags)


def node_edges_with_data(node, dependents: bool = False) -> list[tuple]:
    """[(node, cudaGraphEdgeData)] of a node's dependencies (or dependents): 13.x's
    ``cudaGraphNodeGetDependencies`` / ``cudaGraphNodeGetDependentNodes`` return edge
    data; 12.x has it in ``cudaGraphNodeGetDependencies_v2`` /
    ``cudaGraphNodeGetDependentNodes_v2``."""
    name = "cudaGraphNodeGetDependentNodes" if dependents else "cudaGraphNodeGetDependencies"
    if BINDINGS_MAJOR < 13:
        require_bindings("edge data", name + "_v2")
        name += "_v2"
    fn = getattr(rt, name)
    count = call(fn, node, 0)[-1]
    if count == 0:
        return []
    res = call(fn, node, count)
    return list(zip(list(res[0])[:count], list(res[1])[:count]))


def node_type(node) -> int:
    """``cudaGraphNodeGetType`` as an int (the runtime and driver enums agree).

    The driver's ``cuGraphNodeGetType`` is asked instead where the runtime binding cannot
    answer: its enum has no batch mem-op value (12, driver only), so it raises ValueError;
    and 12.x's runtime fails with ``cudaErrorUnknown`` on a conditional node under a 13.x
    driver (measured: cuda-bindings 12.9, CUDA 13.0 driver, H100).
    """
    try:
        return int(call(rt.cudaGraphNodeGetType, node))
    except ValueError:
        pass
    except CudaError:
        if BINDINGS_MAJOR >= 13:
            raise
    return int(call(dr.cuGraphNodeGetType, dr.CUgraphNode(int(node))))
