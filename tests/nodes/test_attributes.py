"""Kernel-node attributes and edge data: argument checks (CPU), each attribute on the GPU."""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph._cuda import versions
from pycudagraph.nodes.edges import edge_data, port_name
from pycudagraph.nodes.attributes import ATTRIBUTES, prepare

SRC = r'''
extern "C" __global__ void write_val(int* out, int v) { out[0] = v; }
extern "C" __global__ void cluster_size(int* out) {
    unsigned r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = (int)r; }
// every block adds 1, then spins until all blocks have: only finishes when all blocks
// are resident at once (a cooperative launch guarantees that)
extern "C" __global__ void all_blocks_meet(int* counter, int* out) {
    if (threadIdx.x == 0) {
        atomicAdd(counter, 1);
        while (atomicAdd(counter, 0) < (int)gridDim.x) {}
        if (blockIdx.x == 0) out[0] = atomicAdd(counter, 0);
    } }
extern "C" __global__ void produce(float* data, int n, long long spin) {
    long long t0 = clock64(); while (clock64() - t0 < spin) {}
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        data[i] = (float)i;
    __syncthreads();
    cudaTriggerProgrammaticLaunchCompletion(); }
extern "C" __global__ void consume(const float* data, float* out, int n) {
    cudaGridDependencySynchronize();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = 2.0f * data[i]; }
'''


@pytest.fixture
def old_driver(monkeypatch):
    def set_version(v):
        monkeypatch.setattr(versions, "driver_version", lambda: v)
    return set_version


# --------------------------------------------------------------------------- CPU

@pytest.mark.parametrize("name, value, exc, match", [
    ("priority", "high", TypeError, "priority takes an int"),
    ("priority", True, TypeError, "priority takes an int"),
    ("cluster", (0, 1), ValueError, "cluster must be 1 to 3 positive ints"),
    ("cluster", (1, 1, 1, 1), ValueError, "cluster must be 1 to 3 positive ints"),
    ("cooperative", 2, TypeError, "cooperative takes True or False"),
    ("mem_sync_domain", "far", ValueError, r"mem_sync_domain must be one of \['default', 'remote'\]"),
    ("access_policy", (0, 64), TypeError, "AccessPolicyWindow"),
    ("access_policy", pcg.AccessPolicyWindow(0x1000, 64, hit_ratio=2.0), ValueError, "hit_ratio"),
    ("access_policy", pcg.AccessPolicyWindow(0x1000, 64, hit="sticky"), ValueError, "hit must be one of"),
    ("device_updatable", "yes", TypeError, "device_updatable takes True or False"),
    ("colour", 1, ValueError, "no kernel-node attribute 'colour'"),
])
def test_attribute_values_are_checked(old_driver, name, value, exc, match):
    old_driver(13000)
    with pytest.raises(exc, match=match):
        prepare(name, value)


def test_attributes_fill_the_raw_struct(old_driver):
    old_driver(13000)
    assert set(ATTRIBUTES) == {"priority", "cluster", "cooperative", "access_policy",
                               "mem_sync_domain", "device_updatable"}
    _, v = prepare("cluster", 2)
    assert (v.clusterDim.x, v.clusterDim.y, v.clusterDim.z) == (2, 1, 1)
    _, v = prepare("access_policy", pcg.AccessPolicyWindow(0x1000, 256, 0.5))
    w = v.accessPolicyWindow
    assert (int(w.base_ptr), int(w.num_bytes), w.hitRatio) == (0x1000, 256, 0.5)
    _, v = prepare("priority", -3)
    assert v.priority == -3


def test_attribute_needs_its_cuda_version(old_driver):
    old_driver(12030)
    with pytest.raises(pcg.NotSupportedError, match=r"'device_updatable' needs CUDA 12\.4 or newer"):
        prepare("device_updatable", True)


def test_edge_ports(old_driver):
    old_driver(13000)
    assert edge_data(None) is None and edge_data("default") is None
    (d,) = edge_data("programmatic")
    assert port_name(d) == "programmatic"
    (d,) = edge_data("launch_completion")
    assert port_name(d) == "launch_completion"
    with pytest.raises(ValueError, match="port must be one of"):
        edge_data("early")
    old_driver(12020)
    with pytest.raises(pcg.NotSupportedError, match=r"programmatic edges .* needs CUDA 12\.3"):
        edge_data("programmatic")


# --------------------------------------------------------------------------- GPU

@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SRC, name="attributes.cu").compile()


def _ints(n=4):
    buf = pcg.DeviceBuffer(4 * n)
    buf.copy_from(np.zeros(n, np.int32))
    return buf


