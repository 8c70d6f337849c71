"""Versions, and every difference between cuda-bindings 12.x and 13.x.

:func:`require` is the one gate for version-dependent features: it raises
:class:`~pycudagraph.errors.NotSupportedError` naming the CUDA version a feature needs.
The shims below hide calls whose Python signature changed in 13.x (edge data added).
"""

from __future__ import annotations

import cuda.bindings
from cuda.bindings import nvrtc
from cuda.bindings import runtime as rt

from ..errors import CudaNotAvailableError, NotSupportedError
from .check import call

__all__ = ["BINDINGS_VERSION", "BINDINGS_MAJOR", "driver_version", "runtime_version",
           "nvrtc_version", "format_version", "require", "graph_add_dependencies",
           "graph_remove_dependencies", "graph_get_edges", "node_dependencies",
           "node_dependents", "graph_nodes", "graph_root_nodes"]


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


def format_version(v: int) -> str:
    """``12030`` -> ``"12.3"``."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def require(feature: str, version: int) -> None:
    """Raise :class:`NotSupportedError` unless the driver supports CUDA ``version``."""
    have = driver_version()
    if have < version:
        raise NotSupportedError(feature, format_version(version), f"a CUDA {format_version(have)} driver")


# ----------------------------------------------------------------------------------
# Signature shims: cuda-bindings 13 added edge data to these calls

def _edges_arg(edge_data=None):
    return (edge_data,) if BINDINGS_MAJOR >= 13 else ()


def graph_add_dependencies(graph, frm: list, to: list, edge_data=None) -> None:
    """``cudaGraphAddDependencies`` (12.x without, 13.x with an edge-data argument)."""
    call(rt.cudaGraphAddDependencies, graph, frm, to, *_edges_arg(edge_data), len(frm))


def graph_remove_dependencies(graph, frm: list, to: list, edge_data=None) -> None:
    """``cudaGraphRemoveDependencies`` (12.x without, 13.x with an edge-data argument)."""
    call(rt.cudaGraphRemoveDependencies, graph, frm, to, *_edges_arg(edge_data), len(frm))


def graph_get_edges(graph) -> tuple[list, list]:
    """``cudaGraphGetEdges``: the (from, to) lists, queried in two calls (count, then fill)."""
    res = call(rt.cudaGraphGetEdges, graph, 0)
    count = res[-1]
    if count == 0:
        return [], []
    res = call(rt.cudaGraphGetEdges, graph, count)
    return list(res[0][:count]), list(res[1][:count])


def _sized_list(fn, handle) -> list:
    count = call(fn, handle, 0)[-1]
    if count == 0:
        return []
    res = call(fn, handle, count)
    return list(res[0][:count])


def node_dependencies(node) -> list:
    """``cudaGraphNodeGetDependencies`` (count, then fill)."""
    return _sized_list(rt.cudaGraphNodeGetDependencies, node)


def node_dependents(node) -> list:
    """``cudaGraphNodeGetDependentNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphNodeGetDependentNodes, node)


def graph_nodes(graph) -> list:
    """``cudaGraphGetNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphGetNodes, graph)


def graph_root_nodes(graph) -> list:
    """``cudaGraphGetRootNodes`` (count, then fill)."""
    return _sized_list(rt.cudaGraphGetRootNodes, graph)
