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

CUDA also allows only one executable graph at a time of a graph with conditional nodes,
and the exec being profiled is that one. So before such a graph is stamped, a plain second
instantiation is tried and destroyed at once: where CUDA refuses it, no stamped graph
could run either, nothing is measured and the profile's notes say why (CUPTI can still
time the exec itself). Where CUDA takes it but refuses the stamped graph, the stamps go
again outside conditional bodies only: each conditional node is timed as a whole and the
nodes in its bodies are not seen. :class:`Instrumented` builds the stamped graph.

A stamp pair with nothing between measures what a hop from one stamp to the next costs;
that is subtracted from every interval (once per run).
"""

from __future__ import annotations

import statistics

import numpy as np

from .._cuda import context
from ..compile.program import Program
from ..errors import CudaError
from ..runtime.memory import DeviceBuffer
from .records import ONE_EXEC, Samples
from ..inspect.tree import inside_conditionals, node_label, walk

__all__ = ["Samples", "Instrumented", "measure", "unmeasured", "STAMP_SOURCE", "stamp_kernels"]

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
    """Whether clone node ``b`` copies node ``a``: the same shape and label (a kernel's
    name, another node's description)."""
    return a.shape() == b.shape() and node_label(a) == node_label(b)


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


class Instrumented:
    """A graph with stamps around its nodes: a clone where CUDA clones the graph, else the
    graph itself (``cudaGraphClone``, ``cudaGraphAddKernelNode``,
    ``cudaGraphAddDependencies``). ``bodies=False`` leaves the nodes inside conditional
    bodies unstamped. :meth:`close` takes the stamps off again (``cudaGraphDestroyNode``)
    or destroys the clone (``cudaGraphDestroy``).

    Attributes
    ----------
    graph : Graph
        The stamped graph (the clone, or the graph itself).
    cloned : bool
        Whether ``graph`` is a clone.
    stamped : list of (node, its copy)
        The nodes with stamps, in slot order; the copy is the node itself where not cloned.
    skipped : list of Node
        The nodes left without stamps because they sit in conditional bodies.
    slots : DeviceBuffer
        Three 64-bit words per stamped node (and one triple for the calibration pair).
    """

    def __init__(self, graph, places, kernels=None, bodies: bool = True):
        kernels = kernels or stamp_kernels()
        cloned = _clone_pairs(graph, places)
        self.cloned = cloned is not None
        self.graph, pairs = cloned if cloned is not None else \
            (graph, [(p.node, p.node) for p in places])
        skip = set() if bodies else inside_conditionals(places)
        self.stamped = [(o, n) for o, n in pairs if not n.idle and o not in skip]
        self.skipped = [o for o, _ in pairs if o in skip]
        self.slots = DeviceBuffer(24 * (len(self.stamped) + 1))
        self._added: list = []
        try:
            for i, (_, node) in enumerate(self.stamped):
                _stamp(node, kernels, self.slots, i, self._added)
            calib = len(self.stamped)
            b = self.graph.add_kernel(kernels[0], 1, 1, (self.slots, calib))
            self._added.append(b)
            self._added.append(self.graph.add_kernel(kernels[1], 1, 1, (self.slots, calib),
                                                     deps=(b,)))
        except BaseException:
            self.close()
            raise

    @property
    def where(self) -> str:
        """Where the stamps are, in words. No CUDA call."""
        return "a clone of the graph" if self.cloned else \
            "the graph itself (CUDA does not clone it), stamps removed afterwards"

    def close(self) -> None:
        """Take the stamps off the graph (``cudaGraphDestroyNode``, last first, each tried)
        or destroy the clone (``cudaGraphDestroy``); idempotent."""
        added, self._added = self._added, []
        if self.cloned:
            self.graph.close()
        else:
            _remove(added)

    def __enter__(self) -> "Instrumented":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _second_exec_refused(graph) -> str | None:
    """None where CUDA instantiates ``graph`` while the profiled exec exists (the new exec
    destroyed at once: ``cudaGraphInstantiateWithFlags``, ``cudaGraphExecDestroy``), else
    the refusal, in words."""
    try:
        graph.instantiate().close()
    except CudaError as exc:
        return f"{exc.api}: {exc.name}"
    return None


def unmeasured(why: str) -> Samples:
    """Stamps' samples that measured nothing, and why."""
    return Samples("stamps", "empty nodes", launches=[{}], unattributed=[0.0], complete=False,
                   notes=[f"the stamps measured nothing: {why}"])


def measure(graph, places, stream, repeats: int) -> Samples:
    """Run the instrumented copy of ``graph`` once to warm up, then ``repeats`` times on
    ``stream``, reading the stamps after each launch (``cudaGraphInstantiateWithFlags``,
    ``cudaGraphLaunch``, ``cudaStreamSynchronize``, ``cudaMemcpy``); see the module
    docstring for what happens where CUDA refuses the stamped graph."""
    kernels = stamp_kernels()
    if any(p.node.repeats_bodies for p in places):  # conditional nodes
        why = _second_exec_refused(graph)
        if why is not None:
            return unmeasured(f"CUDA refused a second executable graph of this graph ({why}; "
                              f"{ONE_EXEC}); method='cupti' can time the exec itself")
    refusals: list = []
    for bodies in (True, False):
        if not bodies and not inside_conditionals(places):
            break
        with Instrumented(graph, places, kernels, bodies) as inst:
            try:
                exe = inst.graph.instantiate()
            except CudaError as exc:
                refusals.append(exc)
                continue
            try:
                raw = _run(exe, inst.slots, stream, repeats, len(inst.stamped))
            finally:
                exe.close()
            return _samples(raw, inst, refusals)
    return unmeasured(f"CUDA refused the stamped graph ({refusals[0].api}: {refusals[0].name})")


def _samples(raw: list, inst: Instrumented, refusals: list) -> Samples:
    """The stamps' slots as samples, the hop taken off each run."""
    calib = len(inst.stamped)
    hop = statistics.median(r[calib, 0] / r[calib, 1] if r[calib, 1] else 0.0 for r in raw)
    out = Samples("stamps", "empty nodes")
    out.seen = {orig for orig, _ in inst.stamped}
    for r in raw:
        out.launches.append({orig: (max(0.0, r[i, 0] - hop * r[i, 1]), int(r[i, 1]))
                             for i, (orig, _) in enumerate(inst.stamped)})
        out.unattributed.append(0.0)
    out.notes.append(f"stamps in {inst.where}; {hop:.2f} us per stamp hop subtracted")
    if inst.skipped:
        out.complete = False
        out.notes.append(f"no stamps inside conditional bodies: CUDA refused the graph with "
                         f"them ({refusals[0].api}: {refusals[0].name}); the "
                         f"{len(inst.skipped)} node(s) there show as '-', their conditional "
                         "node's time covers them")
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
