"""``benchmarks/graph_files_startup.py``'s timing (CPU): a round runs every row once in
turn, the first round is a warm-up, each row's median is its own, what a row returns is
closed after its clock stops, and exec reuse is paused while a row runs (a fresh process
has no released exec to update)."""

from benchmarks import graph_files_startup as startup
from pycudagraph.graph import exec_reuse


class Closing:
    def __init__(self, log, i):
        self.log, self.i = log, i

    def close(self):
        self.log.append(("closed", self.i))


def test_rows_run_in_turn_with_exec_reuse_paused():
    log = []

    def row(i):
        def run():
            log.append((i, getattr(exec_reuse._local, "paused", 0)))
            return [Closing(log, i)]
        return run

    medians = startup.timed_rows([row(0), row(1), row(2)], 3)
    assert len(medians) == 3 and all(m >= 0 for m in medians)
    runs = [e for e in log if e[0] != "closed"]
    assert [i for i, _ in runs] == [0, 1, 2] * 4  # a warm-up round, then 3
    assert all(p == 1 for _, p in runs)  # paused inside each row
    assert getattr(exec_reuse._local, "paused", 0) == 0  # and not after
    assert log[:2] == [(0, 1), ("closed", 0)]  # closed before the next row starts
