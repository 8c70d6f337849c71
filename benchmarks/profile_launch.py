"""Profile 3: where a held graph launch and a first instantiate spend their time, by caller
and by how the graph was made (not part of the suite; behind docs/HOT_PATH.md).

Run from the repository root on a GPU: ``python benchmarks/profile_launch.py``.

1. The kernel-node parameters of a node made by pycudagraph, by pycudagraph's capture and by
   cuda.core (``cuGraphKernelNodeGetParams``): what differs between the graphs.
2. Held launch (the suite's harness: CPU time per call while a spin kernel holds the GPU),
   K = 1, 100 and 1000, for one graph through several callers and for graphs made several
   ways (CuPy's also through the same ctypes call as pycudagraph's).
"""
from __future__ import annotations

import sys
import traceback

import numpy as np
from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

sys.path.insert(0, ".")
import pycudagraph as pcg  # noqa: E402
from benchmarks.common import HELPERS_CU  # noqa: E402
from benchmarks.cudaenv import RawEnv  # noqa: E402
from benchmarks.common import median  # noqa: E402
from benchmarks.timing import gc_paused, held_round  # noqa: E402
from pycudagraph._cuda import fast  # noqa: E402

env = RawEnv()
s = pcg.Stream()
mod = pcg.Module.from_file(HELPERS_CU)
ke = mod["empty"]
ke.launch(1, 1, (), stream=s)
s.synchronize()


def node_fields(h) -> str:
    err, p = dr.cuGraphKernelNodeGetParams(dr.CUgraphNode(int(h)))
    if int(err):
        return f"cuGraphKernelNodeGetParams -> {err}"
    return (f"func={int(p.func):#x} kern={int(p.kern):#x} ctx={int(p.ctx):#x} "
            f"grid={p.gridDimX} block={p.blockDimX} smem={p.sharedMemBytes} "
            f"params={'set' if int(p.kernelParams) else 'none'} extra={'set' if int(p.extra) else 'none'}")


def pcg_built(k):
    g = pcg.Graph()
    prev = None
    for _ in range(k):
        prev = g.add_kernel(ke, 1, 1, (), deps=(prev,) if prev is not None else ())
    return g


def pcg_captured(k):
    with pcg.capture(s) as cap:
        for _ in range(k):
            ke.launch(1, 1, (), stream=s)
    return cap.graph


def cudacore_built(k):
    import cuda.core as cc
    from cuda.core.graph import GraphDefinition
    cc.Device(0).set_current()
    prog = cc.Program(HELPERS_CU.read_text(), "c++", cc.ProgramOptions(name="helpers.cu"))
    ck = prog.compile("cubin").get_kernel("empty")
    cfg = cc.LaunchConfig(grid=1, block=1)
    gdef = GraphDefinition()
    node = gdef.launch(cfg, ck)
    for _ in range(k - 1):
        node = node.launch(cfg, ck)
    return gdef


print("== 1. a kernel node's parameters, by who made it ==")
for label, make in (("pcg add_kernel", pcg_built), ("pcg capture", pcg_captured)):
    g = make(1)
    print(f"{label:16s} {node_fields(g.nodes[0]._h)}")
try:
    gdef = cudacore_built(1)
    err, n, count = rt.cudaGraphGetNodes(rt.cudaGraph_t(int(gdef.handle)), 1)
    print(f"{'cuda.core':16s} {node_fields(int(n[0]))}")
except Exception:  # noqa: BLE001
    traceback.print_exc()

print("\n== 2. held launch (us per call, median; the suite's harness) ==")


def run(label, fn, args, k):
    one = held_round(env, fn, args, int(s.ptr), 10 if k >= 1000 else 20, 100.0)
    with gc_paused():
        us = median([one() for _ in range(5)])
    print(f"K={k:<4d} {label:44s} {us:6.2f}   spin ended early: {env.expired}", flush=True)


for k in (1, 100, 1000):
    exe = pcg_built(k).instantiate()
    exe.upload(s)
    for _ in range(3):
        exe.launch(s)
    s.synchronize()
    run("pcg-built graph, exe.launch(stream)", exe.launch, (s,), k)
    run("pcg-built graph, fast.launch_graph(h, s, exe)", fast.launch_graph,
        (exe._h, int(s.ptr), exe), k)
    run("pcg-built graph, ctypes cuGraphLaunch", fast._f.launch, (exe._h, int(s.ptr)), k)
    run("pcg-built graph, rt.cudaGraphLaunch", rt.cudaGraphLaunch,
        (rt.cudaGraphExec_t(exe._h), rt.cudaStream_t(int(s.ptr))), k)
    cexe = pcg_captured(k).instantiate()
    cexe.upload(s)
    s.synchronize()
    run("pcg-captured graph, exe.launch(stream)", cexe.launch, (s,), k)
    try:
        gdef = cudacore_built(k)
        err, raw = rt.cudaGraphInstantiate(rt.cudaGraph_t(int(gdef.handle)), 0)
        rt.cudaGraphUpload(raw, rt.cudaStream_t(int(s.ptr)))
        s.synchronize()
        run("cuda.core-built graph, fast.launch_graph", fast.launch_graph,
            (int(raw), int(s.ptr), None), k)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    try:
        import cupy
        cs = cupy.cuda.ExternalStream(int(s.ptr))
        kern = cupy.RawModule(code=HELPERS_CU.read_text()).get_function("empty")
        with cs:
            cs.begin_capture()
            for _ in range(k):
                kern((1,), (1,), ())
            cg = cs.end_capture()
        cg.upload(cs)
        cs.synchronize()
        run("CuPy-captured graph, cupy Graph.launch", cg.launch, (cs,), k)
        run("CuPy-captured graph, ctypes cuGraphLaunch", fast._f.launch,
            (int(cg.graphExec), int(s.ptr)), k)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
print(f"\nhot path: {fast.native_status()}; numpy {np.__version__}")
