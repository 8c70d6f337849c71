"""Graph, exec and node IDs, exec flags, and the text listing of a graph.

``print(graph)`` / :meth:`Graph.describe` list every node in topological order: its
position, type, local ID (``cudaGraphNodeGetLocalId``, the number ``cudaGraphDebugDotPrint``
shows), node handle, for kernels the name with ``<<<grid, block, shared_mem>>>`` and the
function handle, and the positions of its dependencies.

The ID calls are new in CUDA 13.1 (cuda-bindings 13.1 and a 13.1 driver); on older ones
they raise :class:`~pycudagraph.errors.NotSupportedError` naming what is missing, and the
listing leaves the local ID out.
"""

from __future__ import annotations

from .._cuda import call, rt, versions
from ..errors import NotSupportedError

__all__ = ["ID_VERSION", "id_call", "topological_order", "describe_graph", "GraphIntrospection",
           "ExecIntrospection", "INSTANTIATE_FLAGS"]

#: CUDA version of cudaGraphGetId & co. (13.1: cuda-bindings 13.0 lacks them).
ID_VERSION = 13010

#: Bits of ``cudaGraphExecGetFlags`` -> the :meth:`Graph.instantiate` keyword they stand for.
INSTANTIATE_FLAGS = {
    int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagAutoFreeOnLaunch): "auto_free_on_launch",
    int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagDeviceLaunch): "device_launch",
    int(rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagUseNodePriority): "use_node_priority",
}


def id_call(name: str, handle):
    """Run the ID call ``name`` (``cudaGraphGetId``, ...) on ``handle``, gated on the
    bindings having it and the driver being CUDA 13.1 or newer."""
    return call(versions.gated(name, ID_VERSION), handle)


def topological_order(nodes: list, edges: list) -> list:
    """``nodes`` ordered so every node comes after its dependencies (Kahn's algorithm,
    ties kept in the given, creation, order)."""
    index = {n: i for i, n in enumerate(nodes)}
    waiting = {n: 0 for n in nodes}
    after: dict = {n: [] for n in nodes}
    for a, b in edges:
        waiting[b] += 1
        after[a].append(b)
    ready = [n for n in nodes if waiting[n] == 0]
    out = []
    while ready:
        ready.sort(key=index.__getitem__)
        n = ready.pop(0)
        out.append(n)
        for m in after[n]:
            waiting[m] -= 1
            if waiting[m] == 0:
                ready.append(m)
    if len(out) != len(nodes):  # CUDA keeps graphs acyclic; a partial read is not
        out.extend(n for n in nodes if n not in set(out))
    return out


def _listing(node) -> str:
    """What the listing shows of a node (:meth:`Node.listing`: a kernel's
    ``name<<<grid, block, shared_mem>>> func=0x...``, else its one-line description)."""
    return node.listing()


def _local_id(node) -> str:
    try:
        return str(id_call("cudaGraphNodeGetLocalId", node.handle))
    except NotSupportedError:
        return "-"


def describe_graph(graph) -> str:
    """The text listing of ``graph`` (see the module docstring)."""
    nodes = graph.nodes
    edges = graph.edges
    order = topological_order(nodes, edges)
    pos = {n: i for i, n in enumerate(order)}
    deps: dict = {n: [] for n in nodes}
    for a, b in edges:
        deps[b].append(pos[a])
    lines = [f"Graph 0x{graph.table.h:x}: {len(nodes)} nodes, {len(edges)} edges"]
    for n in order:
        what = _listing(n)
        d = ", ".join(str(i) for i in sorted(deps[n])) or "-"
        lines.append(f"  [{pos[n]}] {str(n.type):<12} id={_local_id(n):<3} node=0x{int(n):x}  "
                     f"{what}  deps: {d}")
    return "\n".join(lines)


class GraphIntrospection:
    """IDs and the text listing of a :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    def describe(self) -> str:
        """Every node in topological order: position, type, local ID, node handle, kernel
        name with ``<<<grid, block, shared_mem>>>`` and function handle, dependencies.

        Reads ``cudaGraphGetNodes``, ``cudaGraphGetEdges``, ``cudaGraphNodeGetLocalId``
        (CUDA 13.1+; ``-`` before) and ``cuGraphKernelNodeGetParams`` for captured kernels.
        ``print(graph)`` prints it.

        Returns
        -------
        str
        """
        return describe_graph(self)

    def __str__(self) -> str:
        return describe_graph(self)

    @property
    def id(self) -> int:
        """The graph's ID, as ``cudaGraphDebugDotPrint`` shows it (``cudaGraphGetId``, CUDA 13.1+).

        Raises
        ------
        NotSupportedError
            With cuda-bindings or a driver older than 13.1.
        """
        return int(id_call("cudaGraphGetId", self.handle))


class ExecIntrospection:
    """ID and instantiate flags of a :class:`~pycudagraph.GraphExec` (mixed into it)."""

    __slots__ = ()

    @property
    def id(self) -> int:
        """The exec's ID (``cudaGraphExecGetId``, CUDA 13.1+).

        Raises
        ------
        NotSupportedError
            With cuda-bindings or a driver older than 13.1.
        """
        return int(id_call("cudaGraphExecGetId", self.handle))

    @property
    def flags(self) -> dict:
        """The instantiate flags, as the keywords of :meth:`Graph.instantiate`
        (``cudaGraphExecGetFlags``), as CUDA reports them.

        The upload flag is never reported. The CUDA 13.0 driver (580.159, on an H100) does
        not report ``use_node_priority`` either: an exec instantiated with it reads
        ``False`` here, by both ``cuGraphInstantiateWithFlags`` and
        ``cudaGraphInstantiateWithParams``.

        Returns
        -------
        dict
            ``{"auto_free_on_launch": bool, "device_launch": bool, "use_node_priority": bool}``
        """
        bits = int(call(rt.cudaGraphExecGetFlags, self.handle))
        return {name: bool(bits & bit) for bit, name in INSTANTIATE_FLAGS.items()}
