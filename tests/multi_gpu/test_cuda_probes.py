"""What CUDA itself allows across two devices: the facts pycudagraph's device rules rest on.

Each probe runs in a fresh process (peer access off, and a failure cannot take the test
session down) and prints one JSON line: which call, what it returned, whether the data
came out right. The tests assert the facts the package relies on; ``python
tests/multi_gpu/test_cuda_probes.py`` prints them all. Skipped with a one-sentence reason on
machines with fewer than 2 GPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
N = 1 << 16


def _err_name(err) -> str:
    from pycudagraph._cuda import check
    if not err:
        return "success"
    if hasattr(err, "name") and not isinstance(err, int):
        return err.name
    return check.error_for("probe", err).name


# The probes (each runs alone in its own process) ---------------------------------

def probe_event_record_across_devices() -> dict:
    """cudaEventRecord of a device-0 event on a device-1 stream (our check bypassed)."""
    from pycudagraph._cuda import rt
    rt.cudaSetDevice(0)
    _, ev = rt.cudaEventCreate()
    rt.cudaSetDevice(1)
    _, s1 = rt.cudaStreamCreate()
    err, = rt.cudaEventRecord(ev, s1)
    rt.cudaGetLastError()
    return {"call": "cudaEventRecord", "result": _err_name(err)}


def _raw_launch(func: int, pack, s: int, k) -> None:
    """cuLaunchKernel of ``func`` with ``pack`` on stream ``s``, as given: fast.launch_kernel
    with no compiled view and a prepare that makes no choice of function or device."""
    from pycudagraph._cuda import fast
    from pycudagraph._cuda.context import thread_state
    fast.launch_kernel(None, 1, 32, (), s, 0, k, lambda *a: (
        func, (1, 1, 1), (32, 1, 1), 0, s, thread_state.device, pack))


def probe_launch_function_of_other_device() -> dict:
    """cuLaunchKernel of device 0's CUfunction on a device-1 stream (our choice bypassed)."""
    import pycudagraph as pcg
    from pycudagraph._cuda import rt
    k = pcg.Program(_SRC, name="probe.cu").compile()["fill"]
    f0 = k.function(0)
    with pcg.device(1):
        s1, buf = pcg.Stream(), pcg.DeviceBuffer(4 * N)
        pack = k.pack((buf, 1.0, N), 1, 32)
        try:
            _raw_launch(f0, pack, s1.ptr, k)
            result = "success"
        except pcg.CudaError as exc:
            result = exc.name
        sync, = rt.cudaStreamSynchronize(s1.ptr)
    return {"call": "cuLaunchKernel", "result": result, "sync_after": _err_name(sync)}


def probe_launch_on_a_stream_of_the_non_current_device() -> dict:
    """cuLaunchKernel of device 1's CUfunction on a device-1 stream while device 0 is
    current (the device switch Kernel.launch makes bypassed)."""
    import pycudagraph as pcg
    from pycudagraph._cuda import rt
    k = pcg.Program(_SRC, name="probe.cu").compile()["fill"]
    with pcg.device(1):
        s1, buf = pcg.Stream(), pcg.DeviceBuffer(4 * N)
        pack = k.pack((buf, 2.0, N), 1, 32)
    f1 = k.function(1)
    current = int(rt.cudaGetDevice()[1])
    try:
        _raw_launch(f1, pack, s1.ptr, k)
        result = "success"
    except pcg.CudaError as exc:
        result = exc.name
    sync, = rt.cudaStreamSynchronize(s1.ptr)
    ok = result == "success" and bool(np.all(buf.to_numpy() == 2.0))
    return {"current_device": current, "call": "cuLaunchKernel", "result": result,
            "sync_after": _err_name(sync), "data_ok": ok}


