"""NVTX wrapping: off by default (nothing wrapped), on with PYCUDAGRAPH_NVTX=1 (GPU)."""

import subprocess
import sys

import pytest

import pycudagraph as pcg


def test_off_by_default_nothing_wrapped():
    assert not getattr(pcg.GraphExec.launch, "_pycudagraph_nvtx", False)


@pytest.mark.gpu
def test_ranges_wrap_and_graph_still_runs():
    code = ("import pycudagraph as pcg, numpy as np\n"
            "assert pcg.GraphExec.launch._pycudagraph_nvtx\n"
            "k = pcg.Module.from_file('helpers.cu')['fill']\n"
            "b = pcg.DeviceBuffer(4); s = pcg.Stream(); g = pcg.Graph()\n"
            "g.add_kernel(k, 1, 1, (b, 3.0, 1)); e = g.instantiate(); e.upload(s); e.launch(s)\n"
            "s.synchronize(); assert b.to_numpy()[0] == 3.0; print('nvtx ok')\n")
    import os
    env = dict(os.environ, PYCUDAGRAPH_NVTX="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "nvtx ok" in out.stdout, out.stderr
