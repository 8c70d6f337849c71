"""What pycudagraph's hot calls cost per call: Python plus the compiled layer, with or without a GPU.

    python benchmarks/profile_overhead.py                 # a GPU: the real driver
    python benchmarks/profile_overhead.py --stub          # no GPU: tests/support/driver_stub.c
    python benchmarks/profile_overhead.py --stub --instructions   # + callgrind instruction counts
    PYCUDAGRAPH_NO_NATIVE=1 python benchmarks/profile_overhead.py --stub   # the ctypes route

Run from the repository root. Calls measured: graph launch (``exe.launch``), and for kernels of
3, 10 and 30 arguments (``benchmarks/argsets.py``: pointers as DeviceBuffers, scalars as
Python numbers) eager launch (``Kernel.launch``), ``Graph.add_kernel`` (a chain: one
dependency each), ``GraphExec.set_arg`` (by index; by name for 3) and
``GraphExec.set_params(node, args=...)`` (every argument); then ``Graph.instantiate`` and
``GraphExec.update`` of a 1000-node graph, per node. With ``--stub`` the driver
entry points are the stub's (they count and return 0), so the figures are pycudagraph's own
cost on this CPU; ``--instructions`` runs the loops again under ``valgrind --tool=callgrind``
and counts the instructions of each loop alone (the stub zeroes and dumps the counters),
less an empty loop's. ``--json PATH`` writes the figures, ``--compare BEFORE.json`` prints a
Markdown table of the counts against an earlier ``--json``; ``--calls`` picks some.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import argsets  # noqa: E402 - after the path is set

CALLS = ("graph_launch", "launch_3", "launch_10", "launch_30", "add_kernel_3", "add_kernel_10",
         "add_kernel_30", "set_arg_3", "set_arg_10", "set_arg_30", "set_arg_name",
         "set_args_3", "set_args_10", "set_args_30", "instantiate_node", "update_node")
#: nodes of the graphs instantiate_node and update_node work on (their figures are per node)
NODES = 1000


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
    kernels = {n: fake_kernel(argsets.signature(n), argsets.name(n)) for n in argsets.COUNTS}
    s = pcg.Stream.__new__(pcg.Stream)
    s._h, s._dev, s._addr = 0x5000, 0, 0x5000
    bufs = [fake_buffer(64) for _ in range(4)]
    return stub, kernels, s, fake_graph, bufs, (lambda: None)


def gpu_world():
    """The same on the GPU, with the real driver."""
    import pycudagraph as pcg
    from benchmarks.common import HELPERS_CU
    mod = pcg.Module.from_file(HELPERS_CU)
    s = pcg.Stream()
    bufs = [pcg.DeviceBuffer(64) for _ in range(4)]
    return None, {n: mod[argsets.name(n)] for n in argsets.COUNTS}, s, pcg.Graph, bufs, s.synchronize


def loops(world):
    """name -> function(n) making n calls and returning how many units (calls, or nodes for
    the per-node figures) it did; 'empty' is the loop alone."""
    stub, kernels, s, new_graph, bufs, sync = world
    args = {n: argsets.values(n, bufs) for n in argsets.COUNTS}
    new_args = {n: tuple(argsets.values(n, bufs, 2.0)) for n in argsets.COUNTS}
    for n, k in kernels.items():  # the first launch of each loads what it needs
        k.launch(1, 32, args[n], stream=s)
        k.launch(1, 32, args[n], stream=s)
    g = new_graph()
    nodes = {n: g.add_kernel(kernels[n], 1, 32, args[n]) for n in argsets.COUNTS}
    exe = g.instantiate()
    for n, node in nodes.items():
        exe.set_arg(node, argsets.UPDATE_INDEX, 2.0)
        exe.set_params(node, args=new_args[n])
    exe.launch(s)
    sync()
    chain = new_graph()
    last = {n: chain.add_kernel(kernels[n], 1, 32, args[n]) for n in argsets.COUNTS}
    big = []
    for _ in range(2):  # two graphs of the same shape: instantiate one, update with either
        gb = new_graph()
        prev = None
        for _ in range(NODES):
            prev = gb.add_kernel(kernels[3], 1, 32, args[3], deps=(prev,) if prev else ())
        big.append(gb)
    big_exe = big[0].instantiate()
    made = []  # execs made by the loops: destroyed after the counting, not inside it
    idx = argsets.UPDATE_INDEX

    def empty(n):
        for _ in range(n):
            pass
        return n

    def graph_launch(n):
        for _ in range(n):
            exe.launch(s)
        return n

    def launch(c):
        k, a = kernels[c], args[c]

        def run(n):
            for _ in range(n):
                k.launch(1, 32, a, stream=s)
            return n
        return run

    def add_kernel(c):
        k, a = kernels[c], args[c]

        def run(n):
            prev = last[c]
            for _ in range(n):
                prev = chain.add_kernel(k, 1, 32, a, deps=(prev,))
            last[c] = prev
            return n
        return run

    def set_arg(c, key=idx):
        node = nodes[c]

        def run(n):
            for _ in range(n):
                exe.set_arg(node, key, 2.5)
            return n
        return run

    def set_args(c):
        node, a = nodes[c], new_args[c]

        def run(n):
            for _ in range(n):
                exe.set_params(node, args=a)
            return n
        return run

    def instantiate_node(n):
        times = max(1, n // 200)
        for _ in range(times):
            made.append(big[0].instantiate())
        return times * NODES

    def update_node(n):
        times = max(2, n // 200)
        for i in range(times):
            big_exe.update(big[i % 2])
        return times * NODES

    fns = {"empty": empty, "graph_launch": graph_launch, "set_arg_name": set_arg(3, "a"),
           "instantiate_node": instantiate_node, "update_node": update_node}
    for c in argsets.COUNTS:
        fns[f"launch_{c}"] = launch(c)
        fns[f"add_kernel_{c}"] = add_kernel(c)
        fns[f"set_arg_{c}"] = set_arg(c)
        fns[f"set_args_{c}"] = set_args(c)
    return fns, sync


def time_calls(fns, sync, n: int, repeats: int, names) -> dict:
    """Best of ``repeats`` runs of n calls each, in ns per call (per node for the per-node
    figures)."""
    out = {}
    for name in names:
        best = float("inf")
        for _ in range(repeats):
            sync()
            gc.collect()
            gc.disable()  # as the suite times: the collector off inside timed loops
            t0 = time.perf_counter_ns()
            units = fns[name](n)
            sync()
            best = min(best, (time.perf_counter_ns() - t0) / units)
            gc.enable()
        out[name] = best
    return out


def count_in_child(stub, fns, n: int, names, units_path: str) -> None:
    """Under callgrind: one dump per loop of n calls; the units each loop did go to a file."""
    units = {}
    for name in ("empty", *names):
        fns[name](10)
        gc.collect()
        gc.disable()
        stub.zero()
        units[name] = fns[name](n)
        stub.dump(name)
        gc.enable()
    with open(units_path, "w") as f:
        json.dump(units, f)


def instructions(args, names) -> dict:
    """Instructions per call (per node for the per-node figures), counted by callgrind in a
    child process, less the empty loop's per call."""
    folder = tempfile.mkdtemp(prefix="pcg-callgrind-")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           f"--callgrind-out-file={folder}/cg.out", sys.executable, os.path.abspath(__file__),
           "--stub", "--child", str(args.count_n), "--calls", ",".join(names),
           "--units", f"{folder}/units.json"]
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
    with open(f"{folder}/units.json") as f:
        units = json.load(f)
    base = totals["empty"] / units["empty"]
    return {name: (totals[name] - base * args.count_n) / units[name] for name in names}


