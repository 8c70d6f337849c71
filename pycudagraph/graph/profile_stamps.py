"""The profiler's fallback that needs nothing: an instrumented copy of the graph.

Every node that does something (all but empty nodes) gets two one-thread kernels: a
*begin* stamp that depends on what the node depends on and that the node then waits for,
and an *end* stamp that waits for the node. Each reads the GPU's nanosecond clock
(``%globaltimer``); the end stamp adds the interval to its slot and counts a run, so a
``while`` body's nodes add up their iterations. No edge of the graph is removed, so its
dependencies and their ports are kept (a programmatic edge still joins its two nodes,
but the begin stamp between them waits for the first node to finish).

The copy is ``Graph.clone()`` where CUDA clones the graph; CUDA refuses to clone graphs
with conditional nodes, and those are instrumented in place and every stamp removed
again (``cudaGraphDestroyNode``) before this returns, whatever happens.

A stamp pair with nothing between measures what a hop from one stamp to the next costs;
that is subtracted from every interval (once per run).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from .._cuda import context
from ..compile.program import Program
from ..errors import CudaError
from ..runtime.memory import DeviceBuffer
from .tree import node_label, walk

__all__ = ["Samples", "measure", "STAMP_SOURCE", "stamp_kernels"]

#: The two stamp kernels, compiled with NVRTC for the current GPU.
STAMP_SOURCE = r"""
// slots[3*i]: when the node's begin stamp ran; slots[3*i+1]: nanoseconds summed over
// its runs; slots[3*i+2]: its runs. One thread each: they cost a launch, no more.
extern "C" __global__ void pcg_stamp_begin(unsigned long long* slots, int i) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    slots[3 * i] = t;
}

extern "C" __global__ void pcg_stamp_end(unsigned long long* slots, int i) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    slots[3 * i + 1] += t - slots[3 * i];
    slots[3 * i + 2] += 1;
}
"""

_KERNELS: dict = {}  # device ordinal -> (begin, end)


@dataclass
class Samples:
    """What a profiling method measured: one ``{node: (microseconds, runs)}`` per launch."""

    method: str
    blind: str  # what the method cannot see, for the profile's notes
    launches: list = field(default_factory=list)
    seen: set = field(default_factory=set)
    unattributed: list = field(default_factory=list)  # microseconds per launch
    notes: list = field(default_factory=list)


def stamp_kernels():
    """(begin, end) stamp kernels of the current device, compiled once per process
    (``nvrtcCompileProgram`` or the compile cache, ``cuLibraryLoadData``)."""
    dev = context.ensure_device()
    kernels = _KERNELS.get(dev)
    if kernels is None:
        mod = Program(STAMP_SOURCE, name="pycudagraph_stamps.cu").compile()
        kernels = _KERNELS[dev] = (mod["pcg_stamp_begin"], mod["pcg_stamp_end"])
    return kernels


def _same(a, b) -> bool:
    """Whether clone node ``b`` copies node ``a``: same type and, for kernels, same name."""
    if str(a.type) != str(b.type):
        return False
    return str(a.type) != "kernel" or node_label(a) == node_label(b)


def _clone_pairs(graph, places):
    """``(clone, [(node, its copy)])``, or None where CUDA does not clone the graph or
    the copy's tree does not line up with the original's."""
    try:
        clone = graph.clone()
    except CudaError:  # conditional nodes: cudaGraphClone refuses
        return None
    copies = walk(clone)
    ok = len(copies) == len(places) and all(
        c.path == p.path and _same(p.node, c.node) for p, c in zip(places, copies))
    ok = ok and all(clone.find(p.node) == c.node
                    for p, c in zip(places, copies) if p.depth == 0)
    if not ok:
        clone.close()
        return None
    return clone, [(p.node, c.node) for p, c in zip(places, copies)]


def _stamp(node, kernels, slots, i: int, added: list) -> None:
    """Put begin and end stamps of slot ``i`` around ``node`` in its own graph
    (``cudaGraphAddKernelNode``, ``cudaGraphAddDependencies``)."""
    begin, end = kernels
    g = node.graph
    b = g.add_kernel(begin, 1, 1, (slots, i), deps=node.dependencies)
    added.append(b)
    g.add_dependency(b, node)
    added.append(g.add_kernel(end, 1, 1, (slots, i), deps=(node,)))


def _remove(added: list) -> None:
    """Remove the stamps from the graph they were added to (``cudaGraphDestroyNode``),
    last first; each is tried even if one fails, and the first failure is raised."""
    first = None
    for node in reversed(added):
        try:
            node.graph.remove_node(node)
        except Exception as exc:  # noqa: BLE001 - keep removing the others
            first = first or exc
    if first is not None:
        raise first


def measure(graph, places, stream, repeats: int) -> Samples:
    """Run the instrumented copy of ``graph`` once to warm up, then ``repeats`` times on
    ``stream``, reading the stamps after each launch (``cudaGraphLaunch``,
    ``cudaStreamSynchronize``, ``cudaMemcpy``)."""
    kernels = stamp_kernels()
    cloned = _clone_pairs(graph, places)
    if cloned is None:
        work, pairs = graph, [(p.node, p.node) for p in places]
    else:
        work, pairs = cloned
    stamped = [(orig, node) for orig, node in pairs if str(node.type) != "empty"]
    calib = len(stamped)
    slots = DeviceBuffer(24 * (calib + 1))
    added: list = []
    exe = None
    try:
        for i, (_, node) in enumerate(stamped):
            _stamp(node, kernels, slots, i, added)
        b = work.add_kernel(kernels[0], 1, 1, (slots, calib))
        added.append(b)
        added.append(work.add_kernel(kernels[1], 1, 1, (slots, calib), deps=(b,)))
        exe = work.instantiate()
        raw = _run(exe, slots, stream, repeats, calib)
    finally:
        if exe is not None:
            exe.close()
        if cloned is None:
            _remove(added)
        else:
            work.close()
    hop = statistics.median(r[calib, 0] / r[calib, 1] if r[calib, 1] else 0.0 for r in raw)
    out = Samples("stamps", "empty nodes")
    out.seen = {orig for orig, _ in stamped}
    for r in raw:
        out.launches.append({orig: (max(0.0, r[i, 0] - hop * r[i, 1]), int(r[i, 1]))
                             for i, (orig, _) in enumerate(stamped)})
        out.unattributed.append(0.0)
    where = "a clone of the graph" if cloned is not None else \
        "the graph itself (CUDA does not clone it), stamps removed afterwards"
    out.notes.append(f"stamps in {where}; {hop:.2f} us per stamp hop subtracted")
    return out


def _run(exe, slots, stream, repeats: int, calib: int) -> list:
    """Per launch, an array of (microseconds, runs) per slot."""
    zero = np.zeros(3 * (calib + 1), dtype=np.uint64)
    host = np.empty_like(zero)
    exe.launch(stream)
    exe.synchronize()
    out = []
    for _ in range(repeats):
        slots.copy_from(zero)
        exe.launch(stream)
        exe.synchronize()
        slots.copy_to(host)
        table = host.reshape(-1, 3)
        out.append(np.stack([table[:, 1] / 1000.0, table[:, 2].astype(np.float64)], axis=1))
    return out
