"""NCCL all-reduce captured into a pycudagraph graph: kernel -> all-reduce -> kernel, replayed.

Two ways to run it, as users run NCCL programs:

* one process per GPU, started by a launcher::

      python -m torch.distributed.run --standalone --nproc_per_node=2 examples/multi_gpu_nccl.py
      mpirun -np 2 python examples/multi_gpu_nccl.py      # needs mpi4py

  Each process takes the GPU ``LOCAL_RANK``, joins one communicator
  (``ncclCommInitRank``; rank 0's ``ncclGetUniqueId`` travels through the launcher's
  store, or MPI), captures ``prepare -> ncclAllReduce -> finish`` on its stream with
  ``pcg.capture`` and replays the graph;
* one process driving every GPU (``python examples/multi_gpu_nccl.py``): one
  communicator per GPU (``ncclCommInitAll``), the all-reduces issued as one group
  (``ncclGroupStart`` / ``ncclGroupEnd``), and everything captured into ONE graph that
  spans the GPUs (the capture stream forks to the other GPUs' streams with events and
  joins back), so a single ``cudaGraphLaunch`` runs the whole step.

A step counter on the GPU changes the input of every replay, and every step's result is
copied back and compared with the exact value (small integers in float32): 3 eager steps,
then 1000 graph replays. NCCL comes from NVIDIA's ``nccl4py`` (``pip install
"pycudagraph[nccl]"``) or CuPy's ``cupy.cuda.nccl``; without either, or with fewer than
2 GPUs in the one-process mode, the script prints SKIPPED and exits 0. NVLink multicast
stays off (``NCCL_NVLS_ENABLE=0``) whatever the environment says.

If CUDA refused the one-graph capture, the script says so and captures one graph per
device instead, joined by events (:class:`StepGraph`). The :class:`Nccl` wrapper,
:func:`launch_env`, :func:`share_unique_id` and :class:`StepGraph` here are used by
``multi_gpu_tp_mlp.py`` too.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import time

import numpy as np

# Before NCCL is loaded: NVLink multicast (NVLS) stays off on shared machines.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import pycudagraph as pcg  # noqa: E402

SOURCE = r"""
extern "C" __global__ void prepare(float* buf, const float* x, const int* step, float scale, int n)
{
    float s = (float)step[0];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = scale * x[i] + s;
}

extern "C" __global__ void finish(float* out, const float* buf, int* step, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = 2.0f * buf[i];
    if (blockIdx.x == 0 && threadIdx.x == 0)
        step[0] += 1;   // the next replay sees the next step (prepare ran before this)
}
"""

N = 1 << 16
GRID, BLOCK = 64, 256
EAGER_STEPS, GRAPH_STEPS = 3, 1000


class NcclUnavailable(RuntimeError):
    """Neither nccl4py nor CuPy's NCCL module can be used here."""


class Nccl:
    """The few NCCL calls these examples make, through nccl4py (preferred) or CuPy.

    Communicators are opaque values of the chosen binding; pointers and stream
    handles are plain ints (``DeviceBuffer.ptr``, ``Stream.ptr``).
    """

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
        """``ncclGetUniqueId``, as the 128 bytes the other ranks need."""
        uid = self._b.get_unique_id()
        if self.kind == "cupy":
            return bytes(x & 0xFF for x in uid)
        return bytes(uid)

    def comm_init_rank(self, nranks: int, uid: bytes, rank: int):
        """``ncclCommInitRank`` on the current device."""
        if self.kind == "cupy":
            signed = tuple(b - 256 if b > 127 else b for b in uid)
            return self._b.NcclCommunicator(nranks, signed, rank)
        return self._b.comm_init_rank_scalable(nranks, rank, 1, bytearray(uid), 0)

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

    @contextlib.contextmanager
    def group(self):
        """``ncclGroupStart`` ... ``ncclGroupEnd``: one process issuing for several GPUs."""
        cupy = self.kind == "cupy"
        (self._b.groupStart if cupy else self._b.group_start)()
        try:
            yield
        finally:
            (self._b.groupEnd if cupy else self._b.group_end)()

    def destroy(self, comm) -> None:
        """``ncclCommDestroy`` (as NCCL's one-thread, several-GPU example ends, one call per
        communicator)."""
        if self.kind == "cupy":
            comm.destroy()
        else:
            self._b.comm_destroy(comm)


