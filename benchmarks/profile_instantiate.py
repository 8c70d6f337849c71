"""Profile 4: instantiate and whole-graph update of a 1,000-node chain of the 3-argument
kernel by each way of making the call, in a random order per round (the collector paused),
on graphs built just before and on graphs built before the round: the bare driver call
(``bare.c``), raw cuda.bindings' ``cudaGraphInstantiate`` (what the suite's raw peer calls),
the call pycudagraph makes (``fast.graph_instantiate`` / ``fast.exec_update``: compiled, or
ctypes with PYCUDAGRAPH_NO_NATIVE=1), the bare call right after the Python work
``g.instantiate()`` does before its call (a ``GraphExec`` set up for the graph: is the
driver call slower after it?), the bare call plus the exec object, the exec's own
instantiate without the outer frames, the exec's class method, and the public call.
Each figure is also given as the median over rounds of its ratio to the bare call of the
same round. Last, the same Python work (making a ``GraphExec`` for a handle) right after the
driver instantiated a 1,000-node graph and again at once: what the CPU caches cost Python
code that runs after a large driver call, the reason ``GraphExec.instantiate`` sets the
exec up before its call. And ``g.instantiate()`` / ``exe.update(g2)`` split into the time
before their driver call, the call, and the time after it. (Not part of the suite; behind
docs/HOT_PATH.md.)

Run from the repository root on a GPU: ``python benchmarks/profile_instantiate.py [ROUNDS]``.
"""
from __future__ import annotations

import random
import statistics
import sys
import time

sys.path.insert(0, ".")
from cuda.bindings import runtime as rt  # noqa: E402

import pycudagraph as pcg  # noqa: E402
from benchmarks.peers_driver import profile_peers  # noqa: E402
from benchmarks.timing import gc_paused, split_around  # noqa: E402
try:  # a real instantiate: no released exec is reused
    from pycudagraph.graph.exec_reuse import paused as reuse_paused  # noqa: E402
except ImportError:  # a version without exec reuse
    from contextlib import nullcontext as reuse_paused  # noqa: E402
from pycudagraph._cuda import fast  # noqa: E402

N = 1000
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 25
env, pcg_peer, driver = profile_peers()
bare, pc = driver.bare, time.perf_counter_ns


def timed(make, close):
    """make() timed; close(its result) after, untimed; ns."""
    t0 = pc()
    out = make()
    ns = pc() - t0
    close(out)
    return ns


def after_setup(g):
    """The bare call timed right after a GraphExec is set up for ``g`` (the work
    g.instantiate() does before its call; made for a handle it never uses, untimed)."""
    made = pcg.GraphExec(rt.cudaGraphExec_t(1), g, owned=False)
    ns = timed(lambda: bare.instantiate(g.table.h), bare.exec_destroy)
    made.close()
    return ns


def direct(g):
    """What g.instantiate() runs less its three outer frames (Graph.instantiate,
    GraphExec.instantiate, __init__)."""
    exe = pcg.GraphExec.__new__(pcg.GraphExec)
    exe._instantiate(g, None, 0)
    return exe


def raw_call(g):
    out = []
    ns = timed(lambda: out.extend(rt.cudaGraphInstantiate(g.handle, 0)), lambda _: None)
    err, e = out
    if err:
        raise RuntimeError(f"cudaGraphInstantiate failed: {err}")
    rt.cudaGraphExecDestroy(e)
    return ns


INSTANTIATE = {
    "bare C": lambda g: timed(lambda: bare.instantiate(g.table.h), bare.exec_destroy),
    "cuda.bindings cudaGraphInstantiate": raw_call,
    "bare C after a GraphExec set-up": after_setup,
    "fast.graph_instantiate": lambda g: timed(lambda: fast.graph_instantiate(g.table.h, 0, g),
                                              bare.exec_destroy),
    "bare + GraphExec()": lambda g: timed(
        lambda: pcg.GraphExec(rt.cudaGraphExec_t(bare.instantiate(g.table.h)), g),
        lambda exe: exe.close()),
    "GraphExec._instantiate, one frame": lambda g: timed(lambda: direct(g), lambda e: e.close()),
    "GraphExec.instantiate(g)": lambda g: timed(lambda: pcg.GraphExec.instantiate(g),
                                                lambda exe: exe.close()),
    "g.instantiate()": lambda g: timed(g.instantiate, lambda exe: exe.close()),
}


