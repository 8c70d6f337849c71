"""Device graph launch (fire-and-forget, tail), device-updatable kernel nodes, and linking
relocatable code with the device runtime."""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile import link as pcg_link

SRC = r'''
extern "C" __global__ void write_val(int* out, int v) { out[0] = v; }
// counter[0] += 1; then the graph this kernel runs in launches itself again (tail launch)
// until counter[0] reaches n
extern "C" __global__ void tail_loop(int* counter, int n, int* status) {
    int c = ++counter[0];
    if (c < n) status[0] = (int)cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch); }
// change one argument of a device-updatable node, then launch its graph after this one
extern "C" __global__ void update_and_launch(cudaGraphDeviceNode_t node, unsigned long long offset,
                                             int value, cudaGraphExec_t exec, int* status) {
    status[0] = (int)cudaGraphKernelNodeSetParam(node, offset, &value, sizeof(value));
    status[1] = (int)cudaGraphLaunch(exec, cudaStreamGraphTailLaunch); }
'''

LINK_A = r'''
extern __device__ unsigned int pick(const int* flags);
extern "C" __global__ void set_from_flags(cudaGraphConditionalHandle h, const int* flags)
{ cudaGraphSetConditional(h, pick(flags)); }
'''
LINK_B = "__device__ unsigned int pick(const int* flags) { return flags[0] > 0 ? 1u : 0u; }"


def test_link_finds_its_pieces_or_names_the_package():
    """Real link on machines with nvJitLink; otherwise the error names what to install."""
    a = pcg.Program(LINK_A, name="a.cu", options=("-rdc=true",)).compile("sm_90")
    b = pcg.Program(LINK_B, name="b.cu", options=("-rdc=true",)).compile("sm_90")
    try:
        mod = pcg_link.link(a, b)
    except pcg_link.LinkError as exc:
        assert "pip install nvidia-" in str(exc)
        return
    assert mod.kernel_names() == ["set_from_flags"] and mod.arch == "sm_90"
    with pytest.raises(pcg_link.LinkError, match=r"Undefined reference .*pick"):
        pcg_link.link(a)  # b is missing
    with pytest.raises(TypeError, match="link takes Modules"):
        pcg_link.link("a.cu")


# --------------------------------------------------------------------------- GPU

@pytest.fixture(scope="module")
def mods():
    return pcg.Module.from_file("graph_control.cu"), pcg.Program(SRC, name="devlaunch.cu").compile()


def _ints(n=4):
    buf = pcg.DeviceBuffer(4 * n)
    buf.copy_from(np.zeros(n, np.int32))
    return buf


@pytest.mark.gpu
@pytest.mark.parametrize("mode, name", [(0, "fire-and-forget"), (1, "tail")])
def test_a_kernel_launches_a_graph(mods, stream, mode, name):
    ctl, _ = mods
    c, status = _ints(), _ints()
    target = pcg.Graph()
    target.add_kernel(ctl["count"], 1, 1, (c, 0))
    texe = target.instantiate(device_launch=True, upload_stream=stream)
    launcher = pcg.Graph()
    launcher.add_kernel(ctl["launch_graph"], 1, 1, (texe, mode, status))
    lexe = launcher.instantiate()
    del texe, target  # the launcher's argument keeps the target exec alive
    for _ in range(3):
        lexe.launch(stream)
    stream.synchronize()
    assert status.to_numpy(np.int32)[0] == 0, f"{name} cudaGraphLaunch returned an error"
    assert c.to_numpy(np.int32)[0] == 3


@pytest.mark.gpu
def test_a_device_graph_relaunches_itself(mods, stream):
    ctl, dev = mods
    c, status = _ints(), _ints()
    loop = pcg.Graph()
    loop.add_kernel(dev["tail_loop"], 1, 1, (c, 5, status))
    lexe = loop.instantiate(device_launch=True, upload_stream=stream)
    start = pcg.Graph()
    start.add_kernel(ctl["launch_graph"], 1, 1, (lexe, 0, status))
    start.instantiate().launch(stream)
    stream.synchronize()
    assert status.to_numpy(np.int32)[0] == 0
    assert c.to_numpy(np.int32)[0] == 5


@pytest.mark.gpu
def test_a_device_launch_exec_runs_from_the_host_too(mods, stream):
    ctl, _ = mods
    c = _ints()
    g = pcg.Graph()
    g.add_kernel(ctl["count"], 1, 1, (c, 1))
    exe = g.instantiate(device_launch=True)
    exe.upload(stream)
    exe.launch(stream)
    stream.synchronize()
    assert c.to_numpy(np.int32)[1] == 1


@pytest.mark.gpu
def test_device_graph_launch_outside_a_graph_is_refused(mods, stream):
    ctl, _ = mods
    g = pcg.Graph()
    g.add_kernel(ctl["count"], 1, 1, (_ints(), 0))
    exe = g.instantiate(device_launch=True, upload_stream=stream)
    with pytest.raises(pcg.CudaError, match="(?i)not.supported"):
        ctl["launch_graph"].launch(1, 1, (exe, 0, _ints()), stream=stream)
        stream.synchronize()


@pytest.mark.gpu
def test_device_launch_graphs_take_kernel_and_copy_nodes_only(stream):
    g = pcg.Graph()
    g.add_empty()
    with pytest.raises(pcg.CudaError, match="cudaGraphInstantiateNodeOperationNotSupported; "
                                            "failing node: empty"):
        g.instantiate(device_launch=True)


@pytest.mark.gpu
def test_device_updatable_kernel_node(mods, stream):
    ctl, dev = mods
    out, status = _ints(), _ints()
    g = pcg.Graph()
    node = g.add_kernel(dev["write_val"], 1, 1, (out, 11), device_updatable=True)
    assert node.get_attribute("device_updatable") is True
    assert node.device_node != 0
    exe = g.instantiate(device_launch=True, upload_stream=stream)
    offset = dev["write_val"].image_params[1][0]  # where `v` lives in the parameter buffer
    upd = pcg.Graph()
    upd.add_kernel(dev["update_and_launch"], 1, 1, (node, offset, 42, exe, status))
    upd.instantiate().launch(stream)
    stream.synchronize()
    assert status.to_numpy(np.int32)[:2].tolist() == [0, 0]
    assert out.to_numpy(np.int32)[0] == 42
    plain = pcg.Graph()
    other = plain.add_kernel(dev["write_val"], 1, 1, (out, 1))
    with pytest.raises(ValueError, match="not device-updatable"):
        other.device_node


@pytest.mark.gpu
def test_linked_relocatable_kernel_drives_a_conditional(stream):
    try:
        mod = pcg_link.link(pcg.Program(LINK_A, name="a.cu", options=("-rdc=true",)).compile(),
                            pcg.Program(LINK_B, name="b.cu", options=("-rdc=true",)).compile())
    except pcg_link.LinkError as exc:
        pytest.skip(f"no nvJitLink / libcudadevrt here: {exc}")
    ctl = pcg.Module.from_file("graph_control.cu")
    flags, c = _ints(), _ints()
    g = pcg.Graph()
    h = g.conditional_handle()
    node = g.add_if(h, deps=[g.add_kernel(mod["set_from_flags"], 1, 1, (h, flags))])
    node.body.add_kernel(ctl["count"], 1, 1, (c, 0))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    flags.copy_from(np.array([1, 0, 0, 0], np.int32))
    exe.launch(stream)
    stream.synchronize()
    assert c.to_numpy(np.int32)[0] == 1
