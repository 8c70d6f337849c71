"""All-reduce, all-gather and reduce-scatter captured into CUDA graphs: checked, then timed
against NCCL called eagerly, as bus bandwidth (nccl-tests' formula), on 2, 4, 8 ... GPUs.

For each collective and size (``--sizes``, nccl-tests' meaning: the whole buffer, the
gathered output of an all-gather, the input of a reduce-scatter) every rank fills its
send buffer with small integers and

1. runs the collective once eagerly and compares the result with the exact value;
2. captures ``--iters`` back-to-back collectives into one graph (``pcg.capture``;
   ``StepGraph`` of ``multi_gpu_launch.py``: one graph spanning the GPUs in the
   one-process layout), replays it once and compares again;
3. times NCCL the way nccl-tests does: after one collective that lines the ranks up,
   events around ``--iters`` eager calls (out of place), and around ``--launches``
   launches of the captured graph; time per collective, algorithm bandwidth
   ``size / time`` and bus bandwidth ``algbw * 2(n-1)/n`` (all-reduce) or
   ``algbw * (n-1)/n`` (all-gather, reduce-scatter).

Layouts as in ``multi_gpu_nccl.py``: ``--gpus N`` (one process, default all GPUs),
``--procs N`` (multiprocessing), or one process per GPU under ``torchrun`` / ``mpirun``.
``--json PATH`` writes rank 0's figures (``benchmarks/tp_step.py`` reads them). Each rank
times its own stream; rank 0's figures are reported. Every process ends with a line "OK".
Without NCCL, or with too few GPUs, the script prints SKIPPED and exits 0. NVLink
multicast stays off.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from multi_gpu_launch import (StepGraph, add_layout_args, join_communicator, join_streams,
                              launch_env, say)
from multi_gpu_nccl import Nccl, close_and_ok, run_layout

import pycudagraph as pcg

# nccl-tests' bus bandwidth: the algorithm bandwidth (bytes / time) times what each link
# must carry for the collective, so one figure compares across GPU counts.
_BUS = {"all_reduce": lambda n: 2 * (n - 1) / n,
        "all_gather": lambda n: (n - 1) / n,
        "reduce_scatter": lambda n: (n - 1) / n}
COLLECTIVES = tuple(_BUS)


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth for ``n`` ranks: all-reduce
    2(n-1)/n, all-gather and reduce-scatter (n-1)/n."""
    if collective not in _BUS:
        raise ValueError(f"unknown collective {collective!r}; one of {', '.join(COLLECTIVES)}")
    if int(n) < 1:
        raise ValueError(f"a collective needs at least 1 rank, got n={n}")
    return _BUS[collective](int(n))


def bandwidth(collective: str, nbytes: int, seconds: float, n: int) -> tuple[float, float]:
    """(algorithm, bus) bandwidth in GB/s (1e9 bytes/s) of one ``collective`` over ``n``
    ranks moving ``nbytes`` (nccl-tests' size: the whole buffer, for all-gather the
    gathered output, for reduce-scatter the input) in ``seconds``."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    alg = nbytes / seconds / 1e9
    return alg, alg * bus_factor(collective, n)


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``"64K"``, ``"16M"``, ``"1G"``, ``"4096"`` -> bytes (powers of 1024)."""
    t = text.strip().upper().removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    try:
        n = int(t[: len(t) - len(unit)]) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4096, 64K, 16M, 1G)") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"a size must be > 0, got {text!r}")
    return n


def parse_sizes(text: str) -> tuple[int, ...]:
    return tuple(parse_size(s) for s in text.split(",") if s.strip())


