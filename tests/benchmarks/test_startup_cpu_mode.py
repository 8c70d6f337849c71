"""``benchmarks/graph_files_startup.py --cpu`` (CPU, the driver stub as libcuda, in a child
process: the stub replaces the process-wide entry points): a row per node count and file
format, every column a measurement, and after the rebuild the making of every node's object, for
binary records only (format 1 makes each node's object as it adds it)."""

import os
import subprocess
import sys

from tests.support.native_driver import ROOT, stub_path


def test_cpu_mode_prints_a_row_per_size_and_format_with_the_objects_made_later():
    stub_path()  # skips where the stub cannot be built (no C compiler)
    out = subprocess.run([sys.executable, "benchmarks/graph_files_startup.py", "--cpu",
                          "--repeat", "0"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    header = next(ln.split() for ln in lines if ln.split()[:2] == ["nodes", "format"])
    assert header[-1] == "objects"
    rows = [ln.split() for ln in lines if ln.split() and ln.split()[0] in ("1000", "10000")]
    assert [(r[0], r[1]) for r in rows] == [("1000", "1"), ("1000", "2"),
                                           ("10000", "1"), ("10000", "2")]
    for r in rows:
        assert len(r) == 2 + 10  # file KiB ... us/node, objects
        kib, _container, _json, _check, decode, rebuild, _, total, _ = map(float, r[2:-1])
        assert kib > 0 and decode > 0 and rebuild > 0 and total > 0
        # (the container column is decode less JSON and check, each timed on its own: a
        # difference of measurements, which may come out below zero on a noisy machine)
        if r[1] == "1":
            assert r[-1] == "n/a"
        else:
            assert float(r[-1]) > 0
