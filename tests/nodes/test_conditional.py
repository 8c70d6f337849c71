"""Conditional nodes: version gates and argument checks (CPU), each kind run on the GPU."""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph._cuda import rt, versions
from pycudagraph.compile.device_api import HEADER, uses_device_api
from pycudagraph.nodes.conditional import ConditionalHandle


def _fake_graph():
    """A Graph object with no CUDA graph behind it: enough for checks made before any call."""
    return pcg.Graph._wrap(rt.cudaGraph_t(0))


@pytest.fixture
def old_driver(monkeypatch):
    def set_version(v):
        monkeypatch.setattr(versions, "driver_version", lambda: v)
    return set_version


# --------------------------------------------------------------------------- CPU

@pytest.mark.parametrize("builder, version, needs", [
    ("add_if", 12020, "12.3"), ("add_while", 12020, "12.3"),
    ("add_if_else", 12060, "12.8"), ("add_switch", 12060, "12.8")])
def test_kind_needs_its_cuda_version(old_driver, builder, version, needs):
    old_driver(version)
    g = _fake_graph()
    h = ConditionalHandle(g, 1)
    args = (h, 3) if builder == "add_switch" else (h,)
    with pytest.raises(pcg.NotSupportedError, match=rf"needs CUDA {needs} or newer; this system has "
                                                     rf"a CUDA {version // 1000}\.{version % 1000 // 10}"):
        getattr(g, builder)(*args)


def test_conditional_handle_needs_12_3(old_driver):
    old_driver(12000)
    with pytest.raises(pcg.NotSupportedError, match=r"conditional nodes .* needs CUDA 12\.3"):
        _fake_graph().conditional_handle()


@pytest.mark.parametrize("major", [13, 12])
def test_conditional_handle_on_a_named_device_uses_v2(monkeypatch, old_driver, major):
    """device= creates the handle with cudaGraphConditionalHandleCreate_v2 and the device's
    execution context (13.x); cuda-bindings 12.x, which lacks it, is told so before any call."""
    import importlib

    import cuda.bindings
    pcg_device = importlib.import_module("pycudagraph.runtime.device")  # the module, not pcg.device
    old_driver(13000)
    monkeypatch.setattr(pcg_device, "device_count", lambda: 2)
    ok, seen = rt.cudaError_t.cudaSuccess, []

    def ctx_of(dev):
        seen.append(("cudaDeviceGetExecutionCtx", dev))
        return ok, 0xC7C0 + dev
    ctx_of.__name__ = "cudaDeviceGetExecutionCtx"

    def create_v2(graph, ctx, default, flags):
        seen.append(("cudaGraphConditionalHandleCreate_v2", ctx, default, flags))
        return ok, 0x44
    create_v2.__name__ = "cudaGraphConditionalHandleCreate_v2"
    for fn in (ctx_of, create_v2):
        if major == 13:
            monkeypatch.setattr(rt, fn.__name__, fn, raising=False)
        else:
            monkeypatch.delattr(rt, fn.__name__, raising=False)
    if major == 12:
        monkeypatch.setattr(cuda.bindings, "__version__", "12.9.10")
        with pytest.raises(pcg.NotSupportedError, match="without cudaGraphConditionalHandleCreate_v2"):
            _fake_graph().conditional_handle(device=1)
        assert not seen
        return
    h = _fake_graph().conditional_handle(default=3, device=1)
    assert int(h) == 0x44 and h.default == 3
    assign = int(rt.cudaGraphConditionalHandleFlags.cudaGraphCondAssignDefault)
    assert seen == [("cudaDeviceGetExecutionCtx", 1),
                    ("cudaGraphConditionalHandleCreate_v2", 0xC7C1, 3, assign)]
    with pytest.raises(pcg.ArgumentError, match="conditional_handle: device: there is no CUDA device 5"):
        _fake_graph().conditional_handle(device=5)


@pytest.mark.parametrize("default", [-1, 2**32, 1.5, True, "1"])
def test_conditional_handle_default_checked(default):
    with pytest.raises(ValueError, match="default must be None or an unsigned 32-bit int"):
        _fake_graph().conditional_handle(default=default)


def test_node_needs_a_handle_of_this_graph():
    g, other = _fake_graph(), _fake_graph()
    with pytest.raises(TypeError, match="needs a ConditionalHandle"):
        g.add_if(7)
    with pytest.raises(ValueError, match="made for another graph"):
        g.add_while(ConditionalHandle(other, 1))


