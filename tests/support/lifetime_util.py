"""Shared helpers for the lifetime, thread and exit tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import pycudagraph as pcg

ROOT = Path(__file__).resolve().parents[2]


def small_graph_works(helpers, value: float = 3.5, n: int = 256) -> None:
    """Build, instantiate and launch a fresh two-node graph and check what it wrote."""
    s = pcg.Stream()
    a, b = pcg.DeviceBuffer(4 * n), pcg.DeviceBuffer(4 * n)
    g = pcg.Graph()
    k = g.add_kernel(helpers["fill"], 1, 256, (a, value, n))
    g.add_kernel(helpers["copy"], 1, 256, (b, a, n), deps=[k])
    g.instantiate().launch(s)
    s.synchronize()
    out = b.to_numpy(np.float32)
    assert (out == np.float32(value)).all(), out[:4]


def run_python(code: str, timeout: float = 120, env_extra: dict | None = None):
    """Run ``code`` in a fresh interpreter (a crash cannot take the test run down)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
