"""Profile 7: instantiate and whole-graph update of a 1,000-node chain by each way of making
the call, in a random order per round (15 rounds, collector paused), on fresh graphs and on
graphs built before the round: the bare driver call (``bare.c``), the ctypes call
pycudagraph makes (``fast.graph_instantiate`` / ``fast.exec_update``), the bare call plus the
exec object, and the public call (not part of the suite; behind docs/HOT_PATH.md).

Run from the repository root on a GPU: ``python benchmarks/profile_instantiate_order.py``.
"""
import random, statistics, sys, time
sys.path.insert(0, ".")
from benchmarks.common import Settings
from benchmarks.cudaenv import RawEnv
from benchmarks.peers_driver import DriverPeer
from benchmarks.peers_pcg import PcgPeer
from benchmarks.timing import gc_paused
from cuda.bindings import runtime as rt
import pycudagraph as pcg
from pycudagraph._cuda import fast

env = RawEnv(); settings = Settings.make(quick=False)
p = PcgPeer(env, settings); p.setup()
d = DriverPeer(env, settings, p); d.setup()
bare, pc, N = d.bare, time.perf_counter_ns, 1000

def v_bare(g):
    t0 = pc(); e = bare.instantiate(g.table.h); t = pc() - t0
    bare.exec_destroy(e); return t
def v_fast(g):
    t0 = pc(); e = fast.graph_instantiate(g, 0); t = pc() - t0
    bare.exec_destroy(e); return t
def v_ctor(g):
    t0 = pc(); exe = pcg.GraphExec(rt.cudaGraphExec_t(bare.instantiate(g.table.h)), g); t = pc() - t0
    exe.close(); return t
def v_pcg(g):
    t0 = pc(); exe = g.instantiate(); t = pc() - t0
    exe.close(); return t
def v_pcg_keep(g):  # exec destroyed only after the next graph is built
    t0 = pc(); exe = g.instantiate(); t = pc() - t0
    kept.append(exe); return t
kept = []
V = {"bare C": v_bare, "fast.graph_instantiate (ctypes)": v_fast, "bare + GraphExec()": v_ctor,
     "g.instantiate()": v_pcg, "g.instantiate(), exec kept": v_pcg_keep}
res = {k: [] for k in V}
for mode in ("fresh", "prebuilt"):
    res = {k: [] for k in V}
    with gc_paused():
        for r in range(15):
            order = list(V); random.shuffle(order)
            if mode == "prebuilt":
                graphs = {k: p.chain_of(3, N)[0] for k in order}
            for k in order:
                g = graphs[k] if mode == "prebuilt" else p.chain_of(3, N)[0]
                res[k].append(V[k](g) / N / 1000)
                for e in kept: e.close()
                kept.clear()
                g.close()
    print(f"\ninstantiate, us per node, median [min-max] of 15, random order, graphs {mode}")
    for k, v in res.items():
        print(f"  {k:34s} {statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]")

def u_bare(g1, g2, exe):
    t0 = pc(); bare.exec_update(int(exe.handle), g2.table.h); return pc() - t0
def u_fast(g1, g2, exe):
    from pycudagraph._cuda import structs
    info = structs.ExecUpdateResultInfo()
    t0 = pc(); fast.exec_update(exe, g2, info); return pc() - t0
def u_pcg(g1, g2, exe):
    t0 = pc(); exe.update(g2); return pc() - t0
U = {"bare C": u_bare, "fast.exec_update (ctypes)": u_fast, "exe.update(g2)": u_pcg}
res = {k: [] for k in U}
with gc_paused():
    for r in range(15):
        order = list(U); random.shuffle(order)
        for k in order:
            g1 = p.chain_of(3, N, 1.0)[0]; g2 = p.chain_of(3, N, 2.0)[0]
            exe = g1.instantiate()
            res[k].append(U[k](g1, g2, exe) / N / 1000)
            exe.close(); g1.close(); g2.close()
print("\nwhole-graph update, us per node, median [min-max] of 15, random order")
for k, v in res.items():
    print(f"  {k:34s} {statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]")
