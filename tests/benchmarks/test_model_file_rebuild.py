"""``benchmarks/model_file_rebuild.py`` (CPU, the driver stub as libcuda, in a child
process: the stub replaces the process-wide entry points): the model-shaped file's slots
are bound and each of its kernel records becomes one ``cuGraphAddKernelNode`` (the script
stops if the stub counted another number), and a row is printed per step."""

import os
import subprocess
import sys

from benchmarks.model_file_rebuild import offsets_of
from tests.support.native_driver import ROOT, stub_path


def test_the_rebuild_adds_every_record_and_prints_each_step():
    stub_path()  # skips where the stub cannot be built (no C compiler)
    out = subprocess.run([sys.executable, "benchmarks/model_file_rebuild.py", "--layers", "2",
                          "--repeat", "1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "2 layers, 4 kernel runs, 48 kernel records" in lines[0], lines[0]
    steps = [ln.strip().rsplit(None, 1) for ln in lines if ln.startswith("  ")]
    assert [s[0] for s in steps] == ["bind", "kernel runs", "of which the function records",
                                     "kernel runs, us per record"]
    assert all(float(s[1]) > 0 for s in steps)


def test_the_stand_in_parameter_offsets_align_each_parameter_as_a_kernel_does():
    assert offsets_of([8, 4, 4, 8, 1, 256]) == [(0, 8), (8, 4), (12, 4), (16, 8), (24, 1),
                                                (32, 256)]
