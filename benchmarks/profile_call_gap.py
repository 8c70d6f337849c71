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

Instantiate and whole-graph update by each way of making the call:
``profile_instantiate.py``.

Run from the repository root on a GPU: ``python benchmarks/profile_call_gap.py``.
"""
from __future__ import annotations

import statistics
import sys
import time

sys.path.insert(0, ".")
from benchmarks import argsets  # noqa: E402
from benchmarks.peers_driver import profile_peers  # noqa: E402
from benchmarks.timing import gc_paused  # noqa: E402

ROUNDS, CALLS, LAUNCHES, SPIN_MS = 9, 1000, 200, 20.0
env, pcg_peer, drv = profile_peers()
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
        "C loop": lambda: held(
            lambda: bare.repeat(0, LAUNCHES, int(exe1.handle), s_int, 0) / LAUNCHES / 1000),
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
