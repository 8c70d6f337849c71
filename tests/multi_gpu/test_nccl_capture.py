"""NCCL collectives captured into pycudagraph graphs, on 2 GPUs, run as users run them.

Each test starts the example as its own process (or two, under
``python -m torch.distributed.run``), with NVLink multicast off (``NCCL_NVLS_ENABLE=0``),
and checks that every replayed step matched. Skipped with a one-sentence reason when there
are fewer than 2 GPUs, no NCCL binding (nccl4py or CuPy's), or no launcher.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pycudagraph as pcg

ROOT = Path(__file__).resolve().parents[2]
COUNT = pcg.device_count()


def _nccl_binding() -> str | None:
    for name in ("nccl.bindings", "cupy.cuda.nccl"):
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ImportError:
            continue
    return None


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(COUNT < 2, reason=f"needs 2 GPUs; this machine has {COUNT}."),
    pytest.mark.skipif(_nccl_binding() is None,
                       reason="needs nccl4py or CuPy's NCCL module (pip install 'pycudagraph[nccl]')."),
]
needs_torchrun = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                    reason="the launcher (python -m torch.distributed.run) needs PyTorch.")


def _run(args, timeout=90):
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{args} ran past {timeout} s\n{exc.stdout}\n{exc.stderr}")
    print(proc.stdout)
    report = f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, report
    assert not any(line.startswith("SKIPPED") for line in proc.stdout.splitlines()), report
    return proc.stdout, report


TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


@needs_torchrun
def test_one_process_per_gpu_replays_kernel_allreduce_kernel_1000_times():
    out, report = _run(TORCHRUN + ["examples/multi_gpu_nccl.py", "--steps", "1000"])
    lines = out.splitlines()
    assert sum(line == "OK" for line in lines) == 2, report
    assert sum("1000 graph replays match the expected sums" in line for line in lines) == 2, report
    assert "rank 0 of 2" in out and "rank 1 of 2" in out, report


def test_one_process_drives_both_gpus_with_group_calls_in_one_graph():
    out, report = _run(["examples/multi_gpu_nccl.py", "--steps", "1000"])
    assert "one process, " in out and "group calls" in out, report
    assert "1000 graph replays match the expected sums" in out, report
    assert out.splitlines()[-1] == "OK", report


@needs_torchrun
def test_tensor_parallel_mlp_eager_and_graph_match_numpy():
    out, report = _run(TORCHRUN + ["examples/multi_gpu_tp_mlp.py", "--steps", "300"])
    assert "results match" in out and "graph replay / eager" in out, report
    assert sum(line == "OK" for line in out.splitlines()) == 2, report


def test_tensor_parallel_mlp_one_process():
    out, report = _run(["examples/multi_gpu_tp_mlp.py", "--steps", "300"])
    assert "results match" in out and out.splitlines()[-1] == "OK", report
