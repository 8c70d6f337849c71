"""What the multi-GPU tests share: the GPU counts they are parameterised by (2, 4, 8), the
skip that names what is missing, and running an example as its own process(es) with
NVLink multicast off.

Test ids end in the count (``[2gpus]``, ``[4gpus]``, ``[8gpus]``), so ``-k 8gpus`` runs
one count. A count this machine lacks skips with "needs N GPUs; this machine has M."
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pycudagraph as pcg

ROOT = Path(__file__).resolve().parents[2]
COUNTS = (2, 4, 8)
HAVE = pcg.device_count()
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def skip_reason(n: int, have: int) -> str:
    return f"needs {n} GPUs; this machine has {have}."


def per_count(counts=COUNTS, have: int | None = None) -> list:
    """``pytest.param(n)`` for each count, skipped where this machine has fewer GPUs."""
    have = HAVE if have is None else have
    return [pytest.param(n, id=f"{n}gpus",
                         marks=pytest.mark.skipif(have < n, reason=skip_reason(n, have)))
            for n in counts]


def nccl_binding() -> str | None:
    """The NCCL binding the examples would use (nccl4py, else CuPy's), or None."""
    for name in ("nccl.bindings", "cupy.cuda.nccl"):
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ImportError:
            continue
    return None


HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_nccl = pytest.mark.skipif(nccl_binding() is None, reason="needs nccl4py or CuPy's NCCL "
                                "module (pip install 'pycudagraph[nccl]').")
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch (the launcher python -m "
                                 "torch.distributed.run, or its process group).")


def child_env() -> dict:
    """This environment with multicast forced off and the checkout importable."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **MULTICAST_OFF)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def torchrun(n: int) -> list[str]:
    return ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}"]


def run_example(args, n: int, timeout: float | None = None) -> tuple[str, str]:
    """Run ``python *args`` from the repository root; (stdout, a report for failures).
    Fails on a non-zero exit, a time-out, or a SKIPPED line (the test's own skips decide
    what may be missing)."""
    timeout = timeout or 90 + 20 * n
    try:
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=child_env(),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{args} ran past {timeout} s\n{exc.stdout}\n{exc.stderr}")
    print(proc.stdout)
    report = (f"{args} exited {proc.returncode}\n--- stdout ---\n{proc.stdout}\n"
              f"--- stderr ---\n{proc.stderr[-4000:]}")
    assert proc.returncode == 0, report
    assert not any(line.startswith("SKIPPED") for line in proc.stdout.splitlines()), report
    return proc.stdout, report


def count_lines(out: str, text: str) -> int:
    return sum(line == text for line in out.splitlines())


def assert_multicast_off_in(out: str, processes: int, report: str) -> None:
    """Every one of ``processes`` printed that NVLink multicast was off in it."""
    said = sum("NVLink multicast off: NCCL_NVLS_ENABLE=0" in line for line in out.splitlines())
    assert said == processes, f"{said} of {processes} processes reported multicast off\n{report}"


class _OneIdOnRankZero:
    """Stands in for :class:`Nccl` in :func:`share_id_probe`: only rank 0 may make an id."""

    def __init__(self, rank: int):
        self.rank = rank

    def unique_id(self) -> bytes:
        assert self.rank == 0, f"rank {self.rank} made an id"
        return bytes(range(128))


def share_id_probe(rank: int, world: int, mailbox) -> None:
    """A spawned rank (``multi_gpu_launch.spawn``) receives rank 0's NCCL id through the
    mailbox and answers with it; every other rank has put a message of its own in the
    mailbox before rank 0 shares the id, and none may be taken for it."""
    import time

    from multi_gpu_launch import share_unique_id
    if rank:  # a message of this rank's own is in the mailbox before rank 0's id is
        mailbox.put(("early", rank))
    else:
        time.sleep(0.5)
    uid = share_unique_id(_OneIdOnRankZero(rank), rank, world, mailbox)
    mailbox.put(("id", rank, os.environ["LOCAL_RANK"], uid))
