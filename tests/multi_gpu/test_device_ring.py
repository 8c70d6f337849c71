"""One graph spanning 2, 4 or 8 GPUs of one process, built node by node and by stream
capture; its results equal the same kernels run on a single GPU, bit for bit.

The ring: device d scales its input (``y_d = (d + 1) * x_d + d``), sends ``y_d`` to
device d+1 (a memcpy node between devices), and subtracts what it received
(``z_d = y_d - y_{d-1}``). The reference runs both kernels for every d on device 0 alone.
A GPU count this machine lacks skips with "needs N GPUs; this machine has M."
"""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph import _cuda
from pycudagraph._cuda import rt
from tests.multi_gpu.gpu_counts import per_count

pytestmark = pytest.mark.gpu

SOURCE = r"""
extern "C" __global__ void ring_scale(float* y, const float* x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = fmaf(a, x[i], b);
}
extern "C" __global__ void ring_diff(float* z, const float* mine, const float* received, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        z[i] = mine[i] - received[i];
}
"""
N = 1 << 18
NBYTES = 4 * N
GRID, BLOCK = 128, 256


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SOURCE, name="device_ring.cu").compile()


def _inputs(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(n)]


def one_gpu_reference(mod, xs) -> list[np.ndarray]:
    """Both kernels for every d, on device 0 alone."""
    n = len(xs)
    with pcg.device(0):
        s = pcg.Stream()
        bx = [pcg.DeviceBuffer.from_array(x) for x in xs]
        by = [pcg.DeviceBuffer(NBYTES) for _ in xs]
        bz = [pcg.DeviceBuffer(NBYTES) for _ in xs]
        for d in range(n):
            mod["ring_scale"].launch(GRID, BLOCK, (by[d], bx[d], float(d + 1), float(d), N), stream=s)
        for d in range(n):
            mod["ring_diff"].launch(GRID, BLOCK, (bz[d], by[d], by[(d - 1) % n], N), stream=s)
        s.synchronize()
        return [z.to_numpy() for z in bz]


class Side:
    """Device d's stream, events and buffers."""

    def __init__(self, d: int, x: np.ndarray):
        self.d = d
        with pcg.device(d):
            self.stream = pcg.Stream()
            self.copied, self.done = pcg.Event(timing=False), pcg.Event(timing=False)
            self.x = pcg.DeviceBuffer.from_array(x)
            self.y, self.t, self.z = (pcg.DeviceBuffer(NBYTES) for _ in range(3))


def _sides(n: int) -> list[Side]:
    return [Side(d, x) for d, x in enumerate(_inputs(n))]


def _assert_equal(sides, ref) -> None:
    for s, want in zip(sides, ref):
        got = s.z.to_numpy()
        assert np.array_equal(got, want), (f"device {s.d}: max |z - one GPU| = "
                                           f"{float(np.max(np.abs(got - want)))}")


@pytest.mark.parametrize("n", per_count())
def test_built_graph_spanning_n_devices_equals_one_gpu(mod, n):
    sides = _sides(n)
    ref = one_gpu_reference(mod, [s.x.to_numpy() for s in sides])
    g = pcg.Graph()
    scaled, copied = [], [None] * n
    for s in sides:
        with pcg.device(s.d):
            scaled.append(g.add_kernel(mod["ring_scale"], GRID, BLOCK,
                                       (s.y, s.x, float(s.d + 1), float(s.d), N)))
    for s in sides:  # y_d -> t_{d+1}: a memcpy node between two devices
        copied[(s.d + 1) % n] = g.add_memcpy(sides[(s.d + 1) % n].t, s.y, NBYTES, deps=(scaled[s.d],))
    for s in sides:
        with pcg.device(s.d):
            g.add_kernel(mod["ring_diff"], GRID, BLOCK, (s.z, s.y, s.t, N),
                         deps=(scaled[s.d], copied[s.d]))
    assert len(g.nodes) == 3 * n
    exe = g.instantiate()
    for launch_dev in (0, n - 1):  # a stream of any device may launch it
        for s in sides:
            s.z.zero()
        exe.launch(sides[launch_dev].stream)
        sides[launch_dev].stream.synchronize()
        _assert_equal(sides, ref)


def _issue_ring(mod, sides) -> None:
    """The ring on each device's stream; device d+1 waits for d's copy through an event."""
    n = len(sides)
    for s in sides:
        mod["ring_scale"].launch(GRID, BLOCK, (s.y, s.x, float(s.d + 1), float(s.d), N), stream=s.stream)
        nxt = sides[(s.d + 1) % n]
        _cuda.call(rt.cudaMemcpyAsync, nxt.t.ptr, s.y.ptr, NBYTES,
                   rt.cudaMemcpyKind.cudaMemcpyDefault, s.stream.handle)
        s.copied.record(s.stream)
    for s in sides:
        s.stream.wait(sides[(s.d - 1) % n].copied)
        mod["ring_diff"].launch(GRID, BLOCK, (s.z, s.y, s.t, N), stream=s.stream)


@pytest.mark.parametrize("n", per_count())
def test_capture_forked_over_n_devices_equals_one_gpu(mod, n):
    sides = _sides(n)
    ref = one_gpu_reference(mod, [s.x.to_numpy() for s in sides])
    _issue_ring(mod, sides)  # eagerly first: each device's function looked up outside the capture
    for s in sides:
        s.stream.synchronize()
    _assert_equal(sides, ref)
    first = sides[0]
    for s in sides:
        s.z.zero()
    with pcg.capture(first.stream) as cap:
        first.done.record(first.stream)
        for s in sides[1:]:
            s.stream.wait(first.done)  # every device's stream joins the capture
        _issue_ring(mod, sides)
        for s in sides[1:]:
            s.done.record(s.stream)
            first.stream.wait(s.done)  # and joins back
    kinds = [nd.type for nd in cap.graph.nodes]
    assert kinds.count(pcg.NodeType.KERNEL) == 2 * n and kinds.count(pcg.NodeType.MEMCPY) == n
    exe = cap.graph.instantiate()
    for _ in range(3):
        for s in sides:
            s.z.zero()
        exe.launch(first.stream)
        first.stream.synchronize()
        _assert_equal(sides, ref)