def counts(collective: str, nbytes: int, n: int) -> tuple[int, int, int, int]:
    """(send elements, receive elements, the count argument NCCL takes, bytes moved
    as nccl-tests counts them) for ``nbytes`` over ``n`` ranks, rounded down so every
    rank holds the same whole number of float32 values."""
    per = max(1, nbytes // 4 // n)  # elements per rank's slice
    total = per * n
    if collective == "all_reduce":
        return total, total, total, 4 * total
    if collective == "all_gather":
        return per, total, per, 4 * total
    return total, per, per, 4 * total  # reduce_scatter


def send_values(rank: int, count: int) -> np.ndarray:
    return ((rank + 1) + (np.arange(count) % 7)).astype(np.float32)


def expected(collective: str, rank: int, n: int, send: int, recv: int) -> np.ndarray:
    """The exact result on ``rank`` (small integers: exact in float32)."""
    if collective == "all_reduce":
        return (n * (n + 1) // 2 + n * (np.arange(recv) % 7)).astype(np.float32)
    if collective == "all_gather":
        return np.concatenate([send_values(q, send) for q in range(n)])
    start = rank * recv
    return (n * (n + 1) // 2 + n * ((start + np.arange(recv)) % 7)).astype(np.float32)


class Part:
    """One GPU's buffers for one collective and size."""

    def __init__(self, rank, ordinal, comm, send: int, recv: int):
        self.rank, self.comm, self.recv_count = rank, comm, recv
        with pcg.device(ordinal):
            self.stream = pcg.Stream()
            self.event = pcg.Event(timing=False)
            self.send = pcg.DeviceBuffer.from_array(send_values(rank, send))
            self.recv = pcg.DeviceBuffer(4 * recv)
            self.start, self.end = pcg.Event(timing=True), pcg.Event(timing=True)

    def close(self) -> None:
        self.stream.synchronize()
        self.send.free()
        self.recv.free()


def issue(nccl: Nccl, collective: str, parts: list[Part], count: int, times: int = 1) -> None:
    call = getattr(nccl, collective)
    for _ in range(times):
        with nccl.group_if(len(parts) > 1):
            for p in parts:
                call(p.comm, p.send.ptr, p.recv.ptr, count, p.stream.ptr)


def _sync(parts) -> None:
    for p in parts:
        p.stream.synchronize()


def _check(collective, parts, n, send, recv, what) -> None:
    for p in parts:
        got = p.recv.to_numpy(np.float32, (recv,))
        want = expected(collective, p.rank, n, send, recv)
        if not np.array_equal(got, want):
            bad = int(np.argmax(got != want))
            raise SystemExit(f"{collective} {what}, rank {p.rank}: recv[{bad}] = {got[bad]}, "
                             f"expected {want[bad]}")


def _timed(parts, before, body) -> float:
    """Milliseconds between events on the first part's stream around ``body()``, after
    ``before()`` (one collective that lines the ranks up) on every stream."""
    first = parts[0]
    _sync(parts)
    before()
    first.start.record(first.stream)
    body()
    join_streams(parts)
    first.end.record(first.stream)
    first.end.synchronize()
    return first.start.elapsed_ms(first.end)


def one_size(nccl, collective, parts_of, n, nbytes, args) -> dict:
    send, recv, count, moved = counts(collective, nbytes, n)
    parts = parts_of(send, recv)
    try:
        issue(nccl, collective, parts, count)
        _sync(parts)
        _check(collective, parts, n, send, recv, "eager")
        step = StepGraph(parts, lambda: issue(nccl, collective, parts, count, args.iters))
        for p in parts:
            p.recv.zero()
        step.launch()
        _sync(parts)
        _check(collective, parts, n, send, recv, f"graph of {args.iters}")
        once = lambda: issue(nccl, collective, parts, count)  # noqa: E731
        eager_ms = _timed(parts, once, lambda: issue(nccl, collective, parts, count, args.iters))
        graph_ms = _timed(parts, step.launch,
                          lambda: [step.launch() for _ in range(args.launches)])
        _sync(parts)
        step.close()  # before the communicators are destroyed
    finally:
        for p in parts:
            p.close()
    eager_s = eager_ms / 1e3 / args.iters
    graph_s = graph_ms / 1e3 / (args.iters * args.launches)
    row = {"collective": collective, "bytes": moved, "eager_us": eager_s * 1e6,
           "graph_us": graph_s * 1e6}
    for name, t in (("eager", eager_s), ("graph", graph_s)):
        row[f"{name}_algbw"], row[f"{name}_busbw"] = bandwidth(collective, moved, t, n)
    return row


def run_all(nccl, parts_of, n: int, args) -> list[dict]:
    rows = []
    for collective in args.collectives:
        for nbytes in args.sizes:
            rows.append(one_size(nccl, collective, parts_of, n, nbytes, args))
    return rows


def report(rows, n: int, layout: str, nccl: Nccl, args) -> None:
    say(f"{layout}; NCCL {nccl.version} through {nccl.kind}; results checked (eager and "
        f"graph); {args.iters} collectives per graph, {args.launches} launches")
    say(f"  {'collective':<15}{'bytes':>12}{'eager us':>10}{'graph us':>10}"
        f"{'eager busbw':>13}{'graph busbw':>13}  (GB/s)")
    for r in rows:
        say(f"  {r['collective']:<15}{r['bytes']:>12}{r['eager_us']:>10.1f}{r['graph_us']:>10.1f}"
            f"{r['eager_busbw']:>13.2f}{r['graph_busbw']:>13.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"world": n, "layout": layout, "nccl": f"{nccl.kind} {nccl.version}",
                       "iters": args.iters, "launches": args.launches, "results": rows}, f, indent=1)


def rank_main(rank: int, world: int, mailbox, args) -> None:
    nccl = Nccl()
    comm, ordinal = join_communicator(nccl, rank, world, launch_env()[2], mailbox)
    rows = run_all(nccl, lambda send, recv: [Part(rank, ordinal, comm, send, recv)], world, args)
    if rank == 0:
        report(rows, world, f"{world} processes, one GPU each", nccl, args)
    close_and_ok(nccl, [comm], f"rank {rank}: ")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("64K,1M,16M,128M"),
                   help="bytes per collective, comma separated (default 64K,1M,16M,128M)")
    p.add_argument("--collectives", type=lambda t: tuple(t.split(",")), default=COLLECTIVES,
                   help="comma separated, from " + ",".join(COLLECTIVES))
    p.add_argument("--iters", type=int, default=20, help="collectives per timing / per graph")
    p.add_argument("--launches", type=int, default=5, help="graph launches timed")
    p.add_argument("--json", metavar="PATH", help="write rank 0's figures here")
    add_layout_args(p)
    args = p.parse_args(argv)
    unknown = [c for c in args.collectives if c not in COLLECTIVES]
    if unknown:
        p.error(f"--collectives: unknown {', '.join(unknown)}; choose from {','.join(COLLECTIVES)}")
    if not args.sizes:
        p.error("--sizes: give at least one size")
    if args.iters < 1 or args.launches < 1:
        p.error(f"--iters and --launches must be >= 1, got {args.iters} and {args.launches}")
    return args


def one_process(nccl: Nccl, n: int, args) -> None:
    """This process drives GPUs 0 .. n-1: one communicator each, group calls."""
    comms = nccl.comm_init_all(range(n))
    rows = run_all(nccl, lambda send, recv: [Part(i, i, comms[i], send, recv) for i in range(n)],
                   n, args)
    report(rows, n, f"one process, {n} GPUs, group calls", nccl, args)
    close_and_ok(nccl, comms)


def main(argv=None) -> None:
    args = parse_args(argv)
    run_layout(args, rank_main, one_process, args)


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