def _copy_graph(peer: bool) -> dict:
    import pycudagraph as pcg
    if peer:
        pcg.Device(0).enable_peer_access(1)
        pcg.Device(1).enable_peer_access(0)
    host = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    with pcg.device(0):
        src, s0 = pcg.DeviceBuffer.from_array(host), pcg.Stream()
    with pcg.device(1):
        dst = pcg.DeviceBuffer(4 * N)
    step = "cudaGraphAddMemcpyNode1D"
    try:
        g = pcg.Graph()
        g.add_memcpy(dst, src, 4 * N)
        step = "cudaGraphInstantiate"
        exe = g.instantiate()
        step = "cudaGraphLaunch"
        exe.launch(s0)
        s0.synchronize()
    except pcg.CudaError as exc:
        return {"refused_by": exc.api, "result": exc.name, "step": step}
    return {"result": "success", "data_ok": bool(np.array_equal(dst.to_numpy(), host))}


def probe_memcpy_node_between_devices_without_peer_access() -> dict:
    return _copy_graph(peer=False)


def probe_memcpy_node_between_devices_with_peer_access() -> dict:
    return _copy_graph(peer=True)


def probe_device_launch_of_a_two_device_graph() -> dict:
    """cudaGraphInstantiate(..., device_launch) of a graph with kernel nodes on both devices."""
    import pycudagraph as pcg
    k = pcg.Program(_SRC, name="probe.cu").compile()["fill"]
    bufs = {}
    g = pcg.Graph()
    for d in (0, 1):
        with pcg.device(d):
            bufs[d] = pcg.DeviceBuffer(4 * N)
            g.add_kernel(k, 1, 32, (bufs[d], 1.0, N))
    out = {}
    for flag in (False, True):
        try:
            g.instantiate(device_launch=flag)
            out[f"device_launch={flag}"] = "success"
        except pcg.CudaError as exc:
            out[f"device_launch={flag}"] = f"{exc.api}: {exc.name}: {exc}"
    return out


def probe_kernel_node_reading_peer_memory_without_access() -> dict:
    """What pycudagraph's check prevents: CUDA accepts the node; the launch faults?"""
    return {"note": "not run: a kernel touching unmapped peer memory faults and poisons the "
                    "context; pycudagraph raises DeviceMismatchError before it"}


_SRC = r"""
extern "C" __global__ void fill(float* y, float v, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = v;
}
"""

PROBES = {name[len("probe_"):]: fn for name, fn in dict(globals()).items()
          if name.startswith("probe_") and callable(fn)}


def run_probe(name: str) -> dict:
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, __file__, name], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"crashed": proc.returncode, "stderr": proc.stderr[-2000:]}
    return json.loads(lines[-1])


def _count() -> int:
    import pycudagraph as pcg
    return pcg.device_count()


COUNT = _count()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(COUNT < 2, reason=f"needs 2 GPUs; this machine has {COUNT}.")]


def test_cuda_refuses_recording_an_event_on_another_devices_stream():
    fact = run_probe("event_record_across_devices")
    print(fact)
    assert fact["result"] not in ("success", None), fact  # so Event.record's check mirrors CUDA


def test_cuda_refuses_a_function_of_another_device():
    fact = run_probe("launch_function_of_other_device")
    print(fact)
    assert fact.get("result") not in ("success", None), fact  # so Kernel keeps one per device


def test_launch_on_a_stream_of_the_non_current_device():
    fact = run_probe("launch_on_a_stream_of_the_non_current_device")
    print(fact)
    assert "crashed" not in fact, fact
    assert fact["result"] != "success" or fact["data_ok"], fact


def test_memcpy_node_between_devices():
    for name in ("memcpy_node_between_devices_without_peer_access",
                 "memcpy_node_between_devices_with_peer_access"):
        fact = run_probe(name)
        print(name, fact)
        assert "crashed" not in fact, fact
        assert fact["result"] != "success" or fact["data_ok"], fact  # never silently wrong


def test_device_launch_refuses_a_graph_spanning_devices():
    fact = run_probe("device_launch_of_a_two_device_graph")
    print(fact)
    assert fact["device_launch=False"] == "success", fact
    assert fact["device_launch=True"] != "success", fact


def main() -> None:
    names = sys.argv[1:] or list(PROBES)
    if len(names) == 1 and names[0] in PROBES and len(sys.argv) > 1:
        print(json.dumps(PROBES[names[0]]()))
        return
    for name in names:
        print(f"{name}: {json.dumps(run_probe(name))}")


if __name__ == "__main__":
    main()
