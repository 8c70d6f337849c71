"""A tensor-parallel 2-layer MLP step on several GPUs, eager and as a replayed CUDA graph.

``y = relu(x @ W1 + b1) @ W2 + b2`` split Megatron-style over the ranks: W1 by columns
(column-parallel: each rank computes its slice of the hidden layer, no communication),
W2 by rows (row-parallel: each rank computes a partial ``y``), then one ``ncclAllReduce``
sums the partials; b2 is added by rank 0 only. Per step and rank that is two kernel
launches (``kernels/mlp.cu``'s ``linear_bias_relu``) and one all-reduce.

The step runs eagerly, then is captured once with ``pcg.capture`` (``StepGraph`` of
``multi_gpu_nccl.py``: one graph, spanning the GPUs in the one-process mode) and replayed; both
outputs are checked against a float64 numpy reference and against each other, and the
per-step latency (host clock from the first launch to the synchronized result) is
reported as p50 / p99 over the timed steps. Run it the way ``multi_gpu_nccl.py`` runs:

    python -m torch.distributed.run --standalone --nproc_per_node=2 examples/multi_gpu_tp_mlp.py
    python examples/multi_gpu_tp_mlp.py          # one process driving every GPU

``--json PATH`` writes rank 0's numbers for the benchmark suite. NCCL comes from
nccl4py or CuPy; without it, or with fewer than 2 GPUs in the one-process mode, the
script prints SKIPPED and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import time

import numpy as np

from multi_gpu_nccl import Nccl, NcclUnavailable, StepGraph, launch_env, share_unique_id

import pycudagraph as pcg

BATCH, D_MODEL, D_FF = 32, 512, 2048
TILE = 16


def make_weights(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, D_MODEL)).astype(np.float32)
    w1 = (rng.standard_normal((D_MODEL, D_FF)) / np.sqrt(D_MODEL)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(D_FF)).astype(np.float32)
    w2 = (rng.standard_normal((D_FF, D_MODEL)) / np.sqrt(D_FF)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(D_MODEL)).astype(np.float32)
    return x, w1, b1, w2, b2


def reference(x, w1, b1, w2, b2) -> np.ndarray:
    f = np.float64
    h = np.maximum(x.astype(f) @ w1.astype(f) + b1.astype(f), 0.0)
    return h @ w2.astype(f) + b2.astype(f)


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
        k.launch(((self.cols + TILE - 1) // TILE, (BATCH + TILE - 1) // TILE), (TILE, TILE),
                 (self.x, self.w1, self.b1, self.h, BATCH, D_MODEL, self.cols, 1), stream=s)
        k.launch(((D_MODEL + TILE - 1) // TILE, (BATCH + TILE - 1) // TILE), (TILE, TILE),
                 (self.h, self.w2, self.b2, self.y, BATCH, self.cols, D_MODEL, 0), stream=s)


def issue_step(nccl: Nccl, shards: list[Shard]) -> None:
    """Column-parallel layer 1, row-parallel layer 2, one all-reduce of y (in place)."""
    for sh in shards:
        sh.launch_layers()
    group = nccl.group() if len(shards) > 1 else contextlib.nullcontext()
    with group:
        for sh in shards:
            nccl.all_reduce(sh.comm, sh.y.ptr, sh.y.ptr, BATCH * D_MODEL, sh.stream.ptr)


def _sync(shards) -> None:
    for sh in shards:
        sh.stream.synchronize()


def time_steps(step, shards, steps: int, warmup: int) -> np.ndarray:
    """Microseconds per step, each from its first launch to its synchronized end."""
    for _ in range(warmup):
        step()
        _sync(shards)
    out = np.empty(steps)
    gc.disable()
    try:
        for i in range(steps):
            t0 = time.perf_counter_ns()
            step()
            _sync(shards)
            out[i] = (time.perf_counter_ns() - t0) / 1e3
    finally:
        gc.enable()
    return out


def read_y(shards) -> list[np.ndarray]:
    return [sh.y.to_numpy(np.float32, (BATCH, D_MODEL)) for sh in shards]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000, help="timed steps per variant")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--json", metavar="PATH", help="write rank 0's figures here")
    args = p.parse_args(argv)
    if pcg.device_count() == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    try:
        nccl = Nccl()
    except NcclUnavailable as exc:
        print(f"SKIPPED: {exc}")
        return
    weights = make_weights()
    env = launch_env()
    if env is None:
        count = pcg.device_count()
        if count < 2:
            print(f"SKIPPED: one process driving several GPUs needs at least 2, this machine has {count}")
            return
        world, rank0 = count, 0
        mode = f"one process, {count} GPUs (ncclCommInitAll, group calls, one multi-device graph)"
        comms = nccl.comm_init_all(range(count))
        kernel = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
        shards = [Shard(i, world, i, comms[i], kernel, weights) for i in range(count)]
    else:
        rank0, world, local = env
        ordinal = local % max(pcg.device_count(), 1)
        pcg.Device(ordinal).set_current()
        mode = f"{world} processes, one GPU each (ncclCommInitRank)"
        comm = nccl.comm_init_rank(world, share_unique_id(nccl, rank0, world), rank0)
        kernel = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
        shards = [Shard(rank0, world, ordinal, comm, kernel, weights)]
    if D_FF % world:
        raise SystemExit(f"D_FF={D_FF} does not split over {world} ranks")

    ref = reference(*weights)
    issue_step(nccl, shards)
    _sync(shards)
    eager_y = read_y(shards)
    step = StepGraph(shards, lambda: issue_step(nccl, shards))
    for sh in shards:
        sh.y.zero()  # the replay must write y again
    step.launch()
    _sync(shards)
    graph_y = read_y(shards)
    err = max(float(np.linalg.norm(y - ref) / np.linalg.norm(ref)) for y in eager_y + graph_y)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(eager_y, graph_y))
    if not err < 1e-4:
        raise SystemExit(f"results do not match numpy: relative error {err:.2e}")

    eager = time_steps(lambda: issue_step(nccl, shards), shards, args.steps, args.warmup)
    graph = time_steps(step.launch, shards, args.steps, args.warmup)
    fig = {"mode": mode, "graph_form": step.form, "refused": step.refused, "world": world,
           "nccl": f"{nccl.kind} {nccl.version}",
           "steps": args.steps, "rel_err": err, "eager_vs_graph_max_abs": diff}
    for name, t in (("eager", eager), ("graph", graph)):
        fig[f"{name}_p50_us"] = float(np.percentile(t, 50))
        fig[f"{name}_p99_us"] = float(np.percentile(t, 99))
    if rank0 == 0:
        print(f"{mode}; NCCL {nccl.version} through {nccl.kind}; batch {BATCH}, "
              f"{D_MODEL} -> {D_FF} -> {D_MODEL}; captured as {step.form}")
        if step.refused:
            print(f"  (CUDA refused one graph across the devices: {step.refused})")
        print(f"  results match: relative error vs float64 numpy {err:.2e} (eager and graph), "
              f"max |eager - graph| = {diff:.2e}")
        print(f"  per step over {args.steps} steps (us):   p50      p99")
        for name in ("eager", "graph"):
            print(f"    {name:<32}{fig[f'{name}_p50_us']:8.1f} {fig[f'{name}_p99_us']:8.1f}")
        print(f"  graph replay / eager at p50: {fig['graph_p50_us'] / fig['eager_p50_us']:.2f}x")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(fig, f, indent=1)
    _sync(shards)
    step.close()  # graphs holding captured NCCL work go before the communicators
    for sh in shards:
        nccl.destroy(sh.comm)
    print("OK")


if __name__ == "__main__":
    try:
        main()
    except pcg.CudaNotAvailableError as exc:  # no GPU: one sentence, no traceback
        raise SystemExit(f"This example needs an NVIDIA GPU; none is usable here ({exc.name}).")
