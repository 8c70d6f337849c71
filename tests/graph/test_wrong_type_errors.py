"""Misuse: wrong objects and wrong types at public entries; the parameter is named.

None or a wrong object where a node, graph, kernel, event, stream, callable or buffer
belongs used to leak AttributeError / IndexError / struct.error; now each raises a
pycudagraph error (ArgumentError is both a TypeError and a ValueError) naming it.
"""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile import program

from tests.support.fakes import fake_buffer, fake_exec, fake_graph, fake_kernel, fake_node
from tests.support.healthy import assert_small_graph_works

ARGS = (0x1000, 1.0, 4)

pytestmark = pytest.mark.usefixtures("cpu_device")


@pytest.fixture
def g():
    return fake_graph()


BUILDER_CASES = [
    ("add_kernel", (None, 1, 32, ARGS), "kernel must be a pycudagraph.Kernel"),
    ("add_kernel", ("fill", 1, 32, ARGS), "kernel must be a pycudagraph.Kernel"),
    ("add_event_record", (None,), "event must be a pycudagraph.Event"),
    ("add_event_record", ("ev",), "event must be a pycudagraph.Event"),
    ("add_event_wait", (None,), "event must be a pycudagraph.Event"),
    ("add_event_wait", (123,), "event must be a pycudagraph.Event"),
    ("add_host", (None,), "fn must be callable"),
    ("add_host", (42,), "fn must be callable"),
    ("add_host", (print, 5), "args must be a tuple"),
    ("add_child_graph", (None,), "needs a Graph"),
    ("add_child_graph", ("graph",), "needs a Graph"),
    ("add_mem_alloc", ("64",), "nbytes must be an int"),
    ("add_mem_alloc", (None,), "nbytes must be an int"),
    ("add_mem_alloc", (1.5,), "nbytes must be an int"),
    ("add_mem_alloc", (True,), "nbytes must be an int"),
    ("add_mem_alloc", (0,), "positive size"),
    ("add_mem_free", (None,), "MemAllocNode or a device address"),
    ("add_mem_free", ("0x1000",), "MemAllocNode or a device address"),
    ("add_mem_free", (1.5,), "MemAllocNode or a device address"),
    ("add_memcpy", (None, "SRC"), "memcpy dst must be a buffer"),
    ("add_memcpy", ("DST", None), "memcpy src must be a buffer"),
    ("add_memcpy", ("DST", 1.5), "memcpy src must be a buffer"),
    ("add_memcpy", ("DST", True), "memcpy src must be a buffer"),
    ("add_memcpy", ("DST", object()), "memcpy src: cannot get a device pointer"),
    ("add_memcpy", ("DST", "SRC", "4"), "nbytes must be an int"),
    ("add_memcpy", ("DST", "SRC", 1.5), "nbytes must be an int"),
    ("add_memcpy", ("DST", "SRC", -4), "positive number of bytes"),
    ("add_memcpy", ("DST", "SRC", 0), "positive number of bytes"),
    ("add_memset", (None, 0, 4), "destination"),
    ("add_memset", ("DST", "x", 4), "memset value must be an int or a float"),
    ("add_memset", ("DST", None, 4), "memset value must be an int or a float"),
    ("add_memset", ("DST", 0, 2.5), "memset count must be an int"),
    ("add_memset", ("DST", 0, "4"), "memset count must be an int"),
    ("add_memset", ("DST", 0, 0), "positive element count"),
    ("add_memset", ("DST", 0, 4, 3), "element_size must be 1, 2 or 4"),
    ("add_memset", ("DST", 0, 4, "4"), "element_size must be an int"),
    ("add_memset", ("DST", 0, 4, 1, 0), "height must be >= 1"),
    ("add_memset", ("DST", 0, 4, 1, 2, 2), "pitch 2 is smaller than a row"),
    ("add_memset", ("DST", 1.5, 4, 1), "element_size 2 .* or 4"),
    ("add_memset", ("DST", 300, 4, 1), "does not fit 1 byte"),
    ("add_memset", ("HOST", 0, 4), "device memory"),
]


def _resolve(args, dst, src):
    table = {"DST": dst, "SRC": src, "HOST": np.zeros(64, np.uint8)}
    return tuple(table.get(a, a) if isinstance(a, str) else a for a in args)


@pytest.mark.parametrize("method, args, words", BUILDER_CASES,
                         ids=[f"{m}{a!r}"[:60] for m, a, _ in BUILDER_CASES])
def test_builder_refuses_wrong_objects(g, method, args, words):
    args = _resolve(args, fake_buffer(64), fake_buffer(64))
    with pytest.raises((pcg.ArgumentError, TypeError, ValueError), match=words) as info:
        getattr(g, method)(*args)
    assert not isinstance(info.value, (AttributeError, IndexError)), info.value


