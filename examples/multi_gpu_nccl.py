"""NCCL collectives captured into a pycudagraph graph: kernel -> all-reduce -> reduce-scatter
-> all-gather -> kernel, replayed 1000 times, on 2, 4, 8 ... GPUs.

Three ways to run it, as users run NCCL programs:

* one process per GPU, started by a launcher::

      python -m torch.distributed.run --standalone --nproc_per_node=4 examples/multi_gpu_nccl.py
      mpirun -np 4 python examples/multi_gpu_nccl.py      # needs mpi4py

  Each process takes the GPU ``LOCAL_RANK``, joins one communicator
  (``ncclCommInitRank``; rank 0's ``ncclGetUniqueId`` travels through the launcher's
  store, or MPI), captures the step on its stream with ``pcg.capture`` and replays it;
* one process per GPU started here with :mod:`multiprocessing`
  (``python examples/multi_gpu_nccl.py --procs 4``), the id passed through a queue;
* one process driving several GPUs (``python examples/multi_gpu_nccl.py [--gpus 4]``,
  default all): one communicator per GPU (``ncclCommInitAll``), each collective issued
  as one group (``ncclGroupStart`` / ``ncclGroupEnd``), and everything captured into ONE
  graph that spans the GPUs (the capture stream forks to the other GPUs' streams with
  events and joins back), so a single ``cudaGraphLaunch`` runs the whole step.

The step on each rank r of n: ``prepare`` writes ``(r+1) * x + step``; ``ncclAllReduce``
sums it in place (S); ``ncclReduceScatter`` leaves rank r the sum of everybody's S over
its 1/n slice (n*S there); ``ncclAllGather`` puts the slices together again (n*S
everywhere); ``finish`` writes ``S + n*S`` and advances the step counter on the GPU, so
every replay has a new input. Every step's result is copied back and compared with the
exact value (small integers in float32): 3 eager steps, then 1000 graph replays. NCCL
comes from NVIDIA's ``nccl4py`` (``pip install "pycudagraph[nccl]"``) or CuPy's
``cupy.cuda.nccl``; without either, or with too few GPUs, the script prints SKIPPED and
exits 0. NVLink multicast stays off (``multi_gpu_launch.py``'s guard).

If CUDA refused the one-graph capture, the script says so and captures one graph per
device instead, joined by events (``StepGraph``). The other NCCL examples import
:class:`Nccl` (the NCCL calls, through nccl4py or CuPy) and :func:`run_layout` (their
``main``) from here.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

from multi_gpu_launch import (StepGraph, add_layout_args, choose_layout, join_communicator,
                              launch_env, require_multicast_off, say, start_processes)

import pycudagraph as pcg

SOURCE = r"""
extern "C" __global__ void prepare(float* buf, const float* x, const int* step, float scale, int n)
{
    float s = (float)step[0];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = scale * x[i] + s;
}

extern "C" __global__ void finish(float* out, const float* buf, const float* gathered, int* step, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = buf[i] + gathered[i];
    if (blockIdx.x == 0 && threadIdx.x == 0)
        step[0] += 1;   // the next replay sees the next step (prepare ran before this)
}
"""

class NcclUnavailable(RuntimeError):
    """Neither nccl4py nor CuPy's NCCL module can be used here."""


#: NCCL_UNIQUE_ID_BYTES: the size of an ncclUniqueId.
ID_BYTES = 128


def id_bytes(uid) -> bytes:
    """The 128 bytes of an ``ncclUniqueId`` as a binding's ``get_unique_id`` gives it: bytes
    (CuPy 14), a tuple of char values, signed or not (CuPy 13 and older), an object with
    the buffer protocol or ``__bytes__`` (nccl4py's ``UniqueId``). What travels between
    the ranks (a queue, a TCP store, MPI) is always these bytes."""
    if isinstance(uid, (tuple, list)):
        data = bytes(int(x) & 0xFF for x in uid)
    else:
        data = bytes(uid)
    if len(data) != ID_BYTES:
        raise ValueError(f"an NCCL unique id has {ID_BYTES} bytes, got {len(data)}")
    return data


def cupy_id_forms(uid: bytes):
    """The forms CuPy's ``NcclCommunicator(ndev, commId, rank)`` may take the id in, in
    the order tried: bytes (CuPy 14 and later), a tuple of signed char values (older CuPy
    where char is signed: x86-64), a tuple of unsigned ones (older CuPy on aarch64)."""
    uid = id_bytes(uid)
    yield uid
    yield tuple(b - 256 if b > 127 else b for b in uid)
    yield tuple(uid)


