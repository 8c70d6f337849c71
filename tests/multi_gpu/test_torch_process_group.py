"""PyTorch's NCCL process group captured by pycudagraph on 2, 4 and 8 GPUs, one process per
GPU (``python -m torch.distributed.run`` or ``multiprocessing``).

``examples/multi_gpu_torch_tp.py`` runs a tensor-parallel step (all-reduce, and
reduce-scatter + all-gather) eagerly, captured twice into graphs sharing one private
pool (``pcg.capture(..., pool=)``) and through ``pcg.graphed``; every output must equal
the unsplit model on one GPU, and tensors allocated after the captures must stay
untouched by the replays. A GPU count this machine lacks skips with "needs N GPUs; this
machine has M."; so does a missing PyTorch.
"""

import pytest

from tests.multi_gpu.gpu_counts import (assert_multicast_off_in, count_lines, needs_torch,
                                        per_count, run_example, torchrun)

pytestmark = [pytest.mark.gpu, needs_torch]

EXAMPLE = "examples/multi_gpu_torch_tp.py"


def _check(out: str, report: str, n: int) -> None:
    done = [line for line in out.splitlines() if "all equal the single-GPU reference" in line]
    assert len(done) == n, report
    assert all("2 graphs sharing one pool" in line and "later tensors untouched" in line
               and "1 capture" in line for line in done), report
    assert all(f"rank {r}:" in out for r in range(n)), report
    assert_multicast_off_in(out, n, report)


@pytest.mark.parametrize("n", per_count())
def test_process_group_under_torchrun_pool_and_graphed(n):
    out, report = run_example(torchrun(n) + [EXAMPLE], n, timeout=150 + 25 * n)
    _check(out, report, n)
    assert count_lines(out, "OK") == n, report


@pytest.mark.parametrize("n", per_count())
def test_process_group_from_multiprocessing_pool_and_graphed(n):
    out, report = run_example([EXAMPLE, "--procs", str(n)], n, timeout=150 + 25 * n)
    _check(out, report, n)
    assert f"{n} processes (multiprocessing, one GPU each) exited 0" in out, report
    assert count_lines(out, "OK") == n + 1 and out.splitlines()[-1] == "OK", report
