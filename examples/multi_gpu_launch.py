"""What the multi-GPU examples share, and a check of this machine's multi-GPU setup.

``python examples/multi_gpu_launch.py`` prints the GPUs, which pairs can reach each other
(``cudaDeviceCanAccessPeer``), the NCCL binding, the launchers usable here and the NVLink
multicast switches of this process and of processes it spawns; then OK.

The other ``multi_gpu_*`` examples import from here:

* the **multicast guard**: importing this module sets ``NCCL_NVLS_ENABLE=0``,
  ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and ``NVSHMEM_DISABLE_NVLS=1`` in
  ``os.environ`` (whatever they were) before any NCCL library is loaded, so NCCL, PyTorch
  and NVSHMEM never create NVLink multicast objects (``cuMulticastCreate``); processes
  started from here inherit it, and a process spawned by :func:`spawn` imports this
  module again and checks it (:func:`require_multicast_off`);
* the **layouts** (:func:`add_layout_args`, :func:`plan_layout`): one process driving
  ``--gpus N`` GPUs, one process per GPU started by ``--procs N`` (:mod:`multiprocessing`,
  spawn start method), or one process per GPU started by a launcher (``python -m
  torch.distributed.run``, ``mpirun``: :func:`launch_env`);
* :func:`share_unique_id`, :func:`join_communicator`: this rank's GPU and its
  ``ncclCommInitRank`` (the NCCL calls themselves: ``Nccl`` in ``multi_gpu_nccl.py``);
* :class:`StepGraph`: a step captured once across this process's GPUs and replayed;
* :func:`say`: one line per write, so the lines of several processes stay whole.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import multiprocessing
import multiprocessing.connection
import os
import queue
import socket
import sys
import time
from dataclasses import dataclass

#: The environment that keeps NVLink multicast (NVLS) off, for NCCL, PyTorch's symmetric
#: memory and NVSHMEM. Applied to os.environ when this module is imported.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def multicast_off(env=None):
    """Set the :data:`MULTICAST_OFF` variables in ``env`` (``os.environ`` by default,
    whatever they held) and return it."""
    env = os.environ if env is None else env
    env.update(MULTICAST_OFF)
    return env


def multicast_left_on(env=None) -> list[str]:
    """The :data:`MULTICAST_OFF` variables ``env`` does not set to their off value."""
    env = os.environ if env is None else env
    return [f"{k}={env.get(k, '(unset)')}" for k, v in MULTICAST_OFF.items() if env.get(k) != v]


def require_multicast_off(env=None) -> str:
    """One line saying multicast is off in ``env``; RuntimeError naming what is not."""
    wrong = multicast_left_on(env)
    if wrong:
        raise RuntimeError("NVLink multicast must stay off on this machine, but "
                           + ", ".join(wrong) + " (want " + " ".join(
                               f"{k}={v}" for k, v in MULTICAST_OFF.items()) + ")")
    return "NVLink multicast off: " + " ".join(f"{k}={v}" for k, v in MULTICAST_OFF.items())


multicast_off()  # before NCCL, PyTorch or NVSHMEM can be loaded

import pycudagraph as pcg  # noqa: E402

# Layouts ---------------------------------------------------------------------------

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


def at_least_2(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 2:
        raise argparse.ArgumentTypeError(f"a multi-GPU layout needs at least 2 GPUs, got {n}")
    return n


def add_layout_args(parser: argparse.ArgumentParser) -> None:
    """``--gpus N`` (one process, N GPUs) and ``--procs N`` (N processes, one GPU each)."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--gpus", type=at_least_2, metavar="N",
                   help="one process driving GPUs 0..N-1 (default when run plainly: all)")
    g.add_argument("--procs", type=at_least_2, metavar="N",
                   help="N processes, one GPU each, started with multiprocessing")


@dataclass(frozen=True)
class Layout:
    """How the step is spread: ``kind`` "one" (one process, ``world`` GPUs), "spawn"
    (``world`` processes started here) or "launched" (this process is one rank of
    ``world``, started by a launcher); ``skip`` says why it cannot run here."""

    kind: str
    world: int
    skip: str = ""


