"""Graphs sharing an NCCL communicator on 2, 4, 8 GPUs, one process per GPU: two graphs
launched back to back on two streams 1,000 times, in ``collectives="serialize"`` and
``"refuse"`` (no hang: each run is a subprocess under a timeout; the sums are exact), and
an all-reduce inside ``cap.if_`` (taken and not taken) and ``cap.while_``: it runs right,
or the capture is refused naming CUDA's limit for conditional bodies and the node.

Each test runs ``examples/multi_gpu_nccl_order.py`` (``--procs N``); a GPU count this
machine lacks skips with "needs N GPUs; this machine has M."; so does a missing NCCL binding.
"""

import pytest

from tests.multi_gpu.gpu_counts import (assert_multicast_off_in, count_lines, needs_nccl,
                                        per_count, run_example)

pytestmark = [pytest.mark.gpu, needs_nccl]

EX = "examples/multi_gpu_nccl_order.py"
LIMIT = "CUDA allows only kernel, empty, memset, memcpy, child-graph and conditional nodes"


def _ended_ok(out: str, n: int, report: str) -> None:
    assert f"{n} processes (multiprocessing, one GPU each) exited 0" in out, report
    assert count_lines(out, "OK") == n + 1 and out.splitlines()[-1] == "OK", report
    assert_multicast_off_in(out, n, report)


@pytest.mark.parametrize("mode", ["serialize", "refuse"])
@pytest.mark.parametrize("n", per_count())
def test_two_graphs_sharing_a_communicator_on_two_streams_1000_times(n, mode):
    out, report = run_example([EX, "--case", "order", "--mode", mode, "--launches", "1000",
                               "--procs", str(n)], n, timeout=150 + 30 * n)
    lines = [ln for ln in out.splitlines() if "launches of each graph on 2 streams" in ln]
    assert len(lines) == n, report
    assert all(f"1000 launches of each graph on 2 streams, collectives={mode}: results match"
               in ln for ln in lines), report
    refused = [int(ln.split("; ")[-1].split()[0]) for ln in lines]
    if mode == "refuse":  # the first graph was held back: the second's first launch refused
        assert all(r >= 1 for r in refused), report
        assert "refused to launch graph 0x" in out and "may still run" in out, report
    else:
        assert refused == [0] * n, report
    assert sum(f"NCCL kernel node(s) found" in ln for ln in out.splitlines()) == n, report
    _ended_ok(out, n, report)


def _body_outcome(out: str, n: int, case: str, report: str) -> str:
    """'ran' when every rank ran the body right, 'refused' when every rank's capture was
    refused naming CUDA's limit and the conditional node; anything else fails."""
    ran = sum("results match" in ln and f"{case}_ body around an all-reduce" in ln
              for ln in out.splitlines())
    refused = count_lines_with(out, "refused at capture")
    if ran == n:
        return "ran"
    assert refused == n, report
    assert out.count(LIMIT) >= n and "the body of <" in out, report
    return "refused"


def count_lines_with(out: str, text: str) -> int:
    return sum(text in ln for ln in out.splitlines())


@pytest.mark.parametrize("mixing", [[], ["--no-mixing"]], ids=["mixing", "no-mixing"])
@pytest.mark.parametrize("n", per_count(counts=(2,)))
def test_all_reduce_in_an_if_body_taken_and_not_taken(n, mixing):
    out, report = run_example([EX, "--case", "if", "--replays", "6", "--procs", str(n), *mixing],
                              n, timeout=150)
    outcome = _body_outcome(out, n, "if", report)
    if outcome == "ran":
        assert count_lines_with(out, "taken 3 times, not taken 3 times; results match") == n, report
    print(f"all-reduce in an if_ body ({'NCCL_GRAPH_MIXING_SUPPORT=0' if mixing else 'default'}): "
          f"{outcome}")
    _ended_ok(out, n, report)


@pytest.mark.parametrize("n", per_count(counts=(2,)))
def test_all_reduce_in_a_while_body(n):
    out, report = run_example([EX, "--case", "while", "--replays", "3", "--procs", str(n),
                               "--no-mixing"], n, timeout=150)
    outcome = _body_outcome(out, n, "while", report)
    if outcome == "ran":
        assert count_lines_with(out, "3 passes in each of 3 replays; results match") == n, report
    print(f"all-reduce in a while_ body (NCCL_GRAPH_MIXING_SUPPORT=0): {outcome}")
    _ended_ok(out, n, report)
