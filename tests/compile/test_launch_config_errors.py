"""Misuse: launch configuration against the device's and the kernel's limits.

CPU tests use a mocked limits table (an H100's values, tests/support/fakes.py); GPU tests use the
real device and check that a graph still launches correctly after each refusal.
"""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile import limits as validate

from tests.support.fakes import fake_graph, fake_kernel
from tests.support.healthy import assert_small_graph_works

ARGS = (0x1000, 1.0, 4)

BAD_CONFIGS = [
    # (grid, block, shared_mem, words)
    (1, 2048, 0, "2048 threads per block"),
    (1, (32, 64), 0, "2048 threads per block"),
    (1, (8, 8, 32), 0, "2048 threads per block"),
    (1, (1, 1, 128), 0, "block z = 128 exceeds"),
    (1, (1, 1, 65), 0, "block z = 65 exceeds"),
    ((1, 65536), 32, 0, "grid y = 65536 exceeds"),
    ((1, 1, 65536), 32, 0, "grid z = 65536 exceeds"),
    (2**31, 32, 0, "grid x = 2147483648 exceeds"),
    (1, 32, 1 << 20, "shared_mem = 1048576 bytes"),
    (1, 32, 232449, "opt-in|Optin"),
    (1, 32, -1, "shared_mem must be >= 0"),
    (1, 32, 2**32, "shared_mem must be <="),
    (1, 32, 1.5, "shared_mem must be an int"),
    (1, 32, "0", "shared_mem must be an int"),
    (1, 32, None, "shared_mem must be an int"),
    (1, 32, True, "shared_mem must be an int"),
    ("12", 32, 0, "grid must be an int or a tuple"),
    (1, "32", 0, "block must be an int or a tuple"),
    ((2.7, 1), 32, 0, "grid x must be an int"),
    (1, (32.0,), 0, "block x must be an int"),
    (0, 32, 0, "grid x must be a positive"),
    (1, 0, 0, "block x must be a positive"),
]

pytestmark = pytest.mark.usefixtures("cpu_device")


@pytest.mark.parametrize("grid, block, smem, words", BAD_CONFIGS,
                         ids=[f"g={g!r},b={b!r},s={s!r}" for g, b, s, _ in BAD_CONFIGS])
def test_launch_config_refused_before_cuda(grid, block, smem, words):
    k = fake_kernel(name="mykernel")
    for attempt in (lambda: k.launch(grid, block, ARGS, shared_mem=smem),
                    lambda: k.pack(ARGS, grid, block, smem),
                    lambda: k.check_config(grid, block, smem)):
        with pytest.raises(pcg.ArgumentError, match=words) as info:
            attempt()
        assert "mykernel" in str(info.value)


def test_kernel_own_thread_limit():
    """A kernel whose registers or __launch_bounds__ allow 256 threads refuses 512."""
    k = fake_kernel(name="bounded", kernel_threads=256)
    assert k.check_config(4, 256) == ((4, 1, 1), (256, 1, 1), 0)
    with pytest.raises(pcg.ArgumentError, match="__launch_bounds__.* 256 threads"):
        k.check_config(4, 512)
    with pytest.raises(pcg.ArgumentError, match="512 threads"):
        k.check_config(4, (16, 32))


def test_static_shared_memory_lowers_the_dynamic_maximum():
    k = fake_kernel(name="st", smem=49152 - 1024, static_smem=1024)
    with pytest.raises(pcg.ArgumentError, match="231424 bytes.*less 1024 bytes of static"):
        k.check_config(1, 32, 231425)


def test_shared_memory_above_48k_raises_the_kernel_attribute(monkeypatch):
    k = fake_kernel(name="big")
    raised = []
    monkeypatch.setattr(validate, "raise_dynamic_smem",
                        lambda lim, n: (raised.append(n), setattr(lim, "smem", n)))
    assert k.check_config(1, 32, 100_000)[2] == 100_000
    assert k.check_config(1, 32, 90_000)[2] == 90_000  # under the raised ceiling: no call
    assert raised == [100_000]