def cupy_communicator(make, nranks: int, uid: bytes, rank: int):
    """``make(nranks, commId, rank)`` (CuPy's ``NcclCommunicator``: ``ncclCommInitRank``)
    with the id in the first form it takes (:func:`cupy_id_forms`). A form of the wrong
    type (TypeError) or out of char's range (OverflowError) is refused by the binding
    before NCCL is called, so the next form is tried; any other error is NCCL's."""
    refused = []
    for form in cupy_id_forms(uid):
        try:
            return make(nranks, form, rank)
        except (TypeError, OverflowError) as exc:
            refused.append(f"{type(form).__name__}: {type(exc).__name__}: {exc}")
    raise TypeError("CuPy's NcclCommunicator took the unique id in none of its forms ("
                    + "; ".join(refused) + ")")


class Nccl:
    """The few NCCL calls these examples make (float32, sum), through nccl4py (preferred)
    or CuPy. Communicators are opaque values of the chosen binding; pointers and stream
    handles are plain ints (``DeviceBuffer.ptr``, ``Stream.ptr``)."""

    def __init__(self):
        errors = []
        try:
            from nccl.bindings import nccl as lib
            lib.get_version()  # loads libnccl
            self.kind, self._b = "nccl4py", lib
            self._float32, self._sum = int(lib.DataType.Float32), int(lib.RedOp.Sum)
            return
        except Exception as exc:  # noqa: BLE001 - missing package or library
            errors.append(f"nccl4py: {type(exc).__name__}: {exc}")
        try:
            from cupy.cuda import nccl as lib
            if not getattr(lib, "available", True):
                raise ImportError("CuPy was built without NCCL")
            lib.get_version()
            self.kind, self._b = "cupy", lib
            self._float32, self._sum = lib.NCCL_FLOAT32, lib.NCCL_SUM
            return
        except Exception as exc:  # noqa: BLE001
            errors.append(f"cupy.cuda.nccl: {type(exc).__name__}: {exc}")
        raise NcclUnavailable("no NCCL binding is usable (" + "; ".join(errors) + "); install "
                              "one with pip install \"pycudagraph[nccl]\" (nccl4py)")

    @property
    def version(self) -> str:
        v = int(self._b.get_version())
        major, rest = divmod(v, 10000)
        return f"{major}.{rest // 100}.{rest % 100}"

    def unique_id(self) -> bytes:
        """``ncclGetUniqueId``, as the 128 bytes the other ranks need (:func:`id_bytes`)."""
        return id_bytes(self._b.get_unique_id())

    def comm_init_rank(self, nranks: int, uid: bytes, rank: int):
        """``ncclCommInitRank`` on the current device, the id (:meth:`unique_id`'s bytes)
        handed over in the type the binding takes: CuPy's ``NcclCommunicator`` bytes
        (CuPy 14) or a tuple of char values (older CuPy; :func:`cupy_communicator`);
        nccl4py's ``comm_init_rank_scalable`` (``ncclCommInitRankScalable`` with one id)
        a bytearray of the ids, as ``nccl.core.Communicator.init`` passes them."""
        if self.kind == "cupy":
            return cupy_communicator(self._b.NcclCommunicator, nranks, uid, rank)
        return self._b.comm_init_rank_scalable(nranks, rank, 1, bytearray(id_bytes(uid)), 0)

    def comm_init_all(self, ordinals) -> list:
        """``ncclCommInitAll``: one communicator per device, rank i on ``ordinals[i]``."""
        ordinals = [int(d) for d in ordinals]
        if self.kind == "cupy":
            return list(self._b.NcclCommunicator.initAll(ordinals))
        return list(self._b.comm_init_all(len(ordinals), ordinals))

    def all_reduce(self, comm, send: int, recv: int, count: int, stream: int) -> None:
        """``ncclAllReduce`` of ``count`` float32 values, summed, on ``stream``."""
        if self.kind == "cupy":
            comm.allReduce(send, recv, count, self._float32, self._sum, stream)
        else:
            self._b.all_reduce(send, recv, count, self._float32, self._sum, comm, stream)

    def all_gather(self, comm, send: int, recv: int, sendcount: int, stream: int) -> None:
        """``ncclAllGather``: ``sendcount`` float32 values from each rank, in rank order."""
        if self.kind == "cupy":
            comm.allGather(send, recv, sendcount, self._float32, stream)
        else:
            self._b.all_gather(send, recv, sendcount, self._float32, comm, stream)

    def reduce_scatter(self, comm, send: int, recv: int, recvcount: int, stream: int) -> None:
        """``ncclReduceScatter``: the sum, each rank keeping its ``recvcount`` values."""
        if self.kind == "cupy":
            comm.reduceScatter(send, recv, recvcount, self._float32, self._sum, stream)
        else:
            self._b.reduce_scatter(send, recv, recvcount, self._float32, self._sum, comm, stream)

    @contextlib.contextmanager
    def group(self):
        """``ncclGroupStart`` ... ``ncclGroupEnd``: one process issuing for several GPUs."""
        cupy = self.kind == "cupy"
        (self._b.groupStart if cupy else self._b.group_start)()
        try:
            yield
        finally:
            (self._b.groupEnd if cupy else self._b.group_end)()

    def group_if(self, several: bool):
        """:meth:`group` when one process issues for several GPUs, else nothing."""
        return self.group() if several else contextlib.nullcontext()

    def destroy(self, comm) -> None:
        """``ncclCommDestroy`` (one call per communicator)."""
        if self.kind == "cupy":
            comm.destroy()
        else:
            self._b.comm_destroy(comm)