@pytest.mark.parametrize("count", [0, -2, 1.0, True])
def test_switch_count_checked(count):
    g = _fake_graph()
    with pytest.raises(ValueError, match="positive number of bodies"):
        g.add_switch(ConditionalHandle(g, 1), count)


def test_handle_is_an_int_and_packs_as_a_kernel_argument():
    g = _fake_graph()
    h = ConditionalHandle(g, 0xABCDEF, default=1)
    assert int(h) == 0xABCDEF and h.value == 0xABCDEF and h.graph is g
    assert int(h.handle) == 0xABCDEF and "default=1" in repr(h)
    mod = pcg.Program('extern "C" __global__ void k(cudaGraphConditionalHandle h, int v) '
                      '{ cudaGraphSetConditional(h, v); }', name="k.cu").compile("sm_90")
    params = mod.signatures["k"].params
    assert (params[0].kind, params[0].size) == ("handle", 8)
    from pycudagraph.compile.args import Layout
    layout = Layout("k", params)
    assert layout.convert([h, 3]) == [0xABCDEF, 3]
    with pytest.raises(pcg.ArgumentError, match="takes a ConditionalHandle"):
        layout.convert([g, 3])


def test_program_declares_the_device_graph_api():
    src = 'extern "C" __global__ void k(cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, 1); }'
    assert uses_device_api(src)
    assert not uses_device_api(src, ("-rdc=true",))  # NVRTC declares it itself then
    assert not uses_device_api("#include <cuda_runtime.h>\n" + src)
    assert not uses_device_api('extern "C" __global__ void k(int* x) { x[0] = 1; }')
    # whole-program compile (no -rdc) and relocatable compile both work, no toolkit headers
    for options in ((), ("-rdc=true",)):
        mod = pcg.Program(src, name="k.cu", options=options).compile("sm_90")
        assert mod.kernel_names() == ["k"] and len(mod.cubin) > 0
    assert mod.source == src  # the declarations are not part of the user's source
    assert "cudaGraphSetConditional" in HEADER


def test_compile_errors_keep_the_sources_line_numbers():
    src = ('extern "C" __global__ void k(cudaGraphConditionalHandle h)\n'
           '{\n    cudaGraphSetConditional(h, 1);\n    no_such_function();\n}\n')
    with pytest.raises(pcg.CompileError, match=r"bad\.cu\(4\): error: identifier \"no_such_function\""):
        pcg.Program(src, name="bad.cu").compile("sm_90")


# --------------------------------------------------------------------------- GPU

@pytest.fixture(scope="module")
def ctl():
    return pcg.Module.from_file("graph_control.cu")


def _counter(n=4):
    buf = pcg.DeviceBuffer(4 * n)
    buf.copy_from(np.zeros(n, np.int32))
    return buf


def _read(buf, n=4):
    return buf.to_numpy(np.int32)[:n].tolist()


@pytest.mark.gpu
def test_if_runs_its_body_only_when_the_value_is_set(ctl, stream):
    c = _counter()
    g = pcg.Graph()
    h = g.conditional_handle()
    setter = g.add_kernel(ctl["set_condition"], 1, 1, (h, 1))
    node = g.add_if(h, deps=[setter])
    assert isinstance(node, pcg.IfNode) and node.kind == "if" and node.type == "conditional"
    inner = node.body.add_kernel(ctl["count"], 1, 1, (c, 0))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert _read(c) == [1, 0, 0, 0]
    exe.set_arg(setter, "value", 0)  # the host changes the value the kernel sets
    exe.launch(stream)
    stream.synchronize()
    assert _read(c) == [1, 0, 0, 0]
    exe.set_arg(setter, "value", 1)
    exe.set_arg(inner, "slot", 2)  # a kernel node of the body, updated in the exec
    exe.launch(stream)
    stream.synchronize()
    assert _read(c) == [1, 0, 1, 0]


@pytest.mark.gpu
@pytest.mark.parametrize("value, expected", [(1, [1, 0, 0, 0]), (0, [0, 1, 0, 0])])
def test_if_else_takes_one_branch(ctl, stream, value, expected):
    c = _counter()
    g = pcg.Graph()
    h = g.conditional_handle()
    node = g.add_if_else(h, deps=[g.add_kernel(ctl["set_condition"], 1, 1, (h, value))])
    then_body, else_body = node.bodies
    assert node.then_body is then_body and node.else_body is else_body
    then_body.add_kernel(ctl["count"], 1, 1, (c, 0))
    else_body.add_kernel(ctl["count"], 1, 1, (c, 1))
    g.instantiate().launch(stream)
    stream.synchronize()
    assert _read(c) == expected