def test_good_configs_pass():
    k = fake_kernel()
    assert k.check_config(np.int64(8), (32, 32)) == ((8, 1, 1), (32, 32, 1), 0)
    assert k.check_config((2**31 - 1, 65535, 65535), (1024, 1, 1), 49152)[0] == (2**31 - 1, 65535, 65535)


def test_add_kernel_refuses_before_cuda():
    g, k = fake_graph(), fake_kernel(name="nodek")
    with pytest.raises(pcg.ArgumentError, match="nodek: block .* 4096 threads"):
        g.add_kernel(k, 1, 4096, ARGS)
    with pytest.raises(pcg.ArgumentError, match="nodek: grid y = 70000"):
        g.add_kernel(k, (1, 70000), 32, ARGS)


# --- on the GPU -----------------------------------------------------------------------

SMEM_SRC = r'''
extern "C" __global__ void smem_copy(float* y, int n)
{
    extern __shared__ float s[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)i;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = s[n - 1 - i];
}
extern "C" __global__ void __launch_bounds__(128) bounded(float* y)
{
    y[threadIdx.x] = 1.0f;
}
'''


@pytest.fixture(scope="module")
def smem_mod():
    return pcg.Program(SMEM_SRC, name="smem.cu").compile()


GPU_BAD = [(1, 2048, 0, "threads per block"), ((1, 65536), 32, 0, "grid y"),
           ((1, 1, 65536), 32, 0, "grid z"), (1, (1, 1, 128), 0, "block z"),
           (1, 32, 1 << 20, "shared_mem = 1048576"), (1, 32, -4, "shared_mem must be >= 0"),
           (1, 32, 2**33, "shared_mem must be <="), ("12", 32, 0, "grid must be an int")]


@pytest.mark.gpu
@pytest.mark.parametrize("grid, block, smem, words", GPU_BAD)
def test_gpu_launch_config_refused(helpers, grid, block, smem, words):
    k = helpers["fill"]
    buf = pcg.DeviceBuffer(64)
    with pytest.raises(pcg.ArgumentError, match=words):
        k.launch(grid, block, (buf, 1.0, 16), shared_mem=smem)
    g = pcg.Graph()
    with pytest.raises(pcg.ArgumentError, match=words):
        g.add_kernel(k, grid, block, (buf, 1.0, 16), shared_mem=smem)
    n = g.add_kernel(k, 1, 32, (buf, 1.0, 16))
    with pytest.raises(pcg.ArgumentError, match=words):
        n.set_params(grid=grid, block=block, shared_mem=smem)
    exe = g.instantiate()
    with pytest.raises(pcg.ArgumentError, match=words):
        exe.set_params(n, grid=grid, block=block, shared_mem=smem)
    assert n.params.grid == (1, 1, 1) and n.params.block == (32, 1, 1)
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_launch_bounds_kernel(helpers, smem_mod):
    k = smem_mod["bounded"]
    buf = pcg.DeviceBuffer(1024 * 4)
    with pytest.raises(pcg.ArgumentError, match="__launch_bounds__"):
        k.launch(1, 256, (buf,))
    k.launch(1, 128, (buf,))
    pcg.Stream.wrap(0).synchronize()
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_dynamic_shared_memory_above_48k_works(helpers, smem_mod):
    """64 KiB of dynamic shared memory: the attribute is raised for the kernel, eager and in a graph."""
    k = smem_mod["smem_copy"]
    n = 16384  # floats: 64 KiB
    y = pcg.DeviceBuffer(n * 4)
    k.launch(1, 256, (y, n), shared_mem=n * 4)
    pcg.Stream.wrap(0).synchronize()
    assert np.array_equal(y.to_numpy(np.float32), np.arange(n, dtype=np.float32)[::-1])
    y.zero()
    g = pcg.Graph()
    g.add_kernel(k, 1, 256, (y, n), shared_mem=n * 4)
    s = pcg.Stream()
    g.instantiate().launch(s)
    s.synchronize()
    assert np.array_equal(y.to_numpy(np.float32), np.arange(n, dtype=np.float32)[::-1])
    lim = validate.kernel_limits(k)
    with pytest.raises(pcg.ArgumentError, match="SharedMemoryPerBlockOptin"):
        k.launch(1, 256, (y, n), shared_mem=lim.smem_optin + 4)
    assert_small_graph_works(helpers)
