"""Profile 6: the gap between a C++ program's driver call and the same call made from Python,
and pycudagraph's share of what is left (not part of the suite; behind docs/HOT_PATH.md).

For the graph launch, the eager launch of a 3-argument kernel and the one-argument exec
update, on the suite's own objects (``PcgPeer``, ``DriverPeer``), interleaved in rounds with
the collector paused, per call in microseconds:

- ``C loop``: the driver call made n times by one C function of ``bare.c`` (``repeat``): what
  a C++ program pays, in this process;
- ``Python -> C, GIL released``: the suite's driver column (one ``bare.c`` call per Python
  call, the GIL released around it, as pycudagraph's compiled calls do);
- ``Python -> C, GIL held`` (the update only): the same without releasing the GIL;
- ``pycudagraph``: the public call.

Then, per node of a 1,000-node chain: ``g.instantiate()`` against the bare call and against
the bare call followed by the exec object's constructor.

Run from the repository root on a GPU: ``python benchmarks/profile_call_gap.py``.
"""
from __future__ import annotations

import statistics
import sys
import time

sys.path.insert(0, ".")
from benchmarks import argsets  # noqa: E402
from benchmarks.common import Settings  # noqa: E402
from benchmarks.cudaenv import RawEnv  # noqa: E402
from benchmarks.peers_driver import DriverPeer  # noqa: E402
from benchmarks.peers_pcg import PcgPeer  # noqa: E402
from benchmarks.timing import gc_paused  # noqa: E402

ROUNDS, CALLS, LAUNCHES, SPIN_MS = 9, 1000, 200, 20.0
env = RawEnv()
settings = Settings.make(quick=False)
pcg_peer = PcgPeer(env, settings)
pcg_peer.setup()
drv = DriverPeer(env, settings, pcg_peer)
drv.setup()
bare, s_int, pc = drv.bare, pcg_peer.s_int, time.perf_counter_ns
exe1 = pcg_peer.chain(1)
exe3, node3 = pcg_peer.exec_of(3)
e3, n3, p3 = int(exe3.handle), int(node3), drv.params[3].address
f3, a3 = drv.func[3], drv.params[3].args.address
k3, args3 = pcg_peer.kernels[3], pcg_peer.args(3)
vals = [float(i % 997) for i in range(CALLS)]


def per_call(loop, n):
    t0 = pc()
    loop()
    return (pc() - t0) / n / 1000


def held(fn):  # with the GPU held by a spin kernel: launches never wait for it
    env.queue_spin(s_int, SPIN_MS)
    us = fn()
    env.sync(s_int)
    return us


def py_launch():
    f, e = bare.graph_launch, int(exe1.handle)
    for _ in range(LAUNCHES):
        f(e, s_int)


def pcg_launch():
    f, s = exe1.launch, pcg_peer.stream
    for _ in range(LAUNCHES):
        f(s)


def py_eager():
    f = bare.launch_kernel
    for _ in range(LAUNCHES):
        f(f3, s_int, a3)


def pcg_eager():
    f, s = k3.launch, pcg_peer.stream
    for _ in range(LAUNCHES):
        f(1, 1, args3, s)


def py_set(fn):
    def loop():
        for _ in range(CALLS):
            fn(e3, n3, p3)
    return loop


def pcg_set():
    f, i = exe3.set_arg, argsets.UPDATE_INDEX
    for v in vals:
        f(node3, i, v)


CASES = {
    "graph launch (K=1)": {
        "C loop": lambda: held(lambda: bare.repeat(0, LAUNCHES, int(exe1.handle), s_int, 0) / LAUNCHES / 1000),
        "Python -> C, GIL released": lambda: held(lambda: per_call(py_launch, LAUNCHES)),
        "pycudagraph": lambda: held(lambda: per_call(pcg_launch, LAUNCHES))},
    "eager launch, 3 args": {
        "C loop": lambda: held(lambda: bare.repeat(1, LAUNCHES, f3, s_int, a3) / LAUNCHES / 1000),
        "Python -> C, GIL released": lambda: held(lambda: per_call(py_eager, LAUNCHES)),
        "pycudagraph": lambda: held(lambda: per_call(pcg_eager, LAUNCHES))},
    "exec 1-arg update, 3-arg kernel": {
        "C loop": lambda: bare.repeat(3, CALLS, e3, n3, p3) / CALLS / 1000,
        "Python -> C, GIL released": lambda: per_call(py_set(bare.exec_set), CALLS),
        "Python -> C, GIL held": lambda: per_call(py_set(bare.exec_set_gil), CALLS),
        "pycudagraph": lambda: per_call(pcg_set, CALLS)},
}


