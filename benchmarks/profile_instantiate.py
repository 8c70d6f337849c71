"""Profile 4: the first instantiate of a fresh 1,000-node chain, by who built the graph and
who instantiates it, interleaved in one loop with the collector paused as in the suite
(not part of the suite; behind docs/HOT_PATH.md). Run from the repository root on a GPU."""
from __future__ import annotations

import ctypes
import statistics
import sys
import time

sys.path.insert(0, ".")
import pycudagraph as pcg  # noqa: E402
from benchmarks.common import HELPERS_CU  # noqa: E402
from benchmarks.cudaenv import c_function  # noqa: E402
from benchmarks.timing import gc_paused  # noqa: E402
from pycudagraph._cuda import fast  # noqa: E402

N, REPS = 1000, 9
lib = ctypes.CDLL("libcuda.so.1")
VP = ctypes.c_void_p


def fn(name, argtypes):
    return c_function(lib, name, argtypes)


cuGraphCreate = fn("cuGraphCreate", [VP, ctypes.c_uint])
cuGraphDestroy = fn("cuGraphDestroy", [VP])
cuAdd = fn("cuGraphAddKernelNode_v2", [VP, VP, VP, ctypes.c_size_t, VP])
cuInst = fn("cuGraphInstantiateWithFlags", [VP, VP, ctypes.c_ulonglong])
cuExecDestroy = fn("cuGraphExecDestroy", [VP])

s = pcg.Stream()
k3 = pcg.Module.from_file(HELPERS_CU)["empty3"]
buf = pcg.DeviceBuffer(4)
k3.launch(1, 1, (buf, 1.0, 3), stream=s)
s.synchronize()
packed = pcg.Graph().add_kernel(k3, 1, 1, (buf.ptr, 1.0, 3))._pack  # one prepacked struct


def pcg_graph():
    g, prev = pcg.Graph(), None
    for _ in range(N):
        prev = g.add_kernel(k3, 1, 1, (buf.ptr, 1.0, 3), deps=(prev,) if prev is not None else ())
    return g


def raw_graph():
    g, prev = VP(), VP()
    assert cuGraphCreate(ctypes.byref(g), 0) == 0
    for i in range(N):
        node = VP()
        assert cuAdd(ctypes.byref(node), g, ctypes.byref(prev) if i else None, 1 if i else 0,
                     packed.address) == 0
        prev = node
    return g


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, (time.perf_counter() - t0) * 1e6 / N


res = {k: [] for k in ("pcg graph, g.instantiate()", "pcg graph, cuGraphInstantiateWithFlags",
                       "raw graph, cuGraphInstantiateWithFlags",
                       "pcg graph, built 2nd, g.instantiate()",
                       "pcg graph, fast.graph_instantiate (compiled-path call)")}
for r in range(REPS + 1):
    with gc_paused():
        g = pcg_graph()
        exe, t = timed(g.instantiate)
        exe.close()
        g.close()
        res["pcg graph, g.instantiate()"].append(t)
        g = pcg_graph()
        e = VP()
        _, t = timed(lambda: cuInst(ctypes.byref(e), VP(g.table.h), 0))
        cuExecDestroy(e)
        g.close()
        res["pcg graph, cuGraphInstantiateWithFlags"].append(t)
        rg = raw_graph()
        e = VP()
        _, t = timed(lambda: cuInst(ctypes.byref(e), rg, 0))
        cuExecDestroy(e)
        cuGraphDestroy(rg)
        res["raw graph, cuGraphInstantiateWithFlags"].append(t)
        g1 = pcg_graph()
        g2 = pcg_graph()  # another graph built in between, as the suite's update figure does
        exe, t = timed(g1.instantiate)
        exe.close()
        g1.close()
        g2.close()
        res["pcg graph, built 2nd, g.instantiate()"].append(t)
        g = pcg_graph()
        h, t = timed(lambda: fast.graph_instantiate(g, 0))
        cuExecDestroy(VP(h))
        g.close()
        res["pcg graph, fast.graph_instantiate (compiled-path call)"].append(t)
print(f"first instantiate of a fresh {N}-node empty3 chain, us per node, median of {REPS} "
      f"(hot path {fast.native_status()})")
for k, v in res.items():
    print(f"  {k:42s} {statistics.median(v[1:]):.3f}   (min {min(v[1:]):.3f}, max {max(v[1:]):.3f})")

import cProfile, io, pstats  # noqa: E402, E401
with gc_paused():
    g = pcg_graph()
    pr = cProfile.Profile()
    pr.enable()
    exe = g.instantiate()
    pr.disable()
out = io.StringIO()
pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(6)
print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:1500])
