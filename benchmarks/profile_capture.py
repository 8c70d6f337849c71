"""Profile 5: capture 1000 launches + instantiate, split into its steps, for pycudagraph, the
bare driver calls it makes (``bare.c``, the suite's driver column: begin, a prepacked launch,
end, instantiate) and CuPy in one run, on the suite's stream and empty kernel (not part of
the suite; behind docs/HOT_PATH.md). Also pycudagraph's capture with the framework pools
left out (what routing PyTorch's and CuPy's allocations to a private pool costs when both
are imported, as in the suite) and the bare instantiate of a graph pycudagraph captured.
Run from the repository root on a GPU: ``python benchmarks/profile_capture.py [REPS]``."""
from __future__ import annotations

import gc
import statistics
import sys
import time

sys.path.insert(0, ".")
import pycudagraph as pcg  # noqa: E402
from benchmarks.common import HELPERS_CU  # noqa: E402
from benchmarks.peers_driver import profile_peers  # noqa: E402
from pycudagraph.capture import capture as capture_mod  # noqa: E402
from pycudagraph.graph.exec_reuse import paused  # noqa: E402

N = 1000
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
pc = time.perf_counter
env, pcg_peer, driver = profile_peers()
s, ke = pcg_peer.stream, pcg_peer.k_empty
bare, s_int, f_empty = driver.bare, driver.s_int, driver.func_empty
ke.launch(1, 1, (), stream=s)
s.synchronize()
rows: dict = {}


def add(name, us):
    rows.setdefault(name, []).append(us)


def add_steps(who, end, t0, t1, t2, t3, t4):
    """One repetition's steps from its five clock reads (begin, launches, end, instantiate)."""
    for step, us in ((f"{who}: begin capture", t1 - t0),
                     (f"{who}: {N} launches in the capture (per launch)", (t2 - t1) / N),
                     (f"{who}: {end}", t3 - t2), (f"{who}: instantiate", t4 - t3),
                     (f"{who}: total", t4 - t0)):
        add(step, us * 1e6)


for r in range(REPS + 1):
    gc.collect()
    gc.disable()
    t0 = pc()
    cap = pcg.capture(s)
    cap.__enter__()
    t1 = pc()
    for _ in range(N):
        ke.launch(1, 1, (), stream=s)
    t2 = pc()
    cap.__exit__(None, None, None)
    t3 = pc()
    with paused():  # a real instantiate, as the suite's round makes (no exec reuse)
        exe = cap.graph.instantiate()
    t4 = pc()
    gc.enable()
    if r:
        add_steps("pcg", "end capture (graph wrapped)", t0, t1, t2, t3, t4)
    exe.close()
    cap.graph.close()
    s.synchronize()
    t5 = pc()
    for _ in range(N):
        ke.launch(1, 1, (), stream=s)
    t6 = pc()
    s.synchronize()
    if r:
        add("pcg: 1000 eager launches, no capture (per launch)", (t6 - t5) * 1e6 / N)
    gc.disable()
    with pcg.capture(s) as cap:
        for _ in range(N):
            ke.launch(1, 1, (), stream=s)
    t0 = pc()
    e = bare.instantiate(int(cap.graph.handle))
    t1 = pc()
    bare.exec_destroy(e)
    cap.graph.close()
    real, capture_mod.open_pools = capture_mod.open_pools, lambda pool, stream: None
    try:
        t2 = pc()
        with pcg.capture(s) as cap:
            t3 = pc()
            for _ in range(N):
                ke.launch(1, 1, (), stream=s)
            t4 = pc()
        t5 = pc()
    finally:
        capture_mod.open_pools = real
    cap.graph.close()
    if r:
        add("pcg: bare instantiate of its captured graph", (t1 - t0) * 1e6)
        add("pcg, no framework pools: begin capture", (t3 - t2) * 1e6)
        add("pcg, no framework pools: end capture", (t5 - t4) * 1e6)
    t0 = pc()
    bare.begin_capture(s_int)
    t1 = pc()
    for _ in range(N):
        bare.launch_kernel(f_empty, s_int, 0)
    t2 = pc()
    g = bare.end_capture(s_int)
    t3 = pc()
    e = bare.instantiate(g)
    t4 = pc()
    gc.enable()
    if r:
        add_steps("bare", "end capture", t0, t1, t2, t3, t4)
    bare.exec_destroy(e)
    bare.graph_destroy(g)
try:
    import cupy
    cs = cupy.cuda.ExternalStream(int(s.ptr))
    kern = cupy.RawModule(code=HELPERS_CU.read_text()).get_function("empty")
    for r in range(REPS + 1):
        gc.collect()
        gc.disable()
        with cs:
            t0 = pc()
            cs.begin_capture()
            t1 = pc()
            for _ in range(N):
                kern((1,), (1,), ())
            t2 = pc()
            g = cs.end_capture()
            t3 = pc()
        gc.enable()
        if r:
            add("CuPy: begin capture", (t1 - t0) * 1e6)
            add("CuPy: 1000 launches in the capture (per launch)", (t2 - t1) * 1e6 / N)
            add("CuPy: end capture + instantiate", (t3 - t2) * 1e6)
            add("CuPy: total", (t3 - t0) * 1e6)
        del g
except Exception as exc:  # noqa: BLE001
    print(f"CuPy: {type(exc).__name__}: {exc}")
print(f"capture {N} launches + instantiate, us, median of {REPS} (hot path "
      f"{pcg._cuda.fast.native_status()})")
for name, v in rows.items():
    print(f"  {name:52s} {statistics.median(v):10.3f}")