class Split:
    """Times the calls made inside a public call: wraps ``fast.graph_instantiate`` /
    ``fast.exec_update`` (the driver call) and the exec's constructor / ``_adopt`` (its
    bookkeeping) while active."""

    def __init__(self):
        from pycudagraph import GraphExec
        from pycudagraph._cuda import fast
        self.parts = {}
        self.saved = [(fast, "graph_instantiate"), (fast, "exec_update"),
                      (GraphExec, "__init__"), (GraphExec, "_adopt")]
        self.originals = [getattr(o, n) for o, n in self.saved]

    def _wrap(self, name, fn):
        def timed(*a, **kw):
            t0 = pc()
            try:
                return fn(*a, **kw)
            finally:
                self.parts[name] = self.parts.get(name, 0) + pc() - t0
        return timed

    def __enter__(self):
        self.parts = {}
        for (o, n), f in zip(self.saved, self.originals):
            setattr(o, n, self._wrap(n, f))
        return self

    def __exit__(self, *exc):
        for (o, n), f in zip(self.saved, self.originals):
            setattr(o, n, f)


def instantiate_case():
    from pycudagraph import GraphExec
    from cuda.bindings import runtime as rt
    n = settings.nodes
    out = {k: [] for k in ("bare", "bare + GraphExec(...)", "g.instantiate()",
                           "  of which fast.graph_instantiate", "  of which GraphExec.__init__",
                           "g.instantiate() (split timers on)", "bare (after pcg)")}
    split = Split()
    for r in range(ROUNDS):
        g, _ = pcg_peer.chain_of(3, n)
        t0 = pc()
        e = bare.instantiate(g.table.h)
        out["bare"].append((pc() - t0) / n / 1000)
        bare.exec_destroy(e)
        g.close()
        g, _ = pcg_peer.chain_of(3, n)
        t0 = pc()
        exe = GraphExec(rt.cudaGraphExec_t(bare.instantiate(g.table.h)), g)
        out["bare + GraphExec(...)"].append((pc() - t0) / n / 1000)
        exe.close()
        g.close()
        g, _ = pcg_peer.chain_of(3, n)
        t0 = pc()
        exe = g.instantiate()
        out["g.instantiate()"].append((pc() - t0) / n / 1000)
        exe.close()
        g.close()
        g, _ = pcg_peer.chain_of(3, n)
        with split:
            t0 = pc()
            exe = g.instantiate()
            out["g.instantiate() (split timers on)"].append((pc() - t0) / n / 1000)
        out["  of which fast.graph_instantiate"].append(split.parts["graph_instantiate"] / n / 1000)
        out["  of which GraphExec.__init__"].append(split.parts["__init__"] / n / 1000)
        exe.close()
        g.close()
        g, _ = pcg_peer.chain_of(3, n)
        t0 = pc()
        e = bare.instantiate(g.table.h)
        out["bare (after pcg)"].append((pc() - t0) / n / 1000)
        bare.exec_destroy(e)
        g.close()
    return out


def update_case():
    n = settings.nodes
    out = {k: [] for k in ("bare exec_update", "exe.update(g2)", "  of which fast.exec_update",
                           "  of which _adopt", "exe.update(g2) (split timers on)")}
    split = Split()
    for r in range(ROUNDS):
        for way in ("bare", "pcg", "split"):
            g1, _ = pcg_peer.chain_of(3, n, 1.0)
            g2, _ = pcg_peer.chain_of(3, n, 2.0)
            exe = g1.instantiate()
            if way == "bare":
                h2 = g2.table.h
                t0 = pc()
                bare.exec_update(int(exe.handle), h2)
                out["bare exec_update"].append((pc() - t0) / n / 1000)
            elif way == "pcg":
                t0 = pc()
                exe.update(g2)
                out["exe.update(g2)"].append((pc() - t0) / n / 1000)
            else:
                with split:
                    t0 = pc()
                    exe.update(g2)
                    out["exe.update(g2) (split timers on)"].append((pc() - t0) / n / 1000)
                out["  of which fast.exec_update"].append(split.parts["exec_update"] / n / 1000)
                out["  of which _adopt"].append(split.parts["_adopt"] / n / 1000)
            exe.close()
            g1.close()
            g2.close()
    return out


print(f"per call, us: median [min-max] of {ROUNDS} interleaved rounds (collector paused)")
with gc_paused():
    for figure, ways in CASES.items():
        got = {w: [] for w in ways}
        for _ in range(ROUNDS):
            for w, f in ways.items():
                got[w].append(f())
        print(f"\n{figure}")
        for w, v in got.items():
            print(f"  {w:28s} {statistics.median(v):7.3f}  [{min(v):.3f}-{max(v):.3f}]")
    for title, case in (("instantiate", instantiate_case), ("whole-graph update", update_case)):
        print(f"\n{title}, per node of a 1000-node chain of the 3-argument kernel")
        for w, v in case().items():
            print(f"  {w:36s} {statistics.median(v):7.3f}  [{min(v):.3f}-{max(v):.3f}]")