def run_layout(args, rank_main, one_process, *rank_args) -> None:
    """What the NCCL examples' ``main`` does once the options are parsed: refuse without a
    GPU (one sentence), print SKIPPED without an NCCL binding or enough GPUs, then run
    ``rank_main(rank, world, mailbox, *rank_args)`` as this launched rank, or in
    ``--procs`` spawned processes, or ``one_process(nccl, world, *rank_args)`` driving
    ``world`` GPUs."""
    if pcg.device_count() == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    try:
        nccl = Nccl()
    except NcclUnavailable as exc:
        say(f"SKIPPED: {exc}")
        return
    layout, env = choose_layout(args)
    if layout.skip:
        say(f"SKIPPED: {layout.skip}")
    elif layout.kind == "launched":
        rank_main(env[0], env[1], None, *rank_args)
    elif layout.kind == "spawn":
        start_processes(rank_main, layout.world, *rank_args)
    else:
        one_process(nccl, layout.world, *rank_args)


def close_and_ok(nccl: Nccl, comms, who: str = "") -> None:
    """Destroy the communicators (``ncclCommDestroy``; the graphs holding their captured
    work must be closed first), say that NVLink multicast was off in this process (``who``
    names the rank), then OK."""
    for comm in comms:
        nccl.destroy(comm)
    say(f"{who}{require_multicast_off()}")
    say("OK")


# The example -----------------------------------------------------------------------

N = 61440  # splits evenly over 2, 3, 4, 5, 6, 8, 10, 12 and 16 ranks
GRID, BLOCK = 64, 256
EAGER_STEPS, GRAPH_STEPS = 3, 1000