def test_add_kernel_bad_args_and_deps(g):
    k = fake_kernel(name="kk")
    with pytest.raises(pcg.ArgumentError, match="kk\\(\\): args must be a sequence"):
        g.add_kernel(k, 1, 32, None)
    with pytest.raises(pcg.ArgumentError, match="must be a node or a sequence"):
        g.add_kernel(k, 1, 32, ARGS, deps=5)
    with pytest.raises(pcg.ArgumentError, match=r"deps\[1\] must be a graph node"):
        g.add_kernel(k, 1, 32, ARGS, deps=[fake_node(g), None])
    with pytest.raises(pcg.ArgumentError, match="kk\\(\\): parameter 0 'y'.*bool"):
        g.add_kernel(k, 1, 32, (True, 1.0, 4))


def test_kernel_launch_bad_stream():
    k = fake_kernel()
    with pytest.raises(TypeError, match="cannot use str as a CUDA stream"):
        k.launch(1, 32, ARGS, stream="s")
    with pytest.raises(TypeError, match="cannot use float as a CUDA stream"):
        k.launch(1, 32, ARGS, stream=1.5)


@pytest.fixture
def exec_with_kernel_node(g):
    k = fake_kernel(name="kx")
    pack = k.pack(ARGS, 1, 32)
    node = g.table.register(pcg.KernelNode(g.table, 0x5000, pack), pack)
    exe = fake_exec(g)
    return exe, node


EXEC_CASES = [
    ("set_arg", (None, 0, 1), "node must be a graph node"),
    ("set_arg", ("node", 0, 1), "node must be a graph node"),
    ("set_arg", ("EMPTY", 0, 1), "must be a KernelNode"),
    ("set_arg", ("KNODE", 3, 1), "index 3 is out of range"),
    ("set_arg", ("KNODE", 99, 1), "index 99 is out of range"),
    ("set_arg", ("KNODE", -1, 1), "out of range"),
    ("set_arg", ("KNODE", 1.0, 1), "index must be an int"),
    ("set_arg", ("KNODE", "nope", 1), "no parameter named 'nope'"),
    ("set_arg", ("KNODE", 0, True), "parameter 0 'y'.*bool"),
    ("set_arg", ("KNODE", 0, None), "parameter 0 'y'"),
    ("set_arg", ("KNODE", 2, "4"), "parameter 2 'n'"),
    ("set_arg", ("KNODE", "n", 2**40), "parameter 2 'n'"),
    ("set_params", (None,), "node must be a graph node"),
    ("set_params", (42,), "node must be a graph node"),
    ("set_enabled", (None, True), "node must be a graph node"),
    ("is_enabled", ("n",), "node must be a graph node"),
    ("update", (None,), "graph must be a pycudagraph.Graph"),
    ("update", ("graph",), "graph must be a pycudagraph.Graph"),
]


@pytest.mark.parametrize("method, args, words", EXEC_CASES,
                         ids=[f"{m}{a!r}"[:60] for m, a, _ in EXEC_CASES])
def test_exec_refuses_wrong_objects(g, exec_with_kernel_node, method, args, words):
    exe, knode = exec_with_kernel_node
    table = {"KNODE": knode, "EMPTY": fake_node(g)}
    args = tuple(table.get(a, a) if isinstance(a, str) else a for a in args)
    before = exe.exec_node(knode).args.raw()
    with pytest.raises(pcg.PyCudaGraphError, match=words):
        getattr(exe, method)(*args)
    assert exe.exec_node(knode).args.raw() == before  # the slot was not left half-written


@pytest.mark.parametrize("changes, words", [
    ({"gird": 4}, "KernelNode has no field 'gird'"),
    ({"args": [1.0]}, "takes 3 arguments, 1 given"),
    ({"args": {"nope": 1}}, "no parameter named"),
    ({"args": {0: True}}, "bool"),
    ({"grid": "12"}, "kx: grid must be an int"),
    ({"block": 2048}, "2048 threads per block"),
    ({"shared_mem": -1}, "shared_mem must be >= 0"),
])
def test_exec_kernel_set_params_refused(exec_with_kernel_node, changes, words):
    exe, knode = exec_with_kernel_node
    before = exe.exec_node(knode).args.raw()
    with pytest.raises(pcg.ArgumentError, match=words):
        exe.set_params(knode, **changes)
    assert exe.exec_node(knode).args.raw() == before
    if "gird" not in changes:  # the same change on the node in its graph
        with pytest.raises(pcg.ArgumentError, match=words):
            knode.set_params(**changes)
        assert knode._pack.dims == ((1, 1, 1), (32, 1, 1), 0)


