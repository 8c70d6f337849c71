"""What pycudagraph's hot calls cost per call: Python plus the compiled layer, with or without a GPU.

    python benchmarks/profile_overhead.py                 # a GPU: the real driver
    python benchmarks/profile_overhead.py --stub          # no GPU: tests/support/driver_stub.c
    python benchmarks/profile_overhead.py --stub --instructions   # + callgrind instruction counts
    PYCUDAGRAPH_NO_NATIVE=1 python benchmarks/profile_overhead.py --stub   # the ctypes route

Run from the repository root. Calls measured: graph launch (``exe.launch``), eager launch of a
3- and a 10-argument kernel (``Kernel.launch``), ``Graph.add_kernel`` (a chain: one
dependency each), ``GraphExec.set_arg`` by index and by name. With ``--stub`` the driver
entry points are the stub's (they count and return 0), so the figures are pycudagraph's own
cost on this CPU; ``--instructions`` runs the loops again under ``valgrind --tool=callgrind``
and counts the instructions of each loop alone (the stub zeroes and dumps the counters),
less an empty loop's. ``--json PATH`` writes the figures.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SOURCE = r"""
extern "C" __global__ void k3(float* y, float a, int n) {}
extern "C" __global__ void k10(float* a, float* b, float x, float y, int n, int m, long long q,
                               unsigned int u, double d, bool f) {}
"""
SIG3 = "float* y, float a, int n"
SIG10 = ("float* a, float* b, float x, float y, int n, int m, long long q, unsigned int u, "
         "double d, bool f")
CALLS = ("graph_launch", "launch_3_args", "launch_10_args", "add_kernel", "set_arg_index",
         "set_arg_name")


def stub_world(folder: str):
    """Kernels, graph, exec and stream with the driver stub behind the hot calls."""
    import pycudagraph as pcg
    from pycudagraph._cuda import fast
    from tests.support.driver_stub import Stub, build
    from tests.support.fakes import fake_buffer, fake_graph, fake_kernel
    from pycudagraph._cuda.context import thread_state
    stub = Stub(build(folder))
    stub.quiet()
    fast.use_driver_library(stub.path)
    thread_state.device = 0  # the (pretended) current device: no CUDA runtime call is made
    k3, k10 = fake_kernel(SIG3, "k3"), fake_kernel(SIG10, "k10")
    s = pcg.Stream.__new__(pcg.Stream)
    s._h, s._dev, s._addr = 0x5000, 0, 0x5000
    bufs = [fake_buffer(64), fake_buffer(64)]
    return stub, k3, k10, s, fake_graph, bufs, (lambda: None)


def gpu_world():
    """The same on the GPU, with the real driver."""
    import pycudagraph as pcg
    mod = pcg.Program(SOURCE, name="overhead.cu").compile()
    s = pcg.Stream()
    bufs = [pcg.DeviceBuffer(64), pcg.DeviceBuffer(64)]
    return None, mod["k3"], mod["k10"], s, pcg.Graph, bufs, s.synchronize


def loops(world):
    """name -> function(n) running n calls (and 'empty': the loop alone)."""
    stub, k3, k10, s, new_graph, (b1, b2), sync = world
    a3 = (b1, 1.0, 3)
    a10 = (b1, b2, 1.0, 2.0, 3, 4, -5, 6, 7.5, True)
    for k, a in ((k3, a3), (k10, a10)):  # the first launch of each loads what it needs
        k.launch(1, 32, a, stream=s)
        k.launch(1, 32, a, stream=s)
    g = new_graph()
    node = g.add_kernel(k3, 1, 32, a3)
    g.add_kernel(k3, 1, 32, a3, deps=(node,))
    exe = g.instantiate()
    exe.set_arg(node, 1, 2.0)
    exe.launch(s)
    sync()
    chain = new_graph()
    last = [chain.add_kernel(k3, 1, 32, a3)]

    def empty(n):
        for _ in range(n):
            pass

    def graph_launch(n):
        for _ in range(n):
            exe.launch(s)

    def launch_3_args(n):
        for _ in range(n):
            k3.launch(1, 32, a3, stream=s)

    def launch_10_args(n):
        for _ in range(n):
            k10.launch(1, 32, a10, stream=s)

    def add_kernel(n):
        prev = last[0]
        for _ in range(n):
            prev = chain.add_kernel(k3, 1, 32, a3, deps=(prev,))
        last[0] = prev

    def set_arg_index(n):
        for _ in range(n):
            exe.set_arg(node, 1, 2.5)

    def set_arg_name(n):
        for _ in range(n):
            exe.set_arg(node, "a", 2.5)

    return {"empty": empty, "graph_launch": graph_launch, "launch_3_args": launch_3_args,
            "launch_10_args": launch_10_args, "add_kernel": add_kernel,
            "set_arg_index": set_arg_index, "set_arg_name": set_arg_name}, sync


def time_calls(fns, sync, n: int, repeats: int) -> dict:
    """Best of ``repeats`` runs of n calls each, in ns per call."""
    out = {}
    for name in CALLS:
        best = float("inf")
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter_ns()
            fns[name](n)
            sync()
            best = min(best, (time.perf_counter_ns() - t0) / n)
        out[name] = best
    return out


def count_in_child(stub, fns, n: int) -> None:
    """Under callgrind: one dump per loop of n calls."""
    for name in ("empty", *CALLS):
        fns[name](10)
        stub.zero()
        fns[name](n)
        stub.dump(name)


def instructions(args) -> dict:
    """Instructions per call, counted by callgrind in a child process."""
    folder = tempfile.mkdtemp(prefix="pcg-callgrind-")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           f"--callgrind-out-file={folder}/cg.out", sys.executable, os.path.abspath(__file__),
           "--stub", "--child", str(args.count_n)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"callgrind run failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    totals = {}
    for path in glob.glob(f"{folder}/cg.out.*"):
        name = total = None
        with open(path) as f:
            for line in f:
                if line.startswith("desc: Trigger: Client Request: "):
                    name = line.split(": ", 3)[-1].strip()
                elif line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
        if name and total is not None:
            totals[name] = total
    base = totals["empty"]
    return {name: (totals[name] - base) / args.count_n for name in CALLS}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stub", action="store_true", help="the driver stub instead of a GPU")
    p.add_argument("--instructions", action="store_true", help="callgrind counts (with --stub)")
    p.add_argument("--n", type=int, help="calls per timed run (20000 with --stub, 5000 on a GPU)")
    p.add_argument("--count-n", type=int, default=2000, help="calls per counted loop")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    from pycudagraph._cuda import fast
    if args.stub:
        world = stub_world(tempfile.mkdtemp(prefix="pcg-stub-"))
    else:
        world = gpu_world()
    fns, sync = loops(world)
    if args.child:
        count_in_child(world[0], fns, args.child)
        return 0
    n = args.n or (20000 if args.stub else 5000)
    result = {"hot_path": fast.native_status(), "driver": "stub" if args.stub else "GPU",
              "ns_per_call": time_calls(fns, sync, n, args.repeats)}
    if args.instructions:
        result["instructions_per_call"] = instructions(args)
    print(f"hot path: {result['hot_path']}; driver: {result['driver']}")
    ins = result.get("instructions_per_call", {})
    print(f"{'call':<16}{'ns/call':>10}{'instr/call':>12}")
    for name in CALLS:
        count = f"{ins[name]:>12.0f}" if name in ins else f"{'':>12}"
        print(f"{name:<16}{result['ns_per_call'][name]:>10.0f}{count}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
