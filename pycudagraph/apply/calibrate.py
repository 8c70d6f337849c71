"""Measure what :func:`~pycudagraph.apply.apply.apply` expects each way of updating an exec
to cost on this machine: ``calibrate()`` fills :data:`~pycudagraph.apply.apply.COSTS`.

Kept apart from :mod:`pycudagraph.apply.apply` because it builds graphs (the graph module
imports the exec, which reaches apply).
"""

from __future__ import annotations

import time

from ..compile.program import Program
from .apply import COSTS, ApplyCosts
from ..graph.graph import Graph

__all__ = ["calibrate"]


def calibrate(sizes=(16, 256), repeats: int = 20) -> ApplyCosts:
    """Measure :data:`COSTS` on the current device and store them there.

    Builds graphs of ``sizes`` independent kernel nodes, times one argument change of
    an exec through pycudagraph (``cuGraphExecKernelNodeSetParams``) and the whole-graph
    update (``cuGraphExecUpdate``, with the re-pairing of the exec's records that the next
    per-node call makes) at each size; the update's cost per node and fixed cost come from
    the two sizes. Compiles a one-line kernel (``nvrtcCompileProgram``)
    and instantiates (``cuGraphInstantiateWithFlags``).

    Returns
    -------
    ApplyCosts
        :data:`COSTS`, updated.
    """
    k = Program('extern "C" __global__ void touch(int* p, int v) {}', name="touch.cu").compile()["touch"]
    per_node, update = [], []
    for n in sizes:
        graphs = []
        for g_i in range(2):
            g = Graph()
            for i in range(n):
                g.add_kernel(k, 1, 1, (0, i + g_i))
            graphs.append(g)
        exe = graphs[0].instantiate()
        node = graphs[0].nodes[0]
        t0 = time.perf_counter()
        for r in range(repeats):
            exe.set_params(node, args={"v": r})
        per_node.append((time.perf_counter() - t0) / repeats)
        t0 = time.perf_counter()
        for r in range(repeats):
            exe.update(graphs[r % 2])
            exe.set_params(node, args={"v": r})  # the first per-node call pairs the records again
        update.append((time.perf_counter() - t0) / repeats - per_node[-1])
        exe.close()
    (n1, n2), (u1, u2) = sizes[:2], update[:2]
    slope = max((u2 - u1) / (n2 - n1), 0.0)
    COSTS.per_node_call_us = min(per_node) * 1e6
    COSTS.update_per_node_us = slope * 1e6
    COSTS.update_base_us = max(u1 - slope * n1, 0.0) * 1e6
    return COSTS