def launch_env() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) set by torchrun or mpirun, or None when run plainly."""
    e = os.environ
    for rank, size, local in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                              ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_LOCAL_RANK"),
                              ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")):
        if rank in e and size in e:
            r = int(e[rank])
            return r, int(e[size]), int(e.get(local, r))
    return None


def share_unique_id(nccl: Nccl, rank: int, world: int) -> bytes:
    """Rank 0's ``ncclGetUniqueId``, delivered to every rank.

    Under torchrun it travels through the launcher's key-value store at
    ``MASTER_ADDR:MASTER_PORT`` (``torch.distributed.TCPStore``); under mpirun through
    ``mpi4py`` (``MPI.COMM_WORLD.bcast``). Across nodes this is the only thing the ranks
    exchange outside NCCL.
    """
    e = os.environ
    if "MASTER_ADDR" in e and "MASTER_PORT" in e:
        from datetime import timedelta

        from torch.distributed import TCPStore
        agent_hosts = e.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        store = TCPStore(e["MASTER_ADDR"], int(e["MASTER_PORT"]), world_size=world,
                         is_master=(rank == 0 and not agent_hosts), timeout=timedelta(seconds=120))
        key = f"pycudagraph/nccl-id/{e.get('TORCHELASTIC_RUN_ID', 'run')}/" \
              f"{e.get('TORCHELASTIC_RESTART_COUNT', '0')}/{e.get('PCG_NCCL_ID_KEY', '')}"
        if rank == 0:
            uid = nccl.unique_id()
            store.set(key, uid)
            return uid
        return bytes(store.get(key))
    from mpi4py import MPI
    return MPI.COMM_WORLD.bcast(nccl.unique_id() if rank == 0 else None, root=0)


class Rank:
    """One GPU's part of the step: its stream, buffers, communicator and step counter."""

    def __init__(self, rank: int, ordinal: int, comm, module):
        self.rank = rank
        with pcg.device(ordinal) as dev:
            self.device = dev
            self.stream = pcg.Stream()
            self.x_host = ((np.arange(N) % 97) + rank).astype(np.float32)
            self.x = pcg.DeviceBuffer.from_array(self.x_host)
            self.buf = pcg.DeviceBuffer(4 * N)
            self.out = pcg.DeviceBuffer(4 * N)
            self.step = pcg.DeviceBuffer.from_array(np.zeros(1, np.int32))
            self.event = pcg.Event(timing=False)  # forks/joins the capture across devices
            self.host = np.empty(N, np.float32)
        self.comm = comm
        self.prepare, self.finish = module["prepare"], module["finish"]


def issue_step(nccl: Nccl, ranks: list[Rank]) -> None:
    """prepare -> all-reduce -> finish on every rank's own stream (eager, or captured)."""
    for r in ranks:
        r.prepare.launch(GRID, BLOCK, (r.buf, r.x, r.step, float(r.rank + 1), N), stream=r.stream)
    group = nccl.group() if len(ranks) > 1 else contextlib.nullcontext()
    with group:
        for r in ranks:
            nccl.all_reduce(r.comm, r.buf.ptr, r.buf.ptr, N, r.stream.ptr)
    for r in ranks:
        r.finish.launch(GRID, BLOCK, (r.out, r.buf, r.step, N), stream=r.stream)