def compare_lines(before: dict, after: dict, names) -> list[str]:
    """A Markdown table of instructions per call, before and after."""
    b = before.get("instructions_per_call", {})
    a = after.get("instructions_per_call", {})
    out = ["| call | before | after | after / before |", "| --- | ---: | ---: | ---: |"]
    for name in names:
        if name in a and name in b:
            out.append(f"| `{name}` | {b[name]:,.0f} | {a[name]:,.0f} | {a[name] / b[name]:.2f} |")
        elif name in a:
            out.append(f"| `{name}` | - | {a[name]:,.0f} | - |")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stub", action="store_true", help="the driver stub instead of a GPU")
    p.add_argument("--instructions", action="store_true", help="callgrind counts (with --stub)")
    p.add_argument("--n", type=int, help="calls per timed run (20000 with --stub, 5000 on a GPU)")
    p.add_argument("--count-n", type=int, default=2000, help="calls per counted loop")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--calls", help=f"only these (comma-separated): {', '.join(CALLS)}")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--compare", metavar="BEFORE.json",
                   help="print a Markdown table of these instruction counts against BEFORE's")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--units", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = CALLS
    if args.calls:
        names = tuple(c.strip() for c in args.calls.split(",") if c.strip())
        unknown = [c for c in names if c not in CALLS]
        if unknown:
            p.error(f"unknown call(s) {', '.join(unknown)}; choose from {', '.join(CALLS)}")
    from pycudagraph._cuda import fast
    if args.stub:
        world = stub_world(tempfile.mkdtemp(prefix="pcg-stub-"))
    else:
        world = gpu_world()
    fns, sync = loops(world)
    if args.child:
        count_in_child(world[0], fns, args.child, names, args.units)
        return 0
    n = args.n or (20000 if args.stub else 5000)
    result = {"hot_path": fast.native_status(), "driver": "stub" if args.stub else "GPU",
              "ns_per_call": time_calls(fns, sync, n, args.repeats, names)}
    if args.instructions:
        result["instructions_per_call"] = instructions(args, names)
    print(f"hot path: {result['hot_path']}; driver: {result['driver']}")
    ins = result.get("instructions_per_call", {})
    print(f"{'call':<18}{'ns/call':>10}{'instr/call':>12}")
    for name in names:
        count = f"{ins[name]:>12.0f}" if name in ins else f"{'':>12}"
        print(f"{name:<18}{result['ns_per_call'][name]:>10.0f}{count}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.compare:
        with open(args.compare) as f:
            print("\n".join(compare_lines(json.load(f), result, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
