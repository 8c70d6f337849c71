"""Profile 2: does the driver's own work depend on how a graph was built? A 1,000-node chain of
the 3-argument kernel built each way, in a random order per round (the collector paused):

* pycudagraph's ``g.add_kernel`` (nodes name the kernel's ``CUfunction``);
* the bare driver add (``bare.c``, prepacked) naming the same ``CUfunction`` in ``func``;
* the bare driver add naming the library kernel (``CUkernel``) in ``kern``, with and without
  the context in ``ctx``;
* raw cuda.bindings' ``cudaGraphAddKernelNode`` as the suite's raw peer makes its graphs
  (``benchmarks/peers_raw.py``: the ``cudaKernel_t`` in ``func``).

For each: the add per node (each way's own call), then the bare ``cuGraphInstantiateWithFlags``
of the chain and the bare ``cuGraphExecUpdate`` of that exec with a second chain built the same
way whose arguments all differ, each also as the median of its per-round ratio to
pycudagraph's graph. Last, the suite's own pycudagraph and raw instantiate / update rounds
alternated (``r_instantiate``, ``r_update``): the ratio the suite judges, with more rounds.
(Not part of the suite; behind docs/HOT_PATH.md.)

Run from the repository root on a GPU: ``python benchmarks/profile_nodes.py [ROUNDS]``.
"""
from __future__ import annotations

import random
import statistics
import struct
import sys
import time

sys.path.insert(0, ".")
from cuda.bindings import driver as dr  # noqa: E402
from cuda.bindings import runtime as rt  # noqa: E402

from benchmarks import argsets  # noqa: E402
from benchmarks.bare import Params  # noqa: E402
from benchmarks.cudaenv import check  # noqa: E402
from benchmarks.peers_driver import profile_peers  # noqa: E402
from benchmarks.peers_raw import RawPeer  # noqa: E402
from benchmarks.timing import gc_paused  # noqa: E402

N = 1000
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
env, pcg_peer, driver = profile_peers()
bare, pc = driver.bare, time.perf_counter_ns
raw = RawPeer(env, pcg_peer.settings)
raw.setup()
kernel = pcg_peer.kernels[3]
pointers = [b.ptr for b in pcg_peer.bufs]
context = int(check(dr.cuCtxGetCurrent(), "cuCtxGetCurrent"))


def params(a: float, func: int = 0, kern: int = 0, ctx: int = 0) -> Params:
    """A ``CUDA_KERNEL_NODE_PARAMS_v2`` for the 3-argument kernel with values ``a``; ``kern``
    and ``ctx`` written after the fields :class:`~benchmarks.bare.Params` fills."""
    p = Params(func, argsets.CtypesArgs(3, pointers, a))
    struct.pack_into("<QQ", p.buf, 56, kern, ctx)
    return p


NAMING = {"bare add, CUfunction in func": dict(func=driver.func[3]),
          "bare add, CUkernel in kern": dict(kern=int(kernel.handle)),
          "bare add, CUkernel in kern + ctx": dict(kern=int(kernel.handle), ctx=context)}
PARAMS = {(way, a): params(a, **fields) for way, fields in NAMING.items() for a in (1.0, 2.0)}


def bare_chain(way: str, a: float):
    """``(handle, ns per node, destroy)`` of a chain added by the bare call."""
    address, g, prev = PARAMS[way, a].address, bare.graph_create(), 0
    t0 = pc()
    for _ in range(N):
        prev = bare.add_kernel(g, prev, address)
    return g, (pc() - t0) / N, lambda: bare.graph_destroy(g)


def pcg_chain(a: float):
    t0 = pc()
    g, _ = pcg_peer.chain_of(3, N, a)
    return g.table.h, (pc() - t0) / N, g.close


def raw_chain(a: float):
    g = check(rt.cudaGraphCreate(0), "cudaGraphCreate")
    t0 = pc()
    raw._build(g, 3, N, a)
    return int(g), (pc() - t0) / N, lambda: rt.cudaGraphDestroy(g)


MAKERS = {"pycudagraph g.add_kernel": pcg_chain,
          **{way: (lambda a, way=way: bare_chain(way, a)) for way in NAMING},
          f"raw cudaGraphAddKernelNode ({raw.func_kind})": raw_chain}
STEPS = ("add", "instantiate", "update")


def one(make) -> tuple:
    """us per node: the add of the first chain, its instantiate, the update with the second."""
    g1, add_ns, close1 = make(1.0)
    g2, _, close2 = make(2.0)
    try:
        t0 = pc()
        e = bare.instantiate(g1)
        t1 = pc()
        bare.exec_update(e, g2)
        t2 = pc()
        bare.exec_destroy(e)
    finally:
        close1()
        close2()
    return add_ns / 1000, (t1 - t0) / N / 1000, (t2 - t1) / N / 1000


def show(title: str, res: dict, base: str) -> None:
    print(f"\n{title}, us per node, median [min-max] of {ROUNDS}; median per-round ratio to "
          f"{base}")
    for way, v in res.items():
        ratio = statistics.median(x / b for x, b in zip(v, res[base]))
        print(f"  {way:44s} {statistics.median(v):8.3f} [{min(v):.3f}-{max(v):.3f}]  "
              f"x{ratio:.3f}")


first = next(iter(MAKERS))
res = {step: {way: [] for way in MAKERS} for step in STEPS}
with gc_paused():
    for _ in range(ROUNDS):
        for way in random.sample(list(MAKERS), len(MAKERS)):
            for step, us in zip(STEPS, one(MAKERS[way])):
                res[step][way].append(us)
for step in STEPS:
    what = ("the add (each way's own call)" if step == "add" else
            f"bare {'cuGraphInstantiateWithFlags' if step == 'instantiate' else 'cuGraphExecUpdate'}")
    show(what, res[step], first)

SUITE = {"pycudagraph g.instantiate()": pcg_peer.r_instantiate().fn,
         "raw cudaGraphInstantiate": raw.r_instantiate().fn,
         "pycudagraph exe.update(g2)": pcg_peer.r_update().fn,
         "raw cudaGraphExecUpdate": raw.r_update().fn}
runs = {way: [] for way in SUITE}
with gc_paused():
    for _ in range(ROUNDS):
        for way in random.sample(list(SUITE), len(SUITE)):
            runs[way].append(SUITE[way]())
ways = list(SUITE)
show("the suite's instantiate rounds", {w: runs[w] for w in ways[:2]}, ways[1])
show("the suite's whole-graph update rounds", {w: runs[w] for w in ways[2:]}, ways[3])
raw.close()
