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

__all__ = ["GENERIC_VERSION", "GraphGeneric", "ExecGeneric", "set_node_params"]

#: CUDA version of cudaGraphAddNode / cudaGraphNodeSetParams / cudaGraphExecNodeSetParams.
GENERIC_VERSION = 12020


def _check(params, where: str) -> None:
    if not isinstance(params, rt.cudaGraphNodeParams):
        raise ArgumentError(f"{where}: params must be a cuda.bindings.runtime.cudaGraphNodeParams, "
                            f"got {type(params).__name__}")


def set_node_params(node, params, keep=()) -> None:
    """Change the node in its graph (``cudaGraphNodeSetParams``, CUDA 12.2+)."""
    _check(params, "set_node_params")
    handle = node.handle
    call(versions.gated("cudaGraphNodeSetParams", GENERIC_VERSION), handle, params)
    node.graph._ledger.add(node._h, params, *keep)


class GraphGeneric:
    """The generic builder of :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    def add_node(self, params, deps=(), keep=(), port: str | None = None):
        """Add a node of any type from a raw ``cudaGraphNodeParams`` (``cudaGraphAddNode``,
        CUDA 12.2+).

        Parameters
        ----------
        params : cuda.bindings.runtime.cudaGraphNodeParams
            Its ``type`` and the matching member filled in.
        deps : sequence of Node
            Nodes the new one waits for.
        keep : sequence
            Objects the parameters point at, kept alive with the node.
        port : str, optional
            Edge data for every dependency edge (``"programmatic"``, ...; CUDA 12.3+;
            ``cudaGraphAddNode_v2`` on cuda-bindings 12.x).

        Returns
        -------
        Node
            The node class of its type (read back with ``cudaGraphNodeGetType``).
        """
        _check(params, "add_node")
        versions.gated("cudaGraphAddNode", GENERIC_VERSION)
        raw_deps, n = self._dep_list(deps)
        data = edge_data(port)
        raw = versions.graph_add_node(self._raw, raw_deps, params, data * n if data else None)
        node = self._node(raw)
        self._ledger.hold(node._h, params, *keep)
        return node


class ExecGeneric:
    """The generic exec-side setter of :class:`~pycudagraph.GraphExec` (mixed into it)."""

    __slots__ = ()

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
        _check(params, "set_node_params")
        target = self._member(node)
        call(versions.gated("cudaGraphExecNodeSetParams", GENERIC_VERSION), self.handle,
             target.handle, params)
        self._hold(("node params", target._h), params, *keep)
