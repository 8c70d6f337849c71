"""Graphs that share an NCCL communicator, replayed without deadlock; an all-reduce inside
a conditional body. One process per GPU (``--procs N``, default all GPUs; or N processes
under ``torchrun`` / ``mpirun``).

``--case order`` (default): every rank captures two graphs, each ``prepare -> ncclAllReduce
-> accumulate`` on its own buffers, both on one communicator, with
``pcg.capture(stream, collectives=MODE)`` and ``cap.collective(comm)``; then launches them
back to back on two streams, ``--launches`` times (1000). Launched plainly, the two graphs'
all-reduces could run at once in a different order on each rank and hang both. With
``--mode serialize`` each launch waits for the other stream's last one (an event wait);
with ``--mode refuse`` a launch while the other may still run raises
``CollectiveOrderError`` naming both graphs: the rank then waits for the other stream and
launches again (the first such launch is sure to be refused: a spin kernel holds the first
graph back). The accumulated sums are compared with exact values.

``--case if``: an all-reduce captured inside ``cap.if_(flag)``, replayed with the flag set
and not set in turn (the same on every rank): taken, the buffer holds the sum over the
ranks; not taken, this rank's own values. ``--case while``: inside ``cap.while_(flag)``,
three passes. Where CUDA does not allow what NCCL captures into a body (NCCL adds event
record nodes unless ``NCCL_GRAPH_MIXING_SUPPORT=0``: ``--no-mixing`` sets it), the capture
is refused with an error naming the CUDA limit and the node; the rank prints it and
"refused at capture". Every process ends with "OK"; without NCCL or 2 GPUs: SKIPPED.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np

from multi_gpu_launch import join_communicator, launch_env, say, start_processes
from multi_gpu_nccl import Nccl, NcclUnavailable, close_and_ok

import pycudagraph as pcg
from pycudagraph.capture.collectives import CollectiveOrderError

SOURCE = r"""
extern "C" __global__ void prepare(float* buf, const int* step, float scale, int n)
{
    float s = (float)step[0];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = scale * (float)(1 + i % 7) + s;
}
extern "C" __global__ void accumulate(float* acc, const float* buf, int* step, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc[i] += buf[i];
    if (blockIdx.x == 0 && threadIdx.x == 0)
        step[0] += 1;
}
extern "C" __global__ void set_int(int* p, int v) { p[0] = v; }
extern "C" __global__ void count_down(int* left, int* flag)
{
    left[0] -= 1;
    flag[0] = left[0] > 0;
}
extern "C" __global__ void spin(long long cycles)
{
    long long t = clock64();
    while (clock64() - t < cycles) { }
}
"""
N = 1 << 16
GRID, BLOCK = 64, 256
WHILE_PASSES = 3


class Part:
    """One graph's buffers on this rank: the all-reduced buffer, the sum of its replays,
    the step counter."""

    def __init__(self, scale: float):
        self.scale = scale
        self.buf = pcg.DeviceBuffer(4 * N)
        self.acc = pcg.DeviceBuffer(4 * N)
        self.acc.zero()
        self.step = pcg.DeviceBuffer.from_array(np.zeros(1, np.int32))


def ramp() -> np.ndarray:
    return (1 + np.arange(N) % 7).astype(np.float64)


def order_expected(scale: float, world: int, launches: int) -> np.ndarray:
    """The sum over ``launches`` replays of the all-reduced ``prepare``: every rank r writes
    ``scale * (r + 1) * ramp + step``."""
    total = world * (world + 1) // 2
    return (launches * scale * total * ramp() + world * launches * (launches - 1) // 2).astype(np.float32)


def issue(nccl, comm, mod, part: Part, rank: int, stream) -> None:
    mod["prepare"].launch(GRID, BLOCK, (part.buf, part.step, part.scale * (rank + 1), N), stream=stream)
    nccl.all_reduce(comm, part.buf.ptr, part.buf.ptr, N, stream.ptr)
    mod["accumulate"].launch(GRID, BLOCK, (part.acc, part.buf, part.step, N), stream=stream)


def launch(exe, stream, other: pcg.Stream, refused: list) -> None:
    """Launch ``exe`` on ``stream``; when it is refused (the other graph may still run on
    ``other``), wait for ``other`` and launch again."""
    try:
        exe.launch(stream)
    except CollectiveOrderError as exc:
        if not refused:
            say(f"  first refusal: {exc}")
        refused.append(1)
        other.synchronize()
        exe.launch(stream)


def case_order(nccl, comm, mod, rank, world, args) -> list:
    a, b = pcg.Stream(), pcg.Stream()
    parts = [Part(1.0), Part(2.0)]
    for part, s in zip(parts, (a, b)):  # NCCL's connections are set up by eager calls
        nccl.all_reduce(comm, part.buf.ptr, part.buf.ptr, N, s.ptr)
        s.synchronize()
    graphs = []
    for part, s in zip(parts, (a, b)):
        with pcg.capture(s, collectives=args.mode) as cap:
            cap.collective(comm)
            issue(nccl, comm, mod, part, rank, s)
        graphs.append(cap.graph)
    execs = [g.instantiate() for g in graphs]
    use = execs[0].collectives
    say(f"rank {rank}: 2 graphs on one communicator, collectives={use.mode}; "
        f"{len(use.nccl_nodes)} NCCL kernel node(s) found in the first")
    refused: list = []
    t0 = time.perf_counter()
    mod["spin"].launch(1, 1, (int(2e7),), stream=a)  # ~10 ms: the first graph is in flight
    for _ in range(args.launches):
        launch(execs[0], a, b, refused)
        launch(execs[1], b, a, refused)
    a.synchronize()
    b.synchronize()
    per_pair = (time.perf_counter() - t0) / args.launches * 1e6
    for k, part in enumerate(parts):
        got, want = part.acc.to_numpy(np.float32, (N,)), order_expected(part.scale, world, args.launches)
        if not np.array_equal(got, want):
            bad = int(np.argmax(got != want))
            raise SystemExit(f"rank {rank}, graph {k}: acc[{bad}] = {got[bad]}, expected {want[bad]}")
    say(f"rank {rank}: {args.launches} launches of each graph on 2 streams, collectives="
        f"{args.mode}: results match; {len(refused)} launches refused and retried after a wait")
    say(f"rank {rank}: {per_pair:.1f} us per pair of launches, to the synchronized end "
        f"(collectives={args.mode}; includes a ~10 ms hold-back of the first)")
    if args.mode == "refuse" and not refused:
        raise SystemExit(f"rank {rank}: no launch was refused, though the first graph was held back")
    for exe in execs:
        exe.close()
    return graphs


def case_body(nccl, comm, mod, rank, world, args) -> list:
    s = pcg.Stream()
    own = ((rank + 1) * ramp()).astype(np.float32)
    buf = pcg.DeviceBuffer.from_array(own)
    flag = pcg.DeviceBuffer.from_array(np.ones(1, np.int32))
    left = pcg.DeviceBuffer.from_array(np.full(1, WHILE_PASSES, np.int32))
    nccl.all_reduce(comm, buf.ptr, buf.ptr, N, s.ptr)  # connections first
    s.synchronize()
    try:
        with pcg.capture(s, collectives="serialize") as cap:
            cap.collective(comm)
            with (cap.if_(flag) if args.case == "if" else cap.while_(flag)):
                nccl.all_reduce(comm, buf.ptr, buf.ptr, N, s.ptr)
                if args.case == "while":
                    mod["count_down"].launch(1, 1, (left, flag), stream=s)
    except pcg.CaptureError as exc:
        say(f"rank {rank}: {exc}")
        say(f"rank {rank}: refused at capture (an all-reduce inside cap.{args.case}_)")
        return []
    exe = cap.graph.instantiate()
    total = world * (world + 1) // 2
    taken = 0
    for k in range(args.replays):
        on = k % 2 == 0 if args.case == "if" else True
        buf.copy_from(own, stream=s)
        mod["set_int"].launch(1, 1, (flag, int(on)), stream=s)
        mod["set_int"].launch(1, 1, (left, WHILE_PASSES), stream=s)
        exe.launch(s)
        s.synchronize()
        if args.case == "if":
            want = (total * ramp()).astype(np.float32) if on else own
        else:
            want = (world ** (WHILE_PASSES - 1) * total * ramp()).astype(np.float32)
        got = buf.to_numpy(np.float32, (N,))
        if not np.array_equal(got, want):
            bad = int(np.argmax(got != want))
            raise SystemExit(f"rank {rank}, replay {k} (flag {int(on)}): buf[{bad}] = {got[bad]}, "
                             f"expected {want[bad]}")
        taken += on
    if args.case == "if":
        say(f"rank {rank}: if_ body around an all-reduce: taken {taken} times, not taken "
            f"{args.replays - taken} times; results match")
    else:
        say(f"rank {rank}: while_ body around an all-reduce: {WHILE_PASSES} passes in each of "
            f"{args.replays} replays; results match")
    exe.close()
    return [cap.graph]


def rank_main(rank: int, world: int, mailbox, args) -> None:
    nccl = Nccl()
    comm, _ordinal = join_communicator(nccl, rank, world, launch_env()[2], mailbox)
    mod = pcg.Program(SOURCE, name="multi_gpu_nccl_order.cu").compile()
    if rank == 0:
        say(f"{world} processes, one GPU each; NCCL {nccl.version} through {nccl.kind}; "
            f"NCCL_GRAPH_MIXING_SUPPORT={os.environ.get('NCCL_GRAPH_MIXING_SUPPORT', '(unset)')}")
    run = case_order if args.case == "order" else case_body
    graphs = run(nccl, comm, mod, rank, world, args)
    for g in graphs:  # before ncclCommDestroy: NCCL waits for graphs holding its work
        g.close()
    gc.collect()
    close_and_ok(nccl, [comm], f"rank {rank}: ")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=("order", "if", "while"), default="order")
    p.add_argument("--mode", choices=("serialize", "refuse"), default="serialize",
                   help="collectives= of the two graphs (--case order)")
    p.add_argument("--launches", type=int, default=1000, help="launches of each graph")
    p.add_argument("--replays", type=int, default=6, help="replays of the body graph")
    p.add_argument("--procs", type=int, help="processes, one GPU each (default: all GPUs)")
    p.add_argument("--no-mixing", action="store_true",
                   help="NCCL_GRAPH_MIXING_SUPPORT=0 (no event nodes in NCCL's captures)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.no_mixing:
        os.environ["NCCL_GRAPH_MIXING_SUPPORT"] = "0"  # before NCCL is loaded; inherited
    if pcg.device_count() == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    try:
        Nccl()
    except NcclUnavailable as exc:
        say(f"SKIPPED: {exc}")
        return
    env = launch_env()
    if env is not None:
        rank_main(env[0], env[1], None, args)
        return
    procs = args.procs or pcg.device_count()
    if procs < 2 or procs > pcg.device_count():
        say(f"SKIPPED: {procs} processes need {max(procs, 2)} GPUs; this machine has "
            f"{pcg.device_count()}")
        return
    start_processes(rank_main, procs, args)


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
