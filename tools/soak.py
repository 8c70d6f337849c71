"""Soak test (not part of the default test run): memory must stay flat.

Phase 1: ``--launches`` graph launches (default 10**6) with a ``set_arg`` every 100
(a new float every 100, a different buffer every 1000, so replaced buffers are retired
and released), an ``exe.synchronize()`` every 10,000.
Phase 2: ``--cycles`` build / instantiate / destroy cycles (default 10**5): a graph of a
kernel node and a memset node, instantiated, launched every 100th cycle, both closed.

Prints RSS (``/proc/self/statm``), GPU memory in use (``cudaMemGetInfo``), live Python
objects and live lifetime ledgers before and after each phase (after a warm-up), and the
wall time. Exits 1 when RSS grows by more than ``--rss-slack`` MiB or GPU memory by more
than ``--gpu-slack`` MiB in a phase, or a result is wrong.

    python tools/soak.py [--launches N] [--cycles N]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pycudagraph as pcg  # noqa: E402
from pycudagraph import _lifetime  # noqa: E402
from pycudagraph._cuda import call, rt  # noqa: E402

MiB = 1 << 20
N = 256


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def gpu_used() -> int:
    free, total = call(rt.cudaMemGetInfo)
    return int(total) - int(free)


def snapshot() -> dict:
    gc.collect()
    return {"rss": rss(), "gpu": gpu_used(), "objects": len(gc.get_objects()),
            "ledgers": len(_lifetime._ledgers)}


def report(name: str, before: dict, after: dict, seconds: float, count: int, args) -> bool:
    d_rss, d_gpu = after["rss"] - before["rss"], after["gpu"] - before["gpu"]
    print(f"{name}: {count:,} in {seconds:.1f} s ({count / seconds:,.0f}/s)")
    print(f"  RSS      {before['rss'] / MiB:9.1f} MiB -> {after['rss'] / MiB:9.1f} MiB "
          f"({d_rss / 1024:+,.0f} KiB)")
    print(f"  GPU used {before['gpu'] / MiB:9.1f} MiB -> {after['gpu'] / MiB:9.1f} MiB "
          f"({d_gpu / 1024:+,.0f} KiB)")
    print(f"  Python objects {before['objects']:,} -> {after['objects']:,}; "
          f"live ledgers {before['ledgers']} -> {after['ledgers']}")
    ok = d_rss <= args.rss_slack * MiB and d_gpu <= args.gpu_slack * MiB
    print(f"  {'flat' if ok else 'GREW'}")
    return ok


def launches(mod, count: int, args) -> bool:
    s = pcg.Stream()
    bufs = [pcg.DeviceBuffer(4 * N) for _ in range(2)]
    g = pcg.Graph()
    k = g.add_kernel(mod["fill"], 1, N, (bufs[0], 0.0, N))
    exe = g.instantiate()

    def run(n: int, offset: int) -> tuple[int, float]:
        target, value = 0, 0.0
        for i in range(n):
            if i % 100 == 0:
                value = float((offset + i) // 100)
                exe.set_arg(k, 1, value)
                if i % 1000 == 0:
                    target = ((offset + i) // 1000) % 2
                    exe.set_arg(k, 0, bufs[target])
            exe.launch(s)
            if i % 10_000 == 9_999:
                exe.synchronize()
        exe.synchronize()
        return target, value

    run(20_000, 0)  # warm-up
    before = snapshot()
    t0 = time.perf_counter()
    target, value = run(count, 20_000)
    seconds = time.perf_counter() - t0
    after = snapshot()
    right = (bufs[target].to_numpy(np.float32) == np.float32(value)).all()
    if not right:
        print(f"  WRONG RESULT: expected {value} in buffer {target}")
    ok = report("launches (set_arg every 100)", before, after, seconds, count, args)
    exe.close()
    g.close()
    return ok and bool(right)


def cycles(mod, count: int, args) -> bool:
    s = pcg.Stream()
    buf = pcg.DeviceBuffer(4 * N)

    def run(n: int) -> None:
        for i in range(n):
            g = pcg.Graph()
            k = g.add_kernel(mod["fill"], 1, N, (buf, float(i), N))
            g.add_memset(buf, 0, 4, deps=[k])
            exe = g.instantiate()
            if i % 100 == 0:
                exe.launch(s)
            exe.close()
            g.close()
            if i % 1000 == 999:
                s.synchronize()
        s.synchronize()

    run(2_000)  # warm-up
    before = snapshot()
    t0 = time.perf_counter()
    run(count)
    seconds = time.perf_counter() - t0
    after = snapshot()
    out = buf.to_numpy(np.float32)
    last = float((count - 1) // 100 * 100)
    right = out[0] == 0.0 and (out[1:] == np.float32(last)).all()
    if not right:
        print(f"  WRONG RESULT: {out[:4]} (expected 0, then {last})")
    return report("build/instantiate/destroy cycles", before, after, seconds, count, args) and right


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launches", type=int, default=10**6)
    p.add_argument("--cycles", type=int, default=10**5)
    p.add_argument("--rss-slack", type=float, default=4.0, help="MiB of RSS growth allowed")
    p.add_argument("--gpu-slack", type=float, default=2.0, help="MiB of GPU growth allowed")
    args = p.parse_args(argv)
    mod = pcg.Module.from_file("helpers.cu")
    name = call(rt.cudaGetDeviceProperties, 0).name
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    print(f"device: {name.strip(chr(0))}; pycudagraph {pcg.__version__}; "
          f"Python {sys.version.split()[0]}")
    t0 = time.perf_counter()
    ok = launches(mod, args.launches, args)
    ok = cycles(mod, args.cycles, args) and ok
    print(f"total wall time {time.perf_counter() - t0:.1f} s; {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
