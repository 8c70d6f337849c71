"""NCCL collectives captured into pycudagraph graphs on 2, 4 and 8 GPUs, run as users run them.

Each test starts an example as its own process (one driving every GPU), as N processes
under ``python -m torch.distributed.run``, or as N processes the example starts with
``multiprocessing`` (``--procs N``); NVLink multicast is off in each (the tests check
every process says so). Results are compared with exact values or a single-GPU run
inside the examples; here the tests check what they printed. A GPU count this machine
lacks skips with "needs N GPUs; this machine has M."; so do missing NCCL bindings and,
for the launcher, PyTorch.
"""

import pytest

from tests.multi_gpu.gpu_counts import (assert_multicast_off_in, count_lines, needs_nccl,
                                        needs_torch, per_count, run_example, torchrun)

pytestmark = [pytest.mark.gpu, needs_nccl]

NCCL_EX = "examples/multi_gpu_nccl.py"
TP_EX = "examples/multi_gpu_tp_mlp.py"
COLL_EX = "examples/multi_gpu_collectives.py"
QUICK_COLL = ["--sizes", "64K,4M", "--iters", "5", "--launches", "2"]


def _replays_matched(out: str) -> int:
    return sum("1000 graph replays match the expected sums" in line for line in out.splitlines())


@pytest.mark.parametrize("n", per_count())
def test_one_process_drives_n_gpus_with_group_calls_in_one_graph(n):
    out, report = run_example([NCCL_EX, "--gpus", str(n), "--steps", "1000"], n)
    assert f"one process, {n} GPUs, group calls" in out, report
    assert f"one graph spanning {n} devices" in out or "per-device graphs" in out, report
    assert "ncclAllReduce, ncclReduceScatter, ncclAllGather" in out, report
    assert _replays_matched(out) == 1, report
    assert_multicast_off_in(out, 1, report)
    assert out.splitlines()[-1] == "OK", report


@needs_torch
@pytest.mark.parametrize("n", per_count())
def test_one_process_per_gpu_under_torchrun(n):
    out, report = run_example(torchrun(n) + [NCCL_EX, "--steps", "1000"], n)
    assert count_lines(out, "OK") == n, report
    assert _replays_matched(out) == n, report
    assert all(f"rank {r} of {n}" in out for r in range(n)), report
    assert_multicast_off_in(out, n, report)


@pytest.mark.parametrize("n", per_count())
def test_one_process_per_gpu_started_with_multiprocessing(n):
    out, report = run_example([NCCL_EX, "--procs", str(n), "--steps", "1000"], n)
    assert _replays_matched(out) == n, report
    assert f"{n} processes (multiprocessing, one GPU each) exited 0" in out, report
    assert count_lines(out, "OK") == n + 1 and out.splitlines()[-1] == "OK", report
    assert_multicast_off_in(out, n, report)


@pytest.mark.parametrize("n", per_count())
def test_tensor_parallel_mlp_one_process_equals_one_gpu(n):
    out, report = run_example([TP_EX, "--gpus", str(n), "--steps", "300"], n)
    assert f"one process, {n} GPUs" in out, report
    assert "results match" in out and "equal the single-GPU run" in out, report
    assert "graph replay / eager" in out and "CPU launch/GPU" in out, report
    assert_multicast_off_in(out, 1, report)
    assert out.splitlines()[-1] == "OK", report


@needs_torch
@pytest.mark.parametrize("n", per_count())
def test_tensor_parallel_mlp_under_torchrun_equals_one_gpu(n):
    out, report = run_example(torchrun(n) + [TP_EX, "--steps", "300"], n)
    assert f"{n} processes, one GPU each" in out, report
    assert "results match" in out and "equal the single-GPU run" in out, report
    assert count_lines(out, "OK") == n, report
    assert_multicast_off_in(out, n, report)


def _collective_rows(out: str) -> set:
    names = ("all_reduce", "all_gather", "reduce_scatter")
    return {line.split()[0] for line in out.splitlines()
            if line.strip() and line.split()[0] in names}


@pytest.mark.parametrize("n", per_count())
def test_collectives_captured_one_process(n):
    out, report = run_example([COLL_EX, "--gpus", str(n)] + QUICK_COLL, n)
    assert "results checked (eager and graph)" in out, report
    assert _collective_rows(out) == {"all_reduce", "all_gather", "reduce_scatter"}, report
    assert_multicast_off_in(out, 1, report)
    assert out.splitlines()[-1] == "OK", report


@pytest.mark.parametrize("n", per_count())
def test_collectives_captured_one_process_per_gpu(n):
    out, report = run_example([COLL_EX, "--procs", str(n)] + QUICK_COLL, n)
    assert f"{n} processes, one GPU each" in out, report
    assert "results checked (eager and graph)" in out, report
    assert _collective_rows(out) == {"all_reduce", "all_gather", "reduce_scatter"}, report
    assert count_lines(out, "OK") == n + 1, report
    assert_multicast_off_in(out, n, report)
