"""A tensor-parallel 2-layer MLP step on 2, 4, 8 ... GPUs, eager and as a replayed CUDA graph.

``y = relu(x @ W1 + b1) @ W2 + b2`` split Megatron-style over the ranks: W1 by columns
(column-parallel: each rank computes its slice of the hidden layer, no communication),
W2 by rows (row-parallel: each rank computes a partial ``y``), then one ``ncclAllReduce``
sums the partials; b2 is added by rank 0 only. Per step and rank that is two kernel
launches (``kernels/mlp.cu``'s ``linear_bias_relu``) and one all-reduce.

The step runs eagerly, then is captured once with ``pcg.capture`` (``StepGraph`` of
``multi_gpu_launch.py``: one graph, spanning the GPUs in the one-process layout) and
replayed. The data are small integers, so every sum is exact in float32 whatever its
order: the eager and the graph outputs must EQUAL the same MLP run on a single GPU
(the same kernel, unsplit weights) and a float64 numpy reference. Then each variant is
timed over ``--steps`` steps: host clock from the first launch to the synchronized
result (p50 / p99), and the host time spent issuing the step (the CPU launch cost,
divided by the GPUs this process drives). Run it like ``multi_gpu_nccl.py``:

    python -m torch.distributed.run --standalone --nproc_per_node=4 examples/multi_gpu_tp_mlp.py
    python examples/multi_gpu_tp_mlp.py --procs 4   # 4 processes started with multiprocessing
    python examples/multi_gpu_tp_mlp.py --gpus 4    # one process driving 4 GPUs (default: all)

``--json PATH`` writes rank 0's figures (``benchmarks/tp_step.py`` reads them). Every
process ends with a line "OK". NCCL comes from nccl4py or CuPy; without it, or with too
few GPUs, the script prints SKIPPED and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import numpy as np

from multi_gpu_launch import StepGraph, add_layout_args, join_communicator, launch_env, say
from multi_gpu_nccl import Nccl, close_and_ok, run_layout

import pycudagraph as pcg

BATCH, D_MODEL, D_FF = 32, 512, 2048
TILE = 16


def make_weights(seed: int = 0):
    """Small integers as float32: every product and sum of the step is exact."""
    rng = np.random.default_rng(seed)

    def ints(lo, hi, shape):
        return rng.integers(lo, hi + 1, shape).astype(np.float32)

    return (ints(-2, 2, (BATCH, D_MODEL)), ints(-2, 2, (D_MODEL, D_FF)), ints(-3, 3, D_FF),
            ints(-1, 1, (D_FF, D_MODEL)), ints(-3, 3, D_MODEL))


def reference(x, w1, b1, w2, b2) -> np.ndarray:
    f = np.float64
    h = np.maximum(x.astype(f) @ w1.astype(f) + b1.astype(f), 0.0)
    return h @ w2.astype(f) + b2.astype(f)


def _launch_linear(k, x, w, b, y, rows, inner, cols, relu, stream) -> None:
    k.launch(((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE), (TILE, TILE),
             (x, w, b, y, rows, inner, cols, relu), stream=stream)


def one_gpu_reference(kernel, weights, ordinal: int) -> np.ndarray:
    """The whole MLP on GPU ``ordinal`` alone: the same kernel, unsplit weights, no NCCL."""
    x, w1, b1, w2, b2 = weights
    with pcg.device(ordinal):
        s = pcg.Stream()
        bx, bw1, bb1, bw2, bb2 = (pcg.DeviceBuffer.from_array(a) for a in weights)
        h, y = pcg.DeviceBuffer(4 * BATCH * D_FF), pcg.DeviceBuffer(4 * BATCH * D_MODEL)
        _launch_linear(kernel, bx, bw1, bb1, h, BATCH, D_MODEL, D_FF, 1, s)
        _launch_linear(kernel, h, bw2, bb2, y, BATCH, D_FF, D_MODEL, 0, s)
        s.synchronize()
        return y.to_numpy(np.float32, (BATCH, D_MODEL))


class Shard:
    """One rank's slice of the model and its buffers, on its device."""

    def __init__(self, rank: int, world: int, ordinal: int, comm, kernel, weights):
        x, w1, b1, w2, b2 = weights
        cols = D_FF // world
        lo, hi = rank * cols, (rank + 1) * cols
        self.rank, self.comm, self.kernel, self.cols = rank, comm, kernel, cols
        with pcg.device(ordinal) as dev:
            self.device = dev
            self.stream = pcg.Stream()
            self.x = pcg.DeviceBuffer.from_array(x)
            self.w1 = pcg.DeviceBuffer.from_array(np.ascontiguousarray(w1[:, lo:hi]))
            self.b1 = pcg.DeviceBuffer.from_array(b1[lo:hi])
            self.w2 = pcg.DeviceBuffer.from_array(np.ascontiguousarray(w2[lo:hi, :]))
            self.b2 = pcg.DeviceBuffer.from_array(b2 if rank == 0 else np.zeros_like(b2))
            self.h = pcg.DeviceBuffer(4 * BATCH * cols)
            self.y = pcg.DeviceBuffer(4 * BATCH * D_MODEL)
            self.event = pcg.Event(timing=False)

    def launch_layers(self) -> None:
        k, s = self.kernel, self.stream
        _launch_linear(k, self.x, self.w1, self.b1, self.h, BATCH, D_MODEL, self.cols, 1, s)
        _launch_linear(k, self.h, self.w2, self.b2, self.y, BATCH, self.cols, D_MODEL, 0, s)


