"""Profile 5: capture 1000 launches + instantiate, split into its steps, for pycudagraph and
CuPy in one run (not part of the suite; behind docs/HOT_PATH.md). Run from the repository
root on a GPU."""
from __future__ import annotations

import gc
import statistics
import sys
import time

sys.path.insert(0, ".")
import pycudagraph as pcg  # noqa: E402
from benchmarks.common import HELPERS_CU  # noqa: E402

N, REPS = 1000, 7
pc = time.perf_counter
s = pcg.Stream()
ke = pcg.Module.from_file(HELPERS_CU)["empty"]
ke.launch(1, 1, (), stream=s)
s.synchronize()
rows: dict = {}


def add(name, us):
    rows.setdefault(name, []).append(us)


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
    exe = cap.graph.instantiate()
    t4 = pc()
    gc.enable()
    if r:
        add("pcg: begin capture", (t1 - t0) * 1e6)
        add("pcg: 1000 launches in the capture (per launch)", (t2 - t1) * 1e6 / N)
        add("pcg: end capture (graph wrapped)", (t3 - t2) * 1e6)
        add("pcg: instantiate", (t4 - t3) * 1e6)
        add("pcg: total", (t4 - t0) * 1e6)
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
