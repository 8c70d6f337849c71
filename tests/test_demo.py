"""The demo: model output without a GPU (CPU), a full run that matches numpy (GPU)."""

import subprocess
import sys
from pathlib import Path

import pytest

from pycudagraph import _cuda

ROOT = Path(__file__).resolve().parent.parent


def run(*args):
    return subprocess.run([sys.executable, "-m", "pycudagraph", "demo", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_demo_without_gpu_says_so_and_models():
    if _cuda.cuda_available():
        pytest.skip("this machine has a GPU; the no-GPU message is not shown here")
    out = run()
    assert out.returncode == 1 and "no NVIDIA GPU" in out.stderr and "Traceback" not in out.stderr
    out = run("--model", "--iters", "100")
    assert out.returncode == 0
    assert "MODEL (not a measurement" in out.stdout and "eager  = N x" in out.stdout


@pytest.mark.gpu
def test_demo_runs_and_matches(tmp_path):
    out = run("--iters", "200", "--out", str(tmp_path), "--trace")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(" ok") == 4 and "MISMATCH" not in out.stdout
    assert "cuGraphAddKernelNode(&n0" in out.stdout
    assert (tmp_path / "mlp_graph.dot").read_text().count("linear_bias_relu") == 3