def issue_step(nccl: Nccl, shards: list[Shard]) -> None:
    """Column-parallel layer 1, row-parallel layer 2, one all-reduce of y (in place)."""
    for sh in shards:
        sh.launch_layers()
    with nccl.group_if(len(shards) > 1):
        for sh in shards:
            nccl.all_reduce(sh.comm, sh.y.ptr, sh.y.ptr, BATCH * D_MODEL, sh.stream.ptr)


def _sync(shards) -> None:
    for sh in shards:
        sh.stream.synchronize()


def time_steps(step, shards, steps: int, warmup: int) -> tuple[np.ndarray, np.ndarray]:
    """Per step, microseconds from its first launch to its synchronized end, and
    microseconds the host spent issuing it (the CPU launch cost)."""
    for _ in range(warmup):
        step()
        _sync(shards)
    total, issue = np.empty(steps), np.empty(steps)
    gc.disable()
    try:
        for i in range(steps):
            t0 = time.perf_counter_ns()
            step()
            t1 = time.perf_counter_ns()
            _sync(shards)
            total[i] = (time.perf_counter_ns() - t0) / 1e3
            issue[i] = (t1 - t0) / 1e3
    finally:
        gc.enable()
    return total, issue


def read_y(shards) -> list[np.ndarray]:
    return [sh.y.to_numpy(np.float32, (BATCH, D_MODEL)) for sh in shards]


