"""Exec reuse against a fresh instantiate (not part of the suite). Run from the repository
root on a GPU::

    python benchmarks/exec_reuse.py [--runs 3] [--nodes 1000] [--repeat 15]

Each sample builds chains of ``--nodes`` kernel nodes (a 3-argument kernel, each node
adding its own value to a buffer) through pycudagraph and times, in turn:

* ``raw instantiate``: ``cudaGraphInstantiate(g.handle, 0)`` of cuda.bindings on the chain's
  raw graph (then ``cudaGraphExecDestroy``);
* ``pcg instantiate``: ``g.instantiate()`` with no released exec to reuse
  (``pcg.exec_reuse.paused()``): the driver instantiate;
* ``pcg reuse``: ``g.instantiate()`` after an exec of an equal-topology chain (other values,
  another buffer) was released and its graph closed: one ``cuGraphExecUpdate``.

Every run prints the median of ``--repeat`` samples of each (microseconds per instantiate,
and per node), and ``reuse / raw``; the target is <= 0.5 in every run. Before timing it
checks that the reused instantiate's trace holds ``cuGraphExecUpdate`` and no
``cuGraphInstantiateWithFlags``, and that a launch of the reused exec (and of it after a
per-node ``set_arg``) gives the new chain's sum. It prints the GPU, the driver and the
versions first.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pycudagraph as pcg  # noqa: E402
from pycudagraph._cuda import ensure_device, fast, rt  # noqa: E402
from pycudagraph.graph import exec_reuse  # noqa: E402

SRC = r'''
extern "C" __global__ void add(float* y, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += v;
}
'''
N = 256


def versions() -> str:
    props = rt.cudaGetDeviceProperties(0)[1]
    name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
    driver = rt.cudaDriverGetVersion()[1]
    runtime = rt.cudaRuntimeGetVersion()[1]
    import cuda.bindings
    return (f"GPU: {name.strip(chr(0))} (sm_{props.major}{props.minor}); CUDA driver "
            f"{driver // 1000}.{driver % 1000 // 10}, runtime {runtime // 1000}."
            f"{runtime % 1000 // 10}; cuda-bindings {cuda.bindings.__version__}; Python "
            f"{platform.python_version()}; numpy {np.__version__}; pycudagraph hot calls: "
            f"{fast.native_status()}")


def chain(k, y, nodes: int, scale: float):
    g, prev, made = pcg.Graph(), None, []
    for i in range(nodes):
        prev = g.add_kernel(k, 1, N, (y, scale * (i % 5), N), deps=(prev,) if prev is not None else ())
        made.append(prev)
    return g, made


def released(k, y, nodes: int) -> None:
    """An exec of an equal-topology chain, released, its graph closed: parked."""
    g, _ = chain(k, y, nodes, 3.0)
    exe = g.instantiate()
    exe.close()
    g.close()


def check(k, nodes: int, stream) -> None:
    exec_reuse.clear()
    y_old, y = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    released(k, y_old, nodes)
    assert exec_reuse.stats()["ready"] == 1, exec_reuse.stats()
    g, made = chain(k, y, nodes, 2.0)
    with pcg.trace() as t:
        exe = g.instantiate()
    apis = [r.api for r in t.records]
    assert "cuGraphExecUpdate" in apis and "cuGraphInstantiateWithFlags" not in apis, apis
    total = 2.0 * sum(i % 5 for i in range(nodes))
    y.zero()
    y_old.zero()
    exe.launch(stream)
    stream.synchronize()
    assert (y.to_numpy(np.float32) == total).all() and not y_old.to_numpy(np.float32).any()
    mid = nodes // 2
    exe.set_arg(made[mid], "v", 100.0)
    y.zero()
    exe.launch(stream)
    stream.synchronize()
    assert (y.to_numpy(np.float32) == total - 2.0 * (mid % 5) + 100.0).all()
    exe.close()
    g.close()
    exec_reuse.clear()
    print(f"checked: the reused instantiate is one cuGraphExecUpdate; results right "
          f"({nodes} nodes, launch and set_arg)")


def sample(k, y, nodes: int) -> tuple:
    g, _ = chain(k, y, nodes, 1.0)
    raw = g.handle
    t0 = time.perf_counter_ns()
    err, e = rt.cudaGraphInstantiate(raw, 0)
    t_raw = time.perf_counter_ns() - t0
    assert int(err) == 0, err
    rt.cudaGraphExecDestroy(e)
    with exec_reuse.paused():
        t0 = time.perf_counter_ns()
        exe = g.instantiate()
        t_pcg = time.perf_counter_ns() - t0
    exe.close()
    g.close()
    exec_reuse.clear()
    released(k, y, nodes)
    g2, _ = chain(k, y, nodes, 2.0)
    t0 = time.perf_counter_ns()
    exe2 = g2.instantiate()
    t_reuse = time.perf_counter_ns() - t0
    assert exec_reuse.stats()["ready"] == 0, "the instantiate did not take the released exec"
    exe2.close()
    g2.close()
    exec_reuse.clear()
    return t_raw / 1e3, t_pcg / 1e3, t_reuse / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    try:
        ensure_device()
    except pcg.CudaNotAvailableError as exc:
        raise SystemExit(f"exec_reuse.py needs a GPU: {exc}")
    print(versions())
    pcg.exec_reuse(True)
    stream = pcg.Stream()
    k = pcg.Program(SRC, name="exec_reuse_bench.cu").compile()["add"]
    y = pcg.DeviceBuffer(4 * N)
    check(k, a.nodes, stream)
    sample(k, y, a.nodes)  # warm-up
    ratios = []
    print(f"{a.nodes} nodes, medians of {a.repeat} samples (us per instantiate; per node)")
    for run in range(1, a.runs + 1):
        got = [sample(k, y, a.nodes) for _ in range(a.repeat)]
        raw, pcg_i, reuse = (statistics.median(c) for c in zip(*got))
        ratios.append(reuse / raw)
        print(f"run {run}: raw instantiate {raw:9.1f} ({raw / a.nodes:.3f})  pcg instantiate "
              f"{pcg_i:9.1f} ({pcg_i / a.nodes:.3f}, {pcg_i / raw:.3f}x raw)  pcg reuse "
              f"{reuse:9.1f} ({reuse / a.nodes:.3f})  reuse / raw {reuse / raw:.3f}")
    good = sum(r <= 0.5 for r in ratios)
    print(f"reuse <= 0.5x a raw instantiate in {good} of {len(ratios)} runs")


if __name__ == "__main__":
    main()