def update_bare(exe, g2):
    return timed(lambda: bare.exec_update(int(exe.handle), g2.table.h), lambda _: None)


def update_fast(exe, g2):
    return timed(lambda: fast.exec_update(int(exe.handle), g2.table.h, exe, g2), lambda _: None)


def update_raw(exe, g2):
    out = []
    ns = timed(lambda: out.extend(rt.cudaGraphExecUpdate(exe.handle, g2.handle)), lambda _: None)
    if out[0] or int(out[1].result):
        raise RuntimeError(f"cudaGraphExecUpdate failed: {out[0]} / {out[1].result}")
    return ns


PARTS = ("before the call", "the call", "after the call")
UPDATE = {"bare C": update_bare, "cuda.bindings cudaGraphExecUpdate": update_raw,
          "fast.exec_update": update_fast,
          "exe.update(g2)": lambda exe, g2: timed(lambda: exe.update(g2), lambda _: None)}


def report(title, res):
    print(f"\n{title}, us per node, median [min-max] of {ROUNDS}, random order; "
          "median of the per-round ratio to the bare call")
    base = res["bare C"]
    for way, v in res.items():
        ratio = statistics.median(x / b for x, b in zip(v, base))
        print(f"  {way:38s} {statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]  "
              f"x{ratio:.3f}")


with gc_paused(), reuse_paused():  # every instantiate a real one
    for built in ("just before", "before the round"):
        res = {way: [] for way in INSTANTIATE}
        for _ in range(ROUNDS):
            order = random.sample(list(INSTANTIATE), len(INSTANTIATE))
            early = ({way: pcg_peer.chain_of(3, N)[0] for way in order}
                     if built != "just before" else {})
            for way in order:
                g = early[way] if early else pcg_peer.chain_of(3, N)[0]
                res[way].append(INSTANTIATE[way](g) / N / 1000)
                g.close()
        report(f"instantiate, graphs built {built}", res)
    res = {way: [] for way in UPDATE}
    for _ in range(ROUNDS):
        for way in random.sample(list(UPDATE), len(UPDATE)):
            g1, g2 = pcg_peer.chain_of(3, N, 1.0)[0], pcg_peer.chain_of(3, N, 2.0)[0]
            exe = g1.instantiate()
            res[way].append(UPDATE[way](exe, g2) / N / 1000)
            exe.close()
            g1.close()
            g2.close()
    report("whole-graph update", res)

    res = {"right after the driver call": [], "again at once": []}
    for _ in range(ROUNDS):
        g = pcg_peer.chain_of(3, N)[0]
        h = bare.instantiate(g.table.h)
        for way in res:  # the same work twice: first with cold caches, then warm
            t0 = pc()
            exe = pcg.GraphExec(rt.cudaGraphExec_t(h), g, owned=False)
            res[way].append((pc() - t0) / 1000)
            exe.close()
        bare.exec_destroy(h)
        g.close()
    print(f"\nGraphExec() for a handle, us, median [min-max] of {ROUNDS}")
    for way, v in res.items():
        print(f"  {way:34s} {statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]")

    inst, upd = {p: [] for p in PARTS}, {p: [] for p in PARTS}
    for _ in range(ROUNDS):
        g = pcg_peer.chain_of(3, N)[0]
        exe = split_around(inst, fast, "graph_instantiate", g.instantiate)
        g2 = pcg_peer.chain_of(3, N, 2.0)[0]
        split_around(upd, fast, "exec_update", lambda: exe.update(g2))
        exe.close()
        g.close()
        g2.close()
    for title, res in (("g.instantiate()", inst), ("exe.update(g2)", upd)):
        print(f"\n{title} split around its driver call, us, median [min-max] of {ROUNDS}")
        for part, v in res.items():
            print(f"  {part:34s} {statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]")