@pytest.mark.gpu
def test_while_loops_until_a_kernel_clears_the_value(ctl, stream):
    c = _counter()
    g = pcg.Graph()
    h = g.conditional_handle(default=1)
    node = g.add_while(h)
    node.body.add_kernel(ctl["count_while_below"], 1, 1, (c, 7, h))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert _read(c)[0] == 7
    exe.launch(stream)  # the default (1) is set again: one more pass, 8 >= 7 stops it
    stream.synchronize()
    assert _read(c)[0] == 8


@pytest.mark.gpu
def test_while_with_a_handle_made_for_a_named_device(ctl, stream):
    """device= (cudaGraphConditionalHandleCreate_v2 with the device's execution context)
    drives a while loop as the plain handle does; 12.x bindings refuse it by name."""
    g = pcg.Graph()
    if not hasattr(rt, "cudaGraphConditionalHandleCreate_v2"):
        with pytest.raises(pcg.NotSupportedError, match="cudaGraphConditionalHandleCreate_v2"):
            g.conditional_handle(default=1, device=0)
        return
    c = _counter()
    h = g.conditional_handle(default=1, device=pcg.Device(0))
    g.add_while(h).body.add_kernel(ctl["count_while_below"], 1, 1, (c, 5, h))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert _read(c)[0] == 5


@pytest.mark.gpu
@pytest.mark.parametrize("value, expected", [(0, [1, 0, 0, 0]), (2, [0, 0, 1, 0]),
                                             (9, [0, 0, 0, 0])])
def test_switch_runs_the_body_of_the_value(ctl, stream, value, expected):
    c = _counter()
    g = pcg.Graph()
    h = g.conditional_handle(default=value)  # the default alone picks the body
    node = g.add_switch(h, 3)
    assert len(node.bodies) == 3 and isinstance(node, pcg.SwitchNode)
    for i, body in enumerate(node.bodies):
        body.add_kernel(ctl["count"], 1, 1, (c, i))
    g.instantiate().launch(stream)
    stream.synchronize()
    assert _read(c) == expected


@pytest.mark.gpu
def test_nested_conditionals_and_introspection(ctl, stream):
    c = _counter()
    g = pcg.Graph()
    outer = g.conditional_handle(default=1)
    loop = g.add_while(outer)
    step = loop.body.add_kernel(ctl["count_while_below"], 1, 1, (c, 4, outer))
    inner = g.conditional_handle(default=1)  # made on the root graph, used inside the body
    branch = loop.body.add_if(inner, deps=[step])
    branch.body.add_kernel(ctl["count"], 1, 1, (c, 1))
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert _read(c)[:2] == [4, 4]
    assert g.nodes == [loop] and loop.body.nodes == [step, branch]
    assert loop.body.edges == [(step, branch)]
    assert loop.params.kind == "while" and loop.params.handle is outer
    assert "while" in loop.describe() and "body nodes: 2" in loop.describe()
    dot = g.to_dot()
    assert dot.count("subgraph") == 2 and "count_while_below" in dot and "style=dashed" in dot


@pytest.mark.gpu
def test_conditional_nodes_read_back_or_say_what_they_need(ctl):
    g = pcg.Graph()
    h = g.conditional_handle()
    node = g.add_if(h)
    node.body.add_kernel(ctl["count"], 1, 1, (_counter(), 0))
    view = pcg.Graph._wrap(g.handle, owner=g)  # knows nothing: its nodes are read back
    (copy,) = view.nodes
    assert copy == node and copy.type == "conditional"
    if versions.driver_version() >= 13020 and hasattr(rt, "cudaGraphNodeGetParams"):
        assert isinstance(copy, pcg.IfNode) and int(copy.condition) == int(h)
        assert [n.type for n in copy.bodies[0].nodes] == ["kernel"]
    else:
        with pytest.raises(pcg.NotSupportedError, match=r"needs CUDA 13\.2"):
            copy.bodies
        assert "unknown" in copy.describe()
    with pytest.raises(pcg.CudaError, match="conditional nodes"):
        g.clone()  # cudaGraphClone refuses graphs with conditional nodes


@pytest.mark.gpu
def test_an_exec_refuses_to_set_params_of_a_conditional_node(ctl):
    g = pcg.Graph()
    node = g.add_if(g.conditional_handle())
    node.body.add_empty()
    with pytest.raises(TypeError, match="change the nodes of its body graphs"):
        g.instantiate().set_params(node, value=1)
