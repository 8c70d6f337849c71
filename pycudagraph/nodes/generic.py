"""Generic node parameters (``cudaGraphNodeParams``) for node kinds with no dedicated call.

Every node type CUDA has can be added, read and changed through one struct: its ``type``
says which member (``kernel``, ``memcpy``, ``memset``, ``host``, ``graph``, ``eventWait``,
``eventRecord``, ``extSemSignal``, ``extSemWait``, ``alloc``, ``free``, ``conditional``)
holds the parameters. pycudagraph's ``add_*`` builders use the typed calls; these take
the raw ``cuda.bindings.runtime.cudaGraphNodeParams`` for anything else, and keep the
objects given in ``keep`` (what the struct points at) alive with the node.
"""

from __future__ import annotations

from .._cuda import call, rt, versions
from .edges import edge_data
from ..errors import ArgumentError

__all__ = ["GENERIC_VERSION", "check_params", "set_node_params", "exec_set_node_params",
           "add_node"]

#: CUDA version of cudaGraphAddNode / cudaGraphNodeSetParams / cudaGraphExecNodeSetParams.
GENERIC_VERSION = 12020


def check_params(params, where: str) -> None:
    """``params`` must be a raw ``cudaGraphNodeParams``."""
    if not isinstance(params, rt.cudaGraphNodeParams):
        raise ArgumentError(f"{where}: params must be a cuda.bindings.runtime.cudaGraphNodeParams, "
                            f"got {type(params).__name__}")


def set_node_params(node, params, keep=()) -> None:
    """Change the node in its graph (``cudaGraphNodeSetParams``, CUDA 12.2+); the caller
    keeps ``params`` and ``keep`` alive with the node."""
    check_params(params, "set_node_params")
    handle = node.handle
    call(versions.gated("cudaGraphNodeSetParams", GENERIC_VERSION), handle, params)


def exec_set_node_params(exec_raw, node_handle, params) -> None:
    """Change one node of an exec (``cudaGraphExecNodeSetParams``, CUDA 12.2+)."""
    check_params(params, "set_node_params")
    call(versions.gated("cudaGraphExecNodeSetParams", GENERIC_VERSION), exec_raw, node_handle,
         params)


def add_node(table, deps, params, port=None):
    """``cudaGraphAddNode`` (CUDA 12.2+; ``cudaGraphAddNode_v2`` with edge data on 12.x);
    returns the new node's raw handle."""
    check_params(params, "add_node")
    versions.gated("cudaGraphAddNode", GENERIC_VERSION)
    raw_deps, n = table.dep_list(deps)
    data = edge_data(port)
    return versions.graph_add_node(table.raw, raw_deps, params, data * n if data else None)