def test_set_params_unknown_field_of_other_types(g):
    exe = fake_exec(g)
    with pytest.raises(pcg.ArgumentError, match="MemsetNode has no field 'cout'"):
        exe.set_params(fake_node(g, pcg.MemsetNode), cout=4)
    with pytest.raises(pcg.ArgumentError, match="MemcpyNode has no field 'size'"):
        exe.set_params(fake_node(g, pcg.MemcpyNode), size=4)
    with pytest.raises(TypeError, match="does not support empty nodes"):
        exe.set_params(fake_node(g), anything=1)


def test_capture_arguments():
    with pytest.raises(ValueError, match="capture mode must be one of"):
        pcg.capture(None, mode="bogus")
    with pytest.raises(TypeError, match="graph must be a pycudagraph.Graph"):
        pcg.capture(None, graph="g")


@pytest.mark.skipif(not hasattr(program, "_check_arch"), reason="arch checks land with the compiler branch")
@pytest.mark.parametrize("arch", [90, 9.0, b"sm_90"])
def test_compile_arch_must_be_a_string(arch):
    with pytest.raises(TypeError, match="arch must be a str"):
        pcg.Program('extern "C" __global__ void f() {}').compile(arch=arch)


# --- on the GPU -----------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_wrong_objects(helpers):
    g = pcg.Graph()
    ev = pcg.Event()
    rec = g.add_event_record(ev)
    host = g.add_host(lambda: None)
    buf = pcg.DeviceBuffer(64)
    k = g.add_kernel(helpers["fill"], 1, 32, (buf, 1.0, 16))
    child = pcg.Graph()
    child.add_empty()
    cnode = g.add_child_graph(child)
    exe = g.instantiate()
    s = pcg.Stream()
    cases = [
        (lambda: rec.set_params(None), pcg.ArgumentError, "event must be a pycudagraph.Event"),
        (lambda: exe.set_params(rec, event="e"), pcg.ArgumentError, "event must be"),
        (lambda: host.set_params(None), pcg.ArgumentError, "fn must be callable"),
        (lambda: exe.set_params(host, fn=3), pcg.ArgumentError, "fn must be callable"),
        (lambda: exe.set_params(cnode, graph=None), pcg.ArgumentError, "graph must be a Graph"),
        (lambda: exe.set_arg(k, 3, 1), pcg.ArgumentError, "out of range"),
        (lambda: exe.set_arg(k, 0, True), pcg.ArgumentError, "bool"),
        (lambda: exe.set_arg(None, 0, buf), pcg.ArgumentError, "node must be a graph node"),
        (lambda: exe.update(None), TypeError, "graph must be"),
        (lambda: exe.launch("s"), TypeError, "as a CUDA stream"),
        (lambda: exe.upload(1.5), TypeError, "as a CUDA stream"),
        (lambda: g.instantiate(upload_stream="s"), TypeError, "as a CUDA stream"),
        (lambda: helpers["fill"].launch(1, 32, (buf, 1.0, 16), stream=object()), TypeError,
         "as a CUDA stream"),
    ]
    for fn, exc, words in cases:
        with pytest.raises(exc, match=words):
            fn()
    exe.launch(s)
    s.synchronize()
    assert np.all(buf.to_numpy(np.float32)[:16] == 1.0)
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_nested_capture_of_one_stream(helpers):
    s = pcg.Stream()
    with pytest.raises(pcg.CaptureError, match="nested capture") as info:
        with pcg.capture(s):
            with pcg.capture(s):
                pass
    assert pcg.capture_status(s) == "none"
    assert "nested capture" in str(info.value)
    assert_small_graph_works(helpers)


def test_set_enabled_refuses_a_node_an_exec_cannot_turn_off(g):
    """Only kernel, memcpy and memset nodes can be turned off in an exec (the nodes'
    ``can_disable`` facet); any other is refused, naming it, before cudaGraphNodeSetEnabled."""
    empty = fake_node(g)
    exe = fake_exec(g)
    with pcg.trace() as t:
        with pytest.raises(pcg.ArgumentError, match="EmptyNode nodes cannot be turned off in "
                                                    "an exec; cudaGraphNodeSetEnabled takes"):
            exe.set_enabled(empty, False)
    assert not t.records
    assert [cls.can_disable for cls in (pcg.KernelNode, pcg.MemcpyNode, pcg.MemsetNode)] == \
        [True] * 3
    assert not any(cls.can_disable for cls in (pcg.EmptyNode, pcg.HostNode, pcg.ChildGraphNode))
