"""NVTX wrapping: off by default (nothing wrapped), on with PYCUDAGRAPH_NVTX=1 (GPU)."""

import subprocess
import sys

import pytest

import pycudagraph as pcg
from pycudagraph.runtime import nvtx


def test_off_by_default_nothing_wrapped():
    assert not nvtx.wrapped(pcg.GraphExec.launch)
    assert not nvtx.wrapped(len)  # a builtin: not weakly referable, never wrapped


def test_install_wraps_each_method_once_and_ranges_pair():
    """With a stand-in NVTX binding, in a fresh process: the methods are wrapped, a second
    install wraps nothing twice, and a wrapped call pushes and pops its range (no GPU)."""
    code = ("from pycudagraph.runtime import nvtx\n"
            "import pycudagraph as pcg\n"
            "calls = []\n"
            "nvtx._push_pop = lambda: (calls.append, lambda: calls.append('pop'))\n"
            "assert nvtx.install(force=True) and nvtx.wrapped(pcg.GraphExec.launch)\n"
            "first = pcg.GraphExec.launch\n"
            "nvtx.enabled = False\n"
            "assert nvtx.install(force=True) and pcg.GraphExec.launch is first\n"
            "class E:\n"
            "    pass\n"
            "try:\n"
            "    pcg.GraphExec.launch(E())\n"
            "except Exception:\n"
            "    pass\n"
            "assert calls == ['pycudagraph cudaGraphLaunch', 'pop'], calls\n"
            "print('wrapped once')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and "wrapped once" in out.stdout, out.stderr


@pytest.mark.gpu
def test_ranges_wrap_and_graph_still_runs():
    code = ("import pycudagraph as pcg, numpy as np\n"
            "from pycudagraph.runtime import nvtx\n"
            "assert nvtx.wrapped(pcg.GraphExec.launch)\n"
            "k = pcg.Module.from_file('helpers.cu')['fill']\n"
            "b = pcg.DeviceBuffer(4); s = pcg.Stream(); g = pcg.Graph()\n"
            "g.add_kernel(k, 1, 1, (b, 3.0, 1)); e = g.instantiate(); e.upload(s); e.launch(s)\n"
            "s.synchronize(); assert b.to_numpy()[0] == 3.0; print('nvtx ok')\n")
    import os
    env = dict(os.environ, PYCUDAGRAPH_NVTX="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "nvtx ok" in out.stdout, out.stderr