def plan_layout(gpus: int | None, procs: int | None, launched, count: int) -> Layout:
    """The :class:`Layout` for the options, the launcher's ``(rank, world, local)`` (or
    None) and this machine's GPU count. ValueError for options a launcher contradicts."""
    if launched is not None:
        if gpus is not None or procs is not None:
            raise ValueError("--gpus / --procs choose a layout when run plainly; under "
                             "torchrun or mpirun the launcher already started one process per GPU")
        return Layout("launched", int(launched[1]))
    if procs is not None:
        skip = "" if procs <= count else f"--procs {procs} needs {procs} GPUs; this machine has {count}"
        return Layout("spawn", procs, skip)
    n = count if gpus is None else gpus
    if gpus is None and n < 2:
        return Layout("one", n, "one process driving several GPUs needs at least 2, this "
                                f"machine has {count}")
    skip = "" if n <= count else f"--gpus {n} needs {n} GPUs; this machine has {count}"
    return Layout("one", n, skip)


def choose_layout(args) -> tuple[Layout, tuple | None]:
    """The :class:`Layout` of parsed ``--gpus`` / ``--procs`` on this machine, and the
    launcher's ``(rank, world, local)`` or None; a usage error exits with its message."""
    env = launch_env()
    try:
        return plan_layout(args.gpus, args.procs, env, pcg.device_count()), env
    except ValueError as exc:
        raise SystemExit(f"usage error: {exc}") from None


def say(text: str = "") -> None:
    """Print one line with a single write, so the lines of several processes sharing one
    pipe (a launcher's, a test's) stay whole even unbuffered (``PYTHONUNBUFFERED=1``)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def free_port() -> int:
    """A TCP port nothing listens on now (for MASTER_PORT of spawned processes)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child(target, rank: int, world: int, mailbox, args) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world))
    require_multicast_off()  # this module was imported again in the fresh process
    target(rank, world, mailbox, *args)


class Mailbox:
    """What the processes of :func:`spawn` share: ``put`` / ``get`` carry their results (what
    :func:`spawn` returns), and ``ids``, a queue of its own, carries rank 0's NCCL id
    (:func:`share_unique_id`), so a result one rank puts early is never taken for the id by
    a rank still waiting for it."""

    def __init__(self, ctx):
        self.results = ctx.Queue()
        self.ids = ctx.Queue()

    def put(self, item) -> None:
        self.results.put(item)

    def get(self, timeout: float | None = None):
        return self.results.get(timeout=timeout)


def spawn(target, nprocs: int, *args, timeout: float | None = None) -> list:
    """Run ``target(rank, nprocs, mailbox, *args)`` in ``nprocs`` fresh processes
    (:mod:`multiprocessing`, spawn start method: no CUDA state is inherited), rank r on
    GPU r, with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` set as torchrun sets them and
    ``MASTER_ADDR`` / ``MASTER_PORT`` chosen here. ``mailbox`` (a :class:`Mailbox`) is shared
    by all (:func:`share_unique_id` passes NCCL's id through its own queue). When a process fails the others
    are stopped and SystemExit names the rank and its exit code. Returns what the
    processes left in the mailbox."""
    ctx = multiprocessing.get_context("spawn")
    multicast_off()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(free_port())
    mailbox = Mailbox(ctx)
    procs = [ctx.Process(target=_child, args=(target, r, nprocs, mailbox, args), name=f"rank{r}")
             for r in range(nprocs)]
    for p in procs:
        p.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while any(p.exitcode is None for p in procs):
            bad = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if bad:
                raise SystemExit(f"rank {bad[0][0]} of {nprocs} exited {bad[0][1]}; the other "
                                 "processes were stopped")
            if deadline is not None and time.monotonic() > deadline:
                raise SystemExit(f"the {nprocs} processes ran past {timeout:.0f} s; stopped")
            multiprocessing.connection.wait([p.sentinel for p in procs], timeout=0.2)
        bad = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode != 0]
        if bad:
            raise SystemExit(f"rank {bad[0][0]} of {nprocs} exited {bad[0][1]}")
        left = []
        with contextlib.suppress(queue.Empty):
            while True:
                left.append(mailbox.get(timeout=1))
        return left
    finally:
        for p in procs:  # only the processes started here, by object
            if p.exitcode is None:
                p.terminate()
        for p in procs:
            p.join(10)


