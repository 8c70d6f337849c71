"""Kernels made elsewhere on the GPU: Triton, Numba-CUDA, CuPy, raw handles, PTX / CUBIN /
fatbin files and C++ template instances, each launched eagerly and as a graph node,
updated with ``set_arg`` and compared with numpy (``foreign_kernel_checks.py``).

Each source runs in its own process (a crash there fails one test, not the session) and
is skipped, with its reason, when its library is not importable.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "foreign_kernel_checks.py"
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["template", "images", "raw", "cupy", "triton", "numba"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", SOURCES)
def test_foreign_kernel_source(name):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT), name], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=540)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name}: ran past 540 s\n{exc.stdout}\n{exc.stderr}")
    lines = proc.stdout.strip().splitlines()
    report = f"{name}: exit {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    if proc.returncode == 0 and lines and lines[-1].startswith(f"SKIP {name}:"):
        pytest.skip(lines[-1])
    assert proc.returncode == 0, report
    assert lines and lines[-1] == f"PASS {name}", report