class StepGraph:
    """The step captured once and replayed: one graph spanning this process's devices, or,
    if CUDA refuses that capture, one graph per device joined by events.

    ``parts`` are objects with ``.stream`` and ``.event`` (an event of the same device),
    one per device; ``issue()`` issues the step's work on their streams. For one graph
    the capture begins on the first part's stream, forks to the others (an event
    recorded there, waited on by each other stream) and joins them back (each other
    part's event, waited on by the first). :meth:`launch` is one ``cudaGraphLaunch``
    then; in the per-device form it launches each graph on its own stream and makes the
    first stream wait for the others' events. Either way, synchronizing the first part's
    stream waits for the whole step.
    """

    def __init__(self, parts, issue):
        self.parts = list(parts)
        self.refused = None
        try:
            graphs = [self._capture_one(issue)]
            self.form = "one graph" + (f" spanning {len(self.parts)} devices" if len(self.parts) > 1 else "")
        except pcg.CaptureError as exc:
            if len(self.parts) == 1:
                raise
            self.refused = str(exc)
            graphs = self._capture_per_device(issue)
            self.form = f"{len(graphs)} per-device graphs joined by events"
        self.graphs = graphs
        self.execs = [g.instantiate() for g in graphs]

    def _capture_one(self, issue) -> pcg.Graph:
        first, others = self.parts[0], self.parts[1:]
        with pcg.capture(first.stream) as cap:
            if others:
                first.event.record(first.stream)
                for p in others:
                    p.stream.wait(first.event)
            issue()
            for p in others:
                p.event.record(p.stream)
                first.stream.wait(p.event)
        return cap.graph

    def _capture_per_device(self, issue) -> list:
        with contextlib.ExitStack() as stack:
            caps = [stack.enter_context(pcg.capture(p.stream)) for p in self.parts]
            issue()
        return [c.graph for c in caps]

    def close(self) -> None:
        """Destroy the execs, then the graphs (``cudaGraphExecDestroy``, ``cudaGraphDestroy``).

        Do this before ``ncclCommDestroy``: NCCL waits until no graph holds a captured
        operation of the communicator, so a graph still alive makes it wait forever.
        """
        execs, self.execs = self.execs, []
        while execs:
            execs.pop().close()
        gc.collect()  # no exec object left: a graph keeps its raw graph while one lives
        graphs, self.graphs = self.graphs, []
        while graphs:
            graphs.pop().close()
        gc.collect()

    def launch(self) -> None:
        first = self.parts[0]
        if len(self.execs) == 1:
            self.execs[0].launch(first.stream)
            return
        for exe, p in zip(self.execs, self.parts):
            exe.launch(p.stream)
        for p in self.parts[1:]:
            p.event.record(p.stream)
            first.stream.wait(p.event)


def expected(world: int, step: int) -> np.ndarray:
    total = sum((r + 1) * ((np.arange(N) % 97) + r) for r in range(world)) + world * step
    return (2.0 * total).astype(np.float32)


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
        print(f"  CUDA refused one graph across the devices ({step.refused}); using the "
              f"documented alternative")
    nodes = [n for g in step.graphs for n in g.nodes]
    kinds = sorted({n.type.value for n in nodes})
    print(f"  captured: {step.form}, {len(nodes)} nodes ({', '.join(kinds)})")
    first = ranks[0].stream
    for s in range(EAGER_STEPS, EAGER_STEPS + steps):
        t0 = time.perf_counter()
        step.launch()
        first.synchronize()
        graph.append(time.perf_counter() - t0)
        check(ranks, world, s)
    step.close()  # before the communicators are destroyed
    return 1e6 * float(np.median(graph))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=GRAPH_STEPS, help="graph replays (default 1000)")
    args = p.parse_args(argv)
    if pcg.device_count() == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    try:
        nccl = Nccl()
    except NcclUnavailable as exc:
        print(f"SKIPPED: {exc}")
        return
    env = launch_env()
    if env is None:  # one process, every GPU
        count = pcg.device_count()
        if count < 2:
            print(f"SKIPPED: one process driving several GPUs needs at least 2, this machine has {count}")
            return
        world, mode = count, f"one process, {count} GPUs, group calls"
        comms = nccl.comm_init_all(range(count))
        module = pcg.Program(SOURCE, name="multi_gpu_nccl.cu").compile()
        ranks = [Rank(i, i, comms[i], module) for i in range(count)]
    else:
        rank, world, local = env
        ordinal = local % max(pcg.device_count(), 1)
        pcg.Device(ordinal).set_current()
        mode = f"rank {rank} of {world}, one process per GPU (device {ordinal})"
        uid = share_unique_id(nccl, rank, world)
        comm = nccl.comm_init_rank(world, uid, rank)
        module = pcg.Program(SOURCE, name="multi_gpu_nccl.cu").compile()
        ranks = [Rank(rank, ordinal, comm, module)]
    print(f"{mode}; NCCL {nccl.version} through {nccl.kind}; NCCL_NVLS_ENABLE="
          f"{os.environ['NCCL_NVLS_ENABLE']}")
    graph_us = run(nccl, ranks, world, args.steps)
    print(f"  {EAGER_STEPS} eager steps and {args.steps} graph replays match the expected sums "
          f"(every step checked); median replay {graph_us:.1f} us, launch to synchronized")
    for r in ranks:
        r.stream.synchronize()
        nccl.destroy(r.comm)
    print("OK")


if __name__ == "__main__":
    try:
        main()
    except pcg.CudaNotAvailableError as exc:  # no GPU: one sentence, no traceback
        raise SystemExit(f"This example needs an NVIDIA GPU; none is usable here ({exc.name}).")