def measure(nccl: Nccl, shards: list[Shard], world: int, layout: str, args) -> dict:
    """Check eager and graph against the single-GPU and numpy references, then time both."""
    weights = make_weights()
    ref = reference(*weights)
    one = one_gpu_reference(shards[0].kernel, weights, shards[0].device.ordinal)
    issue_step(nccl, shards)
    _sync(shards)
    eager_y = read_y(shards)
    step = StepGraph(shards, lambda: issue_step(nccl, shards))
    for sh in shards:
        sh.y.zero()  # the replay must write y again
    step.launch()
    _sync(shards)
    graph_y = read_y(shards)
    if not np.array_equal(one, ref):
        raise SystemExit("the single-GPU run does not equal float64 numpy")
    for name, ys in (("eager", eager_y), ("graph", graph_y)):
        for sh, y in zip(shards, ys):
            if not np.array_equal(y, one):
                bad = np.argwhere(y != one)[0]
                raise SystemExit(f"{name} step, rank {sh.rank}: y{tuple(bad)} = {y[tuple(bad)]}, "
                                 f"the single-GPU run gives {one[tuple(bad)]}")
    eager, eager_issue = time_steps(lambda: issue_step(nccl, shards), shards, args.steps, args.warmup)
    graph, graph_issue = time_steps(step.launch, shards, args.steps, args.warmup)
    fig = {"mode": "", "layout": layout, "graph_form": step.form, "refused": step.refused,
           "world": world, "gpus_here": len(shards), "nccl": f"{nccl.kind} {nccl.version}",
           "steps": args.steps, "equal_to_one_gpu": True, "rel_err": 0.0,
           "eager_vs_graph_max_abs": 0.0, "nodes": len(step.nodes())}
    for name, t, t_issue in (("eager", eager, eager_issue), ("graph", graph, graph_issue)):
        fig[f"{name}_p50_us"] = float(np.percentile(t, 50))
        fig[f"{name}_p99_us"] = float(np.percentile(t, 99))
        fig[f"{name}_launch_us_per_gpu"] = float(np.percentile(t_issue, 50)) / len(shards)
    _sync(shards)
    step.close()  # graphs holding captured NCCL work go before the communicators
    return fig


def report(fig: dict, args) -> None:
    say(f"{fig['mode']}; NCCL {fig['nccl']}; batch {BATCH}, {D_MODEL} -> {D_FF} -> "
        f"{D_MODEL}; captured as {fig['graph_form']} ({fig['nodes']} nodes)")
    if fig["refused"]:
        say(f"  (CUDA refused one graph across the devices: {fig['refused']})")
    say("  results match: eager and graph outputs equal the single-GPU run and float64 "
        "numpy exactly, on every rank")
    say(f"  per step over {args.steps} steps (us):   p50      p99   CPU launch/GPU")
    for name in ("eager", "graph"):
        say(f"    {name:<32}{fig[f'{name}_p50_us']:8.1f} {fig[f'{name}_p99_us']:8.1f} "
            f"{fig[f'{name}_launch_us_per_gpu']:10.1f}")
    say(f"  graph replay / eager at p50: {fig['graph_p50_us'] / fig['eager_p50_us']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=1)


def rank_main(rank: int, world: int, mailbox, args) -> None:
    """One process of one GPU (from a launcher, or from ``spawn`` with its mailbox)."""
    if D_FF % world:
        raise SystemExit(f"D_FF={D_FF} does not split over {world} ranks")
    nccl = Nccl()
    comm, ordinal = join_communicator(nccl, rank, world, launch_env()[2], mailbox)
    kernel = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
    shard = Shard(rank, world, ordinal, comm, kernel, make_weights())
    started = "multiprocessing" if mailbox is not None else "a launcher"
    fig = measure(nccl, [shard], world, "procs", args)
    fig["mode"] = f"{world} processes, one GPU each (ncclCommInitRank, started by {started})"
    if rank == 0:
        report(fig, args)
    close_and_ok(nccl, [comm], f"rank {rank}: ")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000, help="timed steps per variant")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--json", metavar="PATH", help="write rank 0's figures here")
    add_layout_args(p)
    return p.parse_args(argv)


def one_process(nccl: Nccl, world: int, args) -> None:
    """This process drives GPUs 0 .. world-1: one communicator each, group calls."""
    if D_FF % world:
        raise SystemExit(f"D_FF={D_FF} does not split over {world} ranks")
    comms = nccl.comm_init_all(range(world))
    kernel = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
    weights = make_weights()
    shards = [Shard(i, world, i, comms[i], kernel, weights) for i in range(world)]
    fig = measure(nccl, shards, world, "one", args)
    fig["mode"] = f"one process, {world} GPUs (ncclCommInitAll, group calls, one multi-device graph)"
    report(fig, args)
    close_and_ok(nccl, comms)


def main(argv=None) -> None:
    args = parse_args(argv)
    run_layout(args, rank_main, one_process, args)


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