def start_processes(target, nprocs: int, *args) -> None:
    """:func:`spawn` ``nprocs`` ranks of ``target``, then say they all exited 0, and OK."""
    spawn(target, nprocs, *args)
    say(f"{nprocs} processes (multiprocessing, one GPU each) exited 0")
    say("OK")


def share_unique_id(nccl, rank: int, world: int, mailbox=None) -> bytes:
    """Rank 0's ``ncclGetUniqueId``, delivered to every rank.

    From :func:`spawn` it travels through the shared queue; under torchrun through the
    launcher's key-value store at ``MASTER_ADDR:MASTER_PORT``
    (``torch.distributed.TCPStore``); under mpirun through ``mpi4py``
    (``MPI.COMM_WORLD.bcast``). Across nodes this is the only thing the ranks exchange
    outside NCCL.
    """
    if mailbox is not None:
        ids = getattr(mailbox, "ids", mailbox)  # spawn's Mailbox: the id's own queue
        if rank == 0:
            uid = nccl.unique_id()
            for _ in range(world - 1):
                ids.put(uid)
            return uid
        return bytes(ids.get(timeout=120))
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


def join_communicator(nccl, rank: int, world: int, local: int, mailbox=None):
    """Make GPU ``local`` current and join the ``world``-rank communicator as ``rank``
    (``cudaSetDevice``, ``ncclGetUniqueId`` on rank 0, ``ncclCommInitRank``).
    Returns ``(comm, ordinal)``."""
    count = pcg.device_count()
    if local >= count:
        raise SystemExit(f"rank {rank} wants GPU {local}, this machine has {count}")
    pcg.Device(local).set_current()
    comm = nccl.comm_init_rank(world, share_unique_id(nccl, rank, world, mailbox), rank)
    return comm, local


# Capture ---------------------------------------------------------------------------

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

    def nodes(self) -> list:
        """Every node of the captured graph(s)."""
        return [n for g in self.graphs for n in g.nodes]

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


def join_streams(parts) -> None:
    """Make the first part's stream wait for every other part's stream (events)."""
    first = parts[0]
    for p in parts[1:]:
        p.event.record(p.stream)
        first.stream.wait(p.event)


# The setup check -------------------------------------------------------------------

def report_multicast(rank: int, world: int, mailbox) -> None:
    """A spawned process's answer: its rank and the multicast variables not off."""
    mailbox.put((rank, multicast_left_on()))


def main() -> None:
    count = pcg.device_count()
    if count == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    print(f"{count} GPU(s)")
    for i in range(count):
        d = pcg.Device(i)
        print(f"  {i}: {d.name} ({d.arch}, {d.total_memory >> 30} GiB)")
    if count > 1:
        print("peer access (cudaDeviceCanAccessPeer), row -> column:")
        for i in range(count):
            row = " ".join("-" if i == j else ("Y" if pcg.Device(i).can_access_peer(j) else "n")
                           for j in range(count))
            print(f"  {i}: {row}")
    from multi_gpu_nccl import Nccl, NcclUnavailable  # it imports this module first
    try:
        nccl = Nccl()
        print(f"NCCL {nccl.version} through {nccl.kind}")
    except NcclUnavailable as exc:
        print(f"NCCL: {exc}")
    for what, module in (("python -m torch.distributed.run", "torch"), ("mpirun (mpi4py)", "mpi4py")):
        print(f"launcher {what}: {'usable' if importlib.util.find_spec(module) else 'not installed'}")
    print("launcher --procs N (multiprocessing): usable")
    print(f"this process: {require_multicast_off()}")
    answers = sorted(spawn(report_multicast, 2, timeout=120))
    if [rank for rank, _ in answers] != [0, 1] or any(left for _, left in answers):
        raise SystemExit(f"spawned processes answered {answers}; want multicast off in ranks 0 and 1")
    print("2 spawned processes: NVLink multicast off in each")
    say("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
