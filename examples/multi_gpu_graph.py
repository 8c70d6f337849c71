"""One CUDA graph that drives two GPUs: kernel nodes on each, peer copies between them.

The graph, built node by node::

    device 0: y0 = 2*x0 + 1 ----> copy y0 -> t1 (peer copy to device 1) --.
                          \\                                              v
                           `--------------------------------------> device 1: z1 = y1 + t1
    device 1: y1 = 3*x1 - 1 ----> copy y1 -> t0 (peer copy to device 0) --.
                          \\                                              v
                           `--------------------------------------> device 0: z0 = y0 + t0

A kernel node runs on the device that is current when it is added (``with
pcg.device(i):``, ``cudaSetDevice``): its ``CUDA_KERNEL_NODE_PARAMS`` names the kernel's
``CUfunction`` in that device's context (``cuKernelGetFunction``). The copies are 1-D
memcpy nodes between the two devices' buffers (``cudaGraphAddMemcpyNode1D``, unified
addressing tells the driver where each pointer lives), and the edges cross devices: z0 on
device 0 waits for a kernel on device 1. One ``cudaGraphInstantiate``, one
``cudaGraphLaunch`` per run; both results are checked against numpy.

If CUDA refuses one of these calls the script names it and runs the documented
alternative instead: one graph per device, joined by events (``cudaEventRecord`` on one
device's stream, ``cudaStreamWaitEvent`` on the other's). With fewer than 2 GPUs it
prints SKIPPED and exits 0.
"""

from __future__ import annotations

import numpy as np

import pycudagraph as pcg

SOURCE = r"""
extern "C" __global__ void affine(float* y, const float* x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + b;
}

extern "C" __global__ void add(float* z, const float* p, const float* q, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        z[i] = p[i] + q[i];
}
"""

N = 1 << 20
GRID, BLOCK = 256, 256
NBYTES = 4 * N


class Side:
    """One device's buffers: input x, its affine result y, the copy t from the other
    device, and the sum z."""

    def __init__(self, ordinal: int, x: np.ndarray):
        with pcg.device(ordinal) as dev:
            self.device = dev
            self.stream = pcg.Stream()
            self.x = pcg.DeviceBuffer.from_array(x)
            self.y, self.t, self.z = (pcg.DeviceBuffer(NBYTES) for _ in range(3))
            self.event = pcg.Event(timing=False)


def build_one_graph(affine, add, d0: Side, d1: Side) -> pcg.Graph:
    """The whole computation as one graph spanning both devices."""
    g = pcg.Graph()
    with pcg.device(d0.device):
        y0 = g.add_kernel(affine, GRID, BLOCK, (d0.y, d0.x, 2.0, 1.0, N))
    with pcg.device(d1.device):
        y1 = g.add_kernel(affine, GRID, BLOCK, (d1.y, d1.x, 3.0, -1.0, N))
    to1 = g.add_memcpy(d1.t, d0.y, NBYTES, deps=(y0,))  # device 0 -> device 1
    to0 = g.add_memcpy(d0.t, d1.y, NBYTES, deps=(y1,))  # device 1 -> device 0
    with pcg.device(d0.device):
        g.add_kernel(add, GRID, BLOCK, (d0.z, d0.y, d0.t, N), deps=(y0, to0))
    with pcg.device(d1.device):
        g.add_kernel(add, GRID, BLOCK, (d1.z, d1.y, d1.t, N), deps=(y1, to1))
    return g


def run_per_device_graphs(affine, add, d0: Side, d1: Side) -> None:
    """The documented alternative: one graph per device, joined by events.

    Phase 1 on each device (affine), an event per device; each device's stream waits for
    the other's event, then phase 2 on each device (peer copy in, add).
    """
    phase1, phase2 = {}, {}
    for me, other in ((d0, d1), (d1, d0)):
        with pcg.device(me.device):
            g = pcg.Graph()
            g.add_kernel(affine, GRID, BLOCK, (me.y, me.x, *((2.0, 1.0) if me is d0 else (3.0, -1.0)), N))
            phase1[me] = g.instantiate()
            g = pcg.Graph()
            cp = g.add_memcpy(me.t, other.y, NBYTES)
            g.add_kernel(add, GRID, BLOCK, (me.z, me.y, me.t, N), deps=(cp,))
            phase2[me] = g.instantiate()
    for side in (d0, d1):
        phase1[side].launch(side.stream)
        side.event.record(side.stream)
    for me, other in ((d0, d1), (d1, d0)):
        me.stream.wait(other.event)
        phase2[me].launch(me.stream)
    d0.stream.synchronize()
    d1.stream.synchronize()


def main() -> None:
    count = pcg.device_count()
    if count == 0:
        pcg.Stream()  # raises CudaNotAvailableError, saying why
    if count < 2:
        print(f"SKIPPED: this example needs 2 GPUs, this machine has {count}")
        return
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(N).astype(np.float32)
    x1 = rng.standard_normal(N).astype(np.float32)
    d0, d1 = Side(0, x0), Side(1, x1)
    for a, b in ((d0, d1), (d1, d0)):
        print(f"device {a.device.ordinal} ({a.device.name}) can access device {b.device.ordinal}: "
              f"{a.device.can_access_peer(b.device)}")
        if a.device.can_access_peer(b.device):
            a.device.enable_peer_access(b.device)
    module = pcg.Program(SOURCE, name="multi_gpu_graph.cu").compile()
    affine, add = module["affine"], module["add"]

    try:
        g = build_one_graph(affine, add, d0, d1)
        for n in g.nodes:
            print(f"  {n.type.value:<7} {n.describe():<45} after {len(n.dependencies)} node(s)")
        exe = g.instantiate()
        exe.launch(d0.stream)
        d0.stream.synchronize()
        how = "one graph, two devices, one cudaGraphLaunch"
    except pcg.CudaError as exc:
        print(f"CUDA refused the one-graph form: {exc.api} returned {exc.name} ({exc.message})")
        run_per_device_graphs(affine, add, d0, d1)
        how = "per-device graphs joined by events (the documented alternative)"

    want = (2.0 * x0.astype(np.float64) + 1.0) + (3.0 * x1.astype(np.float64) - 1.0)
    z0, z1 = d0.z.to_numpy(), d1.z.to_numpy()
    err0 = float(np.max(np.abs(z0 - want)))
    err1 = float(np.max(np.abs(z1 - want)))
    print(f"{how}: max |z - numpy| = {err0:.2e} on device 0, {err1:.2e} on device 1")
    if not (err0 < 1e-5 and err1 < 1e-5):
        raise SystemExit("results do not match numpy")
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