@pytest.mark.gpu
def test_priority(mod, stream):
    out = _ints()
    g = pcg.Graph()
    node = g.add_kernel(mod["write_val"], 1, 1, (out, 5), priority=-2)
    assert node.get_attribute("priority") == -2
    node.set_attribute("priority", -1)
    assert node.attributes["priority"] == -1
    other = g.add_kernel(mod["write_val"], 1, 1, (out, 6), deps=[node])
    other.copy_attributes_from(node)  # cudaGraphKernelNodeCopyAttributes, 13.x order (dst, src)
    assert other.get_attribute("priority") == -1
    exe = g.instantiate(use_node_priority=True)
    exe.launch(stream)
    stream.synchronize()
    assert out.to_numpy(np.int32)[0] == 6
    with pytest.raises(TypeError, match=r"no per-node attribute call \(priority\).*exe\.update"):
        exe.set_params(node, priority=0)


@pytest.mark.gpu
def test_cluster_dimensions_reach_the_kernel(mod, stream):
    out = _ints()
    g = pcg.Graph()
    node = g.add_kernel(mod["cluster_size"], 4, 32, (out,), cluster=(2, 1, 1))
    assert node.get_attribute("cluster") == (2, 1, 1)
    g.instantiate().launch(stream)
    stream.synchronize()
    assert out.to_numpy(np.int32)[0] == 2  # %cluster_nctarank: blocks per cluster


@pytest.mark.gpu
def test_cooperative(mod, stream):
    counter, out = _ints(), _ints()
    g = pcg.Graph()
    node = g.add_kernel(mod["all_blocks_meet"], 8, 32, (counter, out), cooperative=True)
    assert node.get_attribute("cooperative") is True
    g.instantiate().launch(stream)
    stream.synchronize()
    assert out.to_numpy(np.int32)[0] == 8
    # A cooperative grid must fit on the GPU at once; CUDA refuses one that cannot when
    # the attribute is set, and no half-configured node stays in the graph.
    big = pcg.Graph()  # (write_val does not wait for other blocks: no hang if it did run)
    with pytest.raises(pcg.CudaError, match="cudaErrorCooperativeLaunchTooLarge"):
        big.add_kernel(mod["write_val"], 1 << 20, 1024, (out, 1), cooperative=True)
    assert big.nodes == []
    # and an exec cannot be switched between cooperative and not by an update
    plain = pcg.Graph()
    plain.add_kernel(mod["all_blocks_meet"], 8, 32, (counter, out))
    with pytest.raises(pcg.GraphExecUpdateError):
        plain.instantiate().update(g)


@pytest.mark.gpu
def test_access_policy_window(mod, stream):
    out = _ints(64)
    window = pcg.AccessPolicyWindow(out, 256, hit_ratio=0.5, hit="persisting", miss="streaming")
    g = pcg.Graph()
    node = g.add_kernel(mod["write_val"], 1, 1, (out, 3), access_policy=window)
    got = node.get_attribute("access_policy")
    assert got == pcg.AccessPolicyWindow(out.ptr, 256, 0.5, "persisting", "streaming")
    g.instantiate().launch(stream)
    stream.synchronize()
    assert out.to_numpy(np.int32)[0] == 3


@pytest.mark.gpu
def test_mem_sync_domain(mod, stream):
    out = _ints()
    g = pcg.Graph()
    node = g.add_kernel(mod["write_val"], 1, 1, (out, 4), mem_sync_domain="remote")
    assert node.get_attribute("mem_sync_domain") == "remote"
    assert node.attributes["mem_sync_domain"] == "remote"
    g.instantiate().launch(stream)
    stream.synchronize()
    assert out.to_numpy(np.int32)[0] == 4


@pytest.mark.gpu
@pytest.mark.parametrize("port", ["programmatic", "launch_completion"])
def test_programmatic_edge(mod, stream, port):
    n = 1 << 16
    data, out = pcg.DeviceBuffer(4 * n), pcg.DeviceBuffer(4 * n)
    data.zero()
    out.zero()
    g = pcg.Graph()
    a = g.add_kernel(mod["produce"], n // 256, 256, (data, n, 1_000_000))
    b = g.add_kernel(mod["consume"], n // 256, 256, (data, out, n))
    g.add_dependency(a, b, port=port)
    assert set(g.edges) == {(a, b)}  # the plain (from, to) form still works
    assert g.edge_data == {(a, b): port}
    assert "style=dashed" in g.to_dot() and port in g.to_dot()
    g.instantiate().launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(np.float32), 2.0 * np.arange(n, dtype=np.float32))
    g.remove_dependency(a, b, port=port)
    assert g.edges == []


@pytest.mark.gpu
def test_programmatic_edge_joins_kernel_nodes_only(mod):
    g = pcg.Graph()
    a = g.add_kernel(mod["write_val"], 1, 1, (_ints(), 1))
    with pytest.raises(ValueError, match="joins two kernel nodes"):
        g.add_dependency(a, g.add_empty(), port="programmatic")
