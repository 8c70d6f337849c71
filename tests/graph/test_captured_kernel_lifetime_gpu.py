"""A captured graph keeps the kernels it launches, and so their module's library, for as long
as it and its execs live (GPU, in a child process): kernels compiled in a function, captured
and instantiated there, every reference to them dropped and the garbage collected; the
module is still there, the exec computes the right result, and the module goes once the
exec and its graph have gone. The compiled launch route once kept only the arguments, and
``cudaLibraryUnload`` ran while the graph and its exec still named the kernel's function."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import gc
import weakref
import numpy as np
import pycudagraph as pcg
from pycudagraph._cuda import fast

SRC = r"""
extern "C" __global__ void scale(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
"""
N = 4096
s = pcg.Stream()
y = pcg.DeviceBuffer(4 * N)


def captured(a):
    mod = pcg.Program(SRC, name="captured_lifetime.cu").compile()  # a module of its own
    k = mod["scale"]
    with pcg.capture(s) as cap:
        for _ in range(3):
            k.launch(N // 256, 256, (y, a, N), stream=s)
    return cap.graph.instantiate(), weakref.ref(mod)


print("ROUTE", fast.native_status())
for rnd in range(4):
    exe, mod = captured(2.0)
    gc.collect()  # the kernel and its module are a cycle: collected here unless the graph keeps them
    assert mod() is not None, f"round {rnd}: the captured graph let its kernel's module go"
    y.copy_from(np.ones(N, np.float32))
    exe.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(y.to_numpy(np.float32), np.full(N, 8.0, np.float32))
    exe.close()
    del exe
    gc.collect()
    assert mod() is None, f"round {rnd}: the module outlived the exec and graph that kept it"
print("KEPT while used, gone after")
'''


@pytest.mark.gpu
@pytest.mark.parametrize("native", [True, False], ids=["compiled", "ctypes"])
def test_a_captured_graph_keeps_its_kernels_module_while_it_and_its_exec_live(tmp_path, native):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONFAULTHANDLER="1")
    env.pop("PYCUDAGRAPH_NO_NATIVE", None)
    if not native:
        env["PYCUDAGRAPH_NO_NATIVE"] = "1"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-4000:]}"
    assert "KEPT while used, gone after" in out, out
    if native:
        assert "ROUTE compiled" in out, out  # the route whose launches make no ArgPack