class Rank:
    """One GPU's part of the step: its stream, buffers, communicator and step counter."""

    def __init__(self, rank: int, world: int, ordinal: int, comm, module):
        if N % world:
            raise SystemExit(f"N={N} does not split over {world} ranks")
        self.rank, self.world = rank, world
        with pcg.device(ordinal) as dev:
            self.device = dev
            self.stream = pcg.Stream()
            self.x = pcg.DeviceBuffer.from_array(((np.arange(N) % 97) + rank).astype(np.float32))
            self.buf = pcg.DeviceBuffer(4 * N)
            self.part = pcg.DeviceBuffer(4 * N // world)  # this rank's slice after reduce-scatter
            self.gathered = pcg.DeviceBuffer(4 * N)
            self.out = pcg.DeviceBuffer(4 * N)
            self.step = pcg.DeviceBuffer.from_array(np.zeros(1, np.int32))
            self.event = pcg.Event(timing=False)  # forks/joins the capture across devices
            self.host = np.empty(N, np.float32)
        self.comm = comm
        self.prepare, self.finish = module["prepare"], module["finish"]


def issue_step(nccl: Nccl, ranks: list[Rank]) -> None:
    """prepare -> all-reduce -> reduce-scatter -> all-gather -> finish on every rank's own
    stream (eager, or captured); one NCCL group per collective when this process drives
    several GPUs."""
    several = len(ranks) > 1
    for r in ranks:
        r.prepare.launch(GRID, BLOCK, (r.buf, r.x, r.step, float(r.rank + 1), N), stream=r.stream)
    with nccl.group_if(several):
        for r in ranks:
            nccl.all_reduce(r.comm, r.buf.ptr, r.buf.ptr, N, r.stream.ptr)
    with nccl.group_if(several):
        for r in ranks:
            nccl.reduce_scatter(r.comm, r.buf.ptr, r.part.ptr, N // r.world, r.stream.ptr)
    with nccl.group_if(several):
        for r in ranks:
            nccl.all_gather(r.comm, r.part.ptr, r.gathered.ptr, N // r.world, r.stream.ptr)
    for r in ranks:
        r.finish.launch(GRID, BLOCK, (r.out, r.buf, r.gathered, r.step, N), stream=r.stream)


def expected(world: int, step: int) -> np.ndarray:
    """``S + world * S``, S the all-reduced ``prepare`` output of step ``step``."""
    i = np.arange(N, dtype=np.int64)
    total = sum((r + 1) * ((i % 97) + r) for r in range(world)) + world * step
    return ((1 + world) * total).astype(np.float32)


def check(ranks: list[Rank], world: int, step: int) -> None:
    want = expected(world, step)
    for r in ranks:
        r.out.copy_to(r.host)
        if not np.array_equal(r.host, want):
            bad = int(np.argmax(r.host != want))
            raise SystemExit(f"rank {r.rank}, step {step}: out[{bad}] = {r.host[bad]}, "
                             f"expected {want[bad]}")


def run(nccl: Nccl, ranks: list[Rank], world: int, steps: int) -> float:
    """Eager steps (the first ones set NCCL's connections up), then ``steps`` graph
    replays; each step checked. Returns the median replay in microseconds, from the
    launch to the synchronized result (``multi_gpu_tp_mlp.py`` compares eager and graph
    steps properly)."""
    graph = []
    for s in range(EAGER_STEPS):
        issue_step(nccl, ranks)
        for r in ranks:
            r.stream.synchronize()
        check(ranks, world, s)
    step = StepGraph(ranks, lambda: issue_step(nccl, ranks))
    if step.refused:
        say(f"  CUDA refused one graph across the devices ({step.refused}); using the "
            f"documented alternative")
    nodes = step.nodes()
    kinds = sorted({n.type.value for n in nodes})
    say(f"  captured: {step.form}, {len(nodes)} nodes ({', '.join(kinds)}): ncclAllReduce, "
        f"ncclReduceScatter, ncclAllGather between two kernels")
    first = ranks[0].stream
    for s in range(EAGER_STEPS, EAGER_STEPS + steps):
        t0 = time.perf_counter()
        step.launch()
        first.synchronize()
        graph.append(time.perf_counter() - t0)
        check(ranks, world, s)
    step.close()  # before the communicators are destroyed
    return 1e6 * float(np.median(graph))


def finish_run(nccl: Nccl, ranks: list[Rank], world: int, steps: int) -> None:
    graph_us = run(nccl, ranks, world, steps)
    say(f"  {EAGER_STEPS} eager steps and {steps} graph replays match the expected sums "
        f"(every step checked); median replay {graph_us:.1f} us, launch to synchronized")
    for r in ranks:
        r.stream.synchronize()
    close_and_ok(nccl, [r.comm for r in ranks], f"rank {ranks[0].rank}: " if len(ranks) == 1 else "")


def rank_main(rank: int, world: int, mailbox, steps: int) -> None:
    """One process of one GPU (from a launcher, or from ``spawn`` with its mailbox)."""
    nccl = Nccl()
    local = launch_env()[2]  # LOCAL_RANK, from the launcher or from spawn
    comm, ordinal = join_communicator(nccl, rank, world, local, mailbox)
    module = pcg.Program(SOURCE, name="multi_gpu_nccl.cu").compile()
    say(f"rank {rank} of {world}, one process per GPU (device {ordinal}); NCCL "
        f"{nccl.version} through {nccl.kind}")
    finish_run(nccl, [Rank(rank, world, ordinal, comm, module)], world, steps)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=GRAPH_STEPS, help="graph replays (default 1000)")
    add_layout_args(p)
    return p.parse_args(argv)


def one_process(nccl: Nccl, world: int, steps: int) -> None:
    """This process drives GPUs 0 .. world-1: one communicator each, group calls."""
    comms = nccl.comm_init_all(range(world))
    module = pcg.Program(SOURCE, name="multi_gpu_nccl.cu").compile()
    ranks = [Rank(i, world, i, comms[i], module) for i in range(world)]
    say(f"one process, {world} GPUs, group calls; NCCL {nccl.version} through {nccl.kind}")
    finish_run(nccl, ranks, world, steps)


def main(argv=None) -> None:
    args = parse_args(argv)
    run_layout(args, rank_main, one_process, args.steps)


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
