"""Tensor parallelism with PyTorch's process group (NCCL), captured by pycudagraph: memory-safe
capture (``pcg.capture(..., pool=)``) and ``pcg.graphed``, one process per GPU.

Each rank holds a Megatron-style slice of a 2-layer MLP (W1 by columns, W2 by rows) and
runs, in PyTorch, on its own GPU::

    h = relu(x @ W1[:, mine] + b1[mine]);  part = h @ W2[mine, :]
    y    = all_reduce(part) + b2                                  # tensor parallel
    y_sp = all_gather(reduce_scatter(part) + b2)                  # sequence parallel

(``dist.all_reduce``, ``dist.reduce_scatter_tensor``, ``dist.all_gather_into_tensor``).
The data are small integers, so both outputs must EQUAL the unsplit MLP run on the
same GPU (the single-GPU reference). The step runs

1. eagerly (it also sets NCCL's connections up before anything is captured);
2. captured twice with ``pcg.capture(stream, mode="thread_local", pool=...)`` on a
   stream made PyTorch's current one: two graphs (two inputs) sharing one private pool
   (the second capture passes ``pool=cap.pool``), then tensors allocated after the
   captures and replays of both graphs: the outputs stay right and the later tensors
   untouched, because the graphs' temporaries live in their pool;
3. through ``pcg.graphed(step)``: the first call captures, the next calls (each with a
   new input tensor) rebind the input's address and replay.

Run with a launcher or let the script start the processes::

    python -m torch.distributed.run --standalone --nproc_per_node=4 examples/multi_gpu_torch_tp.py
    python examples/multi_gpu_torch_tp.py [--procs 4]        # multiprocessing; default all GPUs

Needs PyTorch with NCCL and 2 GPUs; otherwise it prints SKIPPED and exits 0. NVLink
multicast stays off (``multi_gpu_launch.py``'s guard, in every process).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util

from multi_gpu_launch import at_least_2, launch_env, require_multicast_off, say, start_processes

import pycudagraph as pcg

BATCH, D_MODEL, D_FF = 48, 256, 1536  # BATCH and D_FF split over 2, 3, 4, 6, 8, 12, 16 ranks
REPLAYS, GRAPHED_CALLS, DECOYS_PER_SHAPE = 50, 4, 8


class TPModel:
    """This rank's slice of the MLP, the full weights (for the reference) and inputs."""

    def __init__(self, torch, dist, rank: int, world: int, dev):
        if BATCH % world or D_FF % world:
            raise SystemExit(f"BATCH={BATCH} and D_FF={D_FF} must split over {world} ranks")
        g = torch.Generator().manual_seed(0)  # the same on every rank

        def ints(lo, hi, *shape):
            return torch.randint(lo, hi + 1, shape, generator=g).float().to(dev)

        self.torch, self.dist, self.world, self.dev = torch, dist, world, dev
        self.W1, self.B1 = ints(-2, 2, D_MODEL, D_FF), ints(-3, 3, D_FF)
        self.W2, self.B2 = ints(-1, 1, D_FF, D_MODEL), ints(-3, 3, D_MODEL)
        self.inputs = [ints(-2, 2, BATCH, D_MODEL) for _ in range(GRAPHED_CALLS)]
        cols = D_FF // world
        mine = slice(rank * cols, (rank + 1) * cols)
        self.w1, self.b1 = self.W1[:, mine].contiguous(), self.B1[mine].contiguous()
        self.w2 = self.W2[mine, :].contiguous()

    def reference(self, x):
        """The unsplit MLP on this GPU alone."""
        return self.torch.relu(x @ self.W1 + self.B1) @ self.W2 + self.B2

    def step(self, x):
        """One tensor-parallel step: (y by all-reduce, y by reduce-scatter + all-gather)."""
        torch, dist = self.torch, self.dist
        part = torch.relu(x @ self.w1 + self.b1) @ self.w2
        y = part.clone()
        dist.all_reduce(y)
        y += self.B2
        rows = torch.empty(BATCH // self.world, D_MODEL, device=self.dev)
        dist.reduce_scatter_tensor(rows, part)
        rows += self.B2
        y_sp = torch.empty(BATCH, D_MODEL, device=self.dev)
        dist.all_gather_into_tensor(y_sp, rows)
        return y, y_sp


def _expect_equal(what: str, rank: int, outs, ref) -> None:
    for name, out in zip(("all-reduce", "reduce-scatter + all-gather"), outs):
        if not bool((out == ref).all()):
            bad = (out != ref).nonzero()[0].tolist()
            raise SystemExit(f"rank {rank}, {what}, {name}: y{tuple(bad)} = "
                             f"{out[tuple(bad)].item()}, the single-GPU reference gives "
                             f"{ref[tuple(bad)].item()}")


def pooled_captures(torch, model: TPModel, rank: int) -> tuple:
    """Two graphs sharing one pool; tensors allocated afterwards; replays checked."""
    stream = pcg.Stream(non_blocking=True)
    x_a, x_b = model.inputs[0].clone(), model.inputs[1].clone()
    ref_a, ref_b = model.reference(x_a), model.reference(x_b)
    torch.cuda.synchronize()
    with torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr, device=model.dev)), torch.no_grad():
        for _ in range(2):  # warm up on this stream (cuBLAS sets up its workspace here)
            model.step(x_a)
        stream.synchronize()
        with pcg.capture(stream, mode="thread_local") as cap_a:
            out_a = model.step(x_a)
        with pcg.capture(stream, mode="thread_local", pool=cap_a.pool) as cap_b:
            out_b = model.step(x_b)
    if cap_b.pool is not cap_a.pool:
        raise SystemExit(f"rank {rank}: the second capture did not share the first one's pool")
    execs = [cap_a.graph.instantiate(), cap_b.graph.instantiate()]
    decoys = [torch.full(shape, -7.0, device=model.dev)
              for shape in ((BATCH, D_FF // model.world), (BATCH, D_MODEL),
                            (BATCH // model.world, D_MODEL)) for _ in range(DECOYS_PER_SHAPE)]
    torch.cuda.synchronize()
    for i in range(REPLAYS):
        for exe in execs:
            exe.launch(stream)
        stream.synchronize()
        _expect_equal(f"replay {i} of the first pooled graph", rank, out_a, ref_a)
        _expect_equal(f"replay {i} of the second pooled graph", rank, out_b, ref_b)
    if not all(bool((d == -7.0).all()) for d in decoys):
        raise SystemExit(f"rank {rank}: a replay wrote into a tensor allocated after the capture")
    pool_mib = cap_a.pool.reserved_bytes().get("torch", 0) / 2**20
    return (execs, [cap_a.graph, cap_b.graph]), len(decoys), pool_mib


def graphed_calls(torch, model: TPModel, rank: int):
    """``pcg.graphed(step)`` called with a new input tensor each time."""
    step = pcg.graphed(model.step)
    kept = []  # every input stays alive: each call sees a new address
    for x in model.inputs:
        kept.append(x.clone())
        outs = step(kept[-1])
        _expect_equal(f"graphed call {len(kept)}", rank, outs, model.reference(kept[-1]))
    st = step.stats
    if st.captures != 1 or st.replays != len(model.inputs) or st.rebound_inputs < 1:
        raise SystemExit(f"rank {rank}: graphed stats {st}; want 1 capture, "
                         f"{len(model.inputs)} replays and rebound inputs")
    return step


def rank_main(rank: int, world: int, mailbox, args) -> None:
    """One process of one GPU (from a launcher, or from ``spawn``)."""
    import torch
    import torch.distributed as dist
    local = launch_env()[2]
    torch.cuda.set_device(local)
    pcg.Device(local).set_current()
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    model = TPModel(torch, dist, rank, world, dev)
    if rank == 0:
        v = torch.cuda.nccl.version()
        v = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        say(f"{world} processes, one GPU each; PyTorch {torch.__version__}, NCCL {v}; "
            f"batch {BATCH}, {D_MODEL} -> {D_FF} -> {D_MODEL}")
    with torch.no_grad():
        for x in model.inputs[:2]:
            _expect_equal("eager step", rank, model.step(x), model.reference(x))
    torch.cuda.synchronize()
    (execs, graphs), decoys, pool_mib = pooled_captures(torch, model, rank)
    step = graphed_calls(torch, model, rank)
    torch.cuda.synchronize()
    say(f"rank {rank}: eager step, 2 graphs sharing one pool ({pool_mib:.1f} MiB; {REPLAYS} "
        f"replays each, {decoys} later tensors untouched) and graphed ({step.stats.calls} "
        f"calls, 1 capture, {step.stats.rebound_inputs} inputs rebound): all equal the "
        f"single-GPU reference; {require_multicast_off()}")
    # Graphs holding captured NCCL work go before the communicator.
    for entry in step.graphs.values():
        entry.exec.close()
        entry.graph.close()
    step.clear()
    for exe in execs:
        exe.close()
    for g in graphs:
        g.close()
    del step, execs, graphs
    gc.collect()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    say("OK")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=at_least_2, metavar="N",
                   help="N processes, one GPU each, started with multiprocessing (default: all GPUs)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    count = pcg.device_count()
    if count == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    if importlib.util.find_spec("torch") is None:
        say("SKIPPED: this example needs PyTorch (with its NCCL backend)")
        return
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_nccl_available()):
        say("SKIPPED: this PyTorch has no NCCL process group backend")
        return
    env = launch_env()
    if env is not None:
        if args.procs is not None:
            raise SystemExit("usage error: --procs chooses the layout when run plainly; under "
                             "torchrun the launcher already started one process per GPU")
        rank_main(env[0], env[1], None, args)
        return
    n = count if args.procs is None else args.procs
    if n < 2 or n > count:
        say(f"SKIPPED: {n} processes need {max(n, 2)} GPUs; this machine has {count}")
        return
    start_processes(rank_main, n, args)


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
