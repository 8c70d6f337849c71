"""Graphs made elsewhere (Graph.wrap / GraphExec.wrap), captured kernel-node arguments and
GraphExec.rebind, on the CPU: the kernelParams arrays live in host memory and the driver
calls are replaced by recorders. On the GPU (marker ``gpu``): a captured graph rebound,
its kernel nodes updated, and the graph and exec wrapped (a PyTorch graph: tests/frameworks)."""

from __future__ import annotations

import ctypes
import gc
import re
import struct
import weakref

import numpy as np
import pytest
from cuda.bindings import driver as dr

import pycudagraph as pcg
from pycudagraph.nodes import captured_args as captured
from pycudagraph.nodes.arg_slots import patch_slots
from pycudagraph.errors import ArgumentError, ClosedError, CudaError
from pycudagraph.graph.exec_reuse import paused
from tests.support.fakes import fake_graph, fake_node, fake_read_node
from tests.support.captured_graph import N, buf_of, captured_graph, read_back
from tests.support.captured_graph import mod  # noqa: F401 - a fixture


class Owner:
    """Stands for the object that owns a raw graph (a torch.cuda.CUDAGraph)."""


class FakeArray:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4",
                                         "version": 3}


# encode ---------------------------------------------------------------------------

def test_encode_numbers_bytes_and_pointers():
    assert captured.encode(1.5, 4, "w") == struct.pack("<f", 1.5)
    assert captured.encode(1.5, 8, "w") == struct.pack("<d", 1.5)
    assert captured.encode(-2, 4, "w") == struct.pack("<i", -2)
    assert captured.encode(255, 1, "w") == b"\xff"
    assert captured.encode(True, 1, "w") == b"\x01"
    assert captured.encode(np.float16(2.0), 2, "w") == np.float16(2.0).tobytes()
    assert captured.encode(b"abcd", 4, "w") == b"abcd"
    assert captured.encode(FakeArray(0x7F00_0000_1000), 8, "w") == struct.pack("<Q", 0x7F00_0000_1000)


@pytest.mark.parametrize("value,size,text", [
    (b"abc", 4, "3 bytes given for a 4-byte argument"),
    (1.0, 2, "a float fits a 4- or 8-byte argument"),
    (1, 3, "an int fits a 1-, 2-, 4- or 8-byte argument"),
    (300, 1, "300 does not fit 1 bytes"),
    (np.float32(1), 8, "a float32 (4 bytes) for a 8-byte argument"),
    (FakeArray(0x1000), 4, "a device address is 8 bytes"),
    (np.zeros(3, np.float32), 8, "host memory"),
    (object(), 8, "w"),
])
def test_encode_refuses_what_does_not_fit(value, size, text):
    with pytest.raises(ArgumentError, match=re.escape(text)):
        captured.encode(value, size, "w")


# patch_slots ------------------------------------------------------------------------

def test_patch_slots_finds_aligned_slots_inside_structs():
    old, new = 0x7F00_0000_2000, 0x7F00_0000_9000
    data = struct.pack("<QiiQQ", old, 3, 4, 5, old)  # a 32-byte struct, two pointers
    out, n = patch_slots(data, 0, old, new)
    assert n == 2 and struct.unpack("<QiiQQ", out) == (new, 3, 4, 5, new)
    # at image offset 4 the 8-byte aligned slots start at byte 4 of the argument
    data = struct.pack("<IQI", 0, old, 0)
    assert patch_slots(data, 4, old, new)[1] == 1
    assert patch_slots(data, 0, old, new)[1] == 0  # misaligned: not a slot
    assert patch_slots(struct.pack("<I", 7), 0, old, new) == (struct.pack("<I", 7), 0)


# param_info -------------------------------------------------------------------------

def _params(func=0, kern=0, values=()):
    """A CUDA_KERNEL_NODE_PARAMS whose kernelParams point at host copies of ``values``."""
    p = dr.CUDA_KERNEL_NODE_PARAMS()
    p.func, p.kern = dr.CUfunction(func), dr.CUkernel(kern)
    p.gridDimX = p.gridDimY = p.gridDimZ = 1
    p.blockDimX, p.blockDimY, p.blockDimZ = 128, 1, 1
    bufs = [ctypes.create_string_buffer(v, len(v)) for v in values]
    arr = (ctypes.c_void_p * max(len(bufs), 1))(*[ctypes.addressof(b) for b in bufs])
    p.kernelParams = ctypes.addressof(arr)
    _KEEP.append((bufs, arr))
    return p


_KEEP: list = []


def _fake_info(monkeypatch, sizes, name="cuFuncGetParamInfo", err_at=None, clear=True):
    offsets, at = [], 0
    for size in sizes:  # the device layout: each argument aligned to min(size, 8)
        align = min(size, 8)
        at = (at + align - 1) // align * align
        offsets.append(at)
        at += size
    seen = []

    def fake(h, i):
        seen.append(int(h))
        if err_at is not None and i == err_at:
            return dr.CUresult.CUDA_ERROR_NOT_SUPPORTED, 0, 0
        if i >= len(sizes):
            return dr.CUresult.CUDA_ERROR_INVALID_VALUE, 0, 0
        return dr.CUresult.CUDA_SUCCESS, int(offsets[i]), sizes[i]
    fake.__name__ = name
    monkeypatch.setattr(dr, name, fake)
    if clear:
        captured._INFO.clear()
    return seen


def test_param_info_reads_until_invalid_value(monkeypatch):
    seen = _fake_info(monkeypatch, [8, 4, 32])
    assert captured.param_info(_params(func=0x51)) == [(0, 8), (8, 4), (16, 32)]
    assert seen == [0x51] * 4
    captured.param_info(_params(func=0x51))
    assert len(seen) == 4  # cached per function


def test_param_info_is_read_again_after_a_library_unload(monkeypatch):
    """A handle of an unloaded library may name a function loaded later, with other sizes:
    the answers kept by handle go with any unload (the read past a parameter that
    crashed a capture made after a load/unload loop)."""
    from pycudagraph.compile import library
    _fake_info(monkeypatch, [8, 4, 32])
    assert captured.param_info(_params(func=0x53)) == [(0, 8), (8, 4), (16, 32)]
    monkeypatch.setattr(library, "unloads", library.unloads)
    monkeypatch.setattr(library.rt, "cudaLibraryUnload", lambda lib: (0,))
    library._unload(object())
    _fake_info(monkeypatch, [8, 8], clear=False)
    assert captured.param_info(_params(func=0x53)) == [(0, 8), (8, 8)]


def test_param_info_uses_cuKernelGetParamInfo_for_a_CUkernel(monkeypatch):
    seen = _fake_info(monkeypatch, [8], name="cuKernelGetParamInfo")
    assert captured.param_info(_params(kern=0x61)) == [(0, 8)]
    assert seen == [0x61, 0x61]


def test_param_info_error_names_the_call(monkeypatch):
    _fake_info(monkeypatch, [8, 8], err_at=1)
    with pytest.raises(CudaError, match="cuFuncGetParamInfo"):
        captured.param_info(_params(func=0x52))


def test_param_info_needs_a_function():
    captured._INFO.clear()
    with pytest.raises(pcg.PyCudaGraphError, match="neither a CUfunction nor a CUkernel"):
        captured.param_info(_params())


# A captured graph on the CPU ----------------------------------------------------------

OLD, NEW = 0x7F00_0000_4000, 0x7F00_0000_8000


@pytest.fixture
def scene(monkeypatch, cpu_device):
    """A wrapped graph with two captured kernel nodes and an exec wrapping a fake handle;
    cuGraphExecKernelNodeSetParams / cuGraphKernelNodeSetParams are recorded."""
    _fake_info(monkeypatch, [8, 4, 24])
    g = fake_graph()
    a, b = fake_read_node(g, pcg.CapturedKernelNode), fake_read_node(g, pcg.CapturedKernelNode)
    fake_node(g)  # an empty node: skipped
    params = {
        a._h: dict(func=0x71, values=[struct.pack("<Q", OLD), struct.pack("<i", 5),
                                      struct.pack("<QQQ", 1, OLD, OLD)]),
        b._h: dict(func=0x71, values=[struct.pack("<Q", 0x1234_5678), struct.pack("<i", 6),
                                      struct.pack("<QQQ", 2, 3, 4)]),
    }
    monkeypatch.setattr(pcg.KernelNode, "driver_params", lambda self: _params(**params[self._h]))
    monkeypatch.setattr(pcg.Graph, "nodes", property(lambda self: list(self.table.nodes.values())))
    calls = []

    def read(p):
        kp = (ctypes.c_void_p * 3).from_address(p.kernelParams)
        return [ctypes.string_at(kp[0], 8), ctypes.string_at(kp[1], 4),
                ctypes.string_at(kp[2], 24)]

    def exec_set(exe, node, p):
        calls.append(("exec", int(exe), int(node), read(p), (p.gridDimX, p.blockDimX)))
        return (dr.CUresult.CUDA_SUCCESS,)
    exec_set.__name__ = "cuGraphExecKernelNodeSetParams"

    def graph_set(node, p):
        calls.append(("graph", int(node), read(p)))
        return (dr.CUresult.CUDA_SUCCESS,)
    graph_set.__name__ = "cuGraphKernelNodeSetParams"
    monkeypatch.setattr(dr, "cuGraphExecKernelNodeSetParams", exec_set)
    monkeypatch.setattr(dr, "cuGraphKernelNodeSetParams", graph_set)
    owner = Owner()
    exe = pcg.GraphExec.wrap(0x6000_1000, owner=owner, graph=g)
    return g, a, b, exe, calls


def test_rebind_patches_pointer_and_struct_slots(scene):
    g, a, b, exe, calls = scene
    assert exe.rebind(FakeArray(OLD), FakeArray(NEW)) == 3
    assert len(calls) == 1 and calls[0][:3] == ("exec", 0x6000_1000, a._h)
    args = calls[0][3]
    assert struct.unpack("<Q", args[0])[0] == NEW
    assert struct.unpack("<i", args[1])[0] == 5
    assert struct.unpack("<QQQ", args[2]) == (1, NEW, NEW)
    # the exec's copy now holds NEW: rebinding OLD again finds nothing
    with pytest.raises(ArgumentError, match="no kernel argument .* holds 0x7f0000004000"):
        exe.rebind(OLD, NEW)
    assert exe.rebind(OLD, NEW, missing_ok=True) == 0
    assert exe.rebind(NEW, OLD) == 3  # and back


def test_set_arg_on_a_captured_node_by_index(scene):
    g, a, b, exe, calls = scene
    exe.set_arg(b, 1, 42)
    assert struct.unpack("<i", calls[-1][3][1])[0] == 42
    exe.set_arg(b, 0, FakeArray(NEW))
    args = calls[-1][3]
    assert struct.unpack("<Q", args[0])[0] == NEW and struct.unpack("<i", args[1])[0] == 42
    with pytest.raises(ArgumentError, match="no parameter names"):
        exe.set_arg(b, "n", 1)
    with pytest.raises(ArgumentError, match="index 3 out of range: the kernel has 3"):
        exe.set_arg(b, 3, 1)
    with pytest.raises(ArgumentError, match="3 bytes given for a 4-byte argument"):
        exe.set_arg(b, 1, b"abc")
    assert len(calls) == 2  # refused values made no call


def test_set_params_on_a_captured_node(scene):
    g, a, b, exe, calls = scene
    exe.set_params(a, args={1: 9}, grid=4, block=(64,))
    kind, _, node, args, dims = calls[-1]
    assert (kind, node, dims) == ("exec", a._h, (4, 64))
    assert struct.unpack("<i", args[1])[0] == 9
    with pytest.raises(ArgumentError, match="2 arguments given; the kernel has 3"):
        exe.set_params(a, args=[1, 2])
    a.set_params(args={2: struct.pack("<QQQ", 7, 8, 9)})  # in the graph
    assert calls[-1][0] == "graph" and struct.unpack("<QQQ", calls[-1][2][2]) == (7, 8, 9)


def test_a_failed_exec_set_keeps_the_old_bytes(scene, monkeypatch):
    g, a, b, exe, calls = scene

    def refuse(exe_h, node_h, p):
        return (dr.CUresult.CUDA_ERROR_INVALID_VALUE,)
    refuse.__name__ = "cuGraphExecKernelNodeSetParams"
    monkeypatch.setattr(dr, "cuGraphExecKernelNodeSetParams", refuse)
    with pytest.raises(CudaError, match="cuGraphExecKernelNodeSetParams"):
        exe.set_arg(a, 1, 77)
    state = exe.exec_node(a).args
    assert struct.unpack("<i", state.get(1))[0] == 5


def test_rebind_needs_the_graph(cpu_device):
    exe = pcg.GraphExec.wrap(0x6000_2000)
    with pytest.raises(pcg.PyCudaGraphError, match="rebind needs the exec's graph"):
        exe.rebind(OLD, NEW)


# wrap ---------------------------------------------------------------------------------

@pytest.mark.parametrize("handle,text", [(None, "expected an int"), (0, "null"),
                                         (True, "expected a"), ("0x10", "expected an int")])
def test_wrap_refuses_bad_handles(handle, text):
    with pytest.raises(ArgumentError, match=text):
        pcg.Graph.wrap(handle)
    with pytest.raises(ArgumentError, match=text):
        pcg.GraphExec.wrap(handle)


def test_wrap_keeps_the_owner_and_destroys_nothing(cpu_device, monkeypatch):
    destroyed = []
    monkeypatch.setattr(pcg.Graph, "close", pcg.Graph.close)
    owner = Owner()
    ref = weakref.ref(owner)
    g = pcg.Graph.wrap(dr.CUgraph(0x6100_0000), owner=owner)
    exe = pcg.GraphExec.wrap(0x6100_1000, owner=owner, graph=g)
    assert int(g.handle) == 0x6100_0000 and int(exe.handle) == 0x6100_1000
    del owner
    gc.collect()
    assert ref() is not None  # kept alive by the adopted objects
    assert g._fin is None  # never destroyed by pycudagraph
    exe.close()
    with pytest.raises(ClosedError):
        exe.handle
    g.close()
    del g, exe
    gc.collect()
    assert ref() is None and destroyed == []


def test_exec_wrap_wants_a_graph_object(cpu_device):
    with pytest.raises(ArgumentError, match="graph must be a pycudagraph.Graph"):
        pcg.GraphExec.wrap(0x6200_0000, graph=0x6200_1000)


def test_repeated_updates_hold_one_object_per_argument(scene):
    g, a, b, exe, calls = scene
    arrays = [FakeArray(NEW + 0x100 * k) for k in range(5)]
    for arr in arrays:
        exe.set_arg(b, 0, arr)
    rec = exe.exec_node(b)
    assert rec.keep == {("arg", 0): (arrays[-1],)}  # one place per argument


# On the GPU: captured graphs rebound, updated and wrapped -----------------------------

@pytest.mark.gpu
def test_rebind_on_a_captured_graph_patches_pointer_and_struct_slots(mod, stream):
    xs = np.arange(N, dtype=np.float32)
    x, x_new = buf_of(xs), buf_of(xs * 10)
    y, y2 = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = captured_graph(mod, stream, x, y, y2)
    exe = g.instantiate()
    assert exe.rebind(x, x_new) == 2  # one pointer argument, one slot inside the struct
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y), 2 * xs * 10)
    np.testing.assert_allclose(read_back(y2), xs * 10 + 1)
    with pytest.raises(pcg.ArgumentError, match="no kernel argument"):
        exe.rebind(x, x_new)
    assert exe.rebind(x, x_new, missing_ok=True) == 0


@pytest.mark.gpu
def test_set_arg_and_set_params_on_captured_nodes(mod, stream):
    xs = np.arange(N, dtype=np.float32)
    x, y, y2 = buf_of(xs), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = captured_graph(mod, stream, x, y, y2)
    k = [n for n in g.nodes if n.kernel_name == "scale2"][0]
    exe = g.instantiate()
    exe.set_arg(k, 2, 3.0)  # by index: the float
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y), 3 * xs)
    with pytest.raises(pcg.ArgumentError, match="does not fit 4 bytes"):
        exe.set_arg(k, 3, 1 << 40)  # n is a 4-byte int
    exe.set_params(k, args={2: np.float32(4.0)}, grid=N // 128, block=128)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y), 4 * xs)
    k.set_params(args={2: 5.0})  # in the graph: a new exec sees it
    exe2 = g.instantiate()
    exe2.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y), 5 * xs)


@pytest.mark.gpu
def test_wrap_a_graph_and_exec_made_elsewhere(mod, stream):
    xs = np.arange(N, dtype=np.float32)
    x, y, y2 = buf_of(xs), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = captured_graph(mod, stream, x, y, y2)
    with paused():  # an exec of its own: a reused one's nodes are another graph's
        exe = g.instantiate()
    wg = pcg.Graph.wrap(int(g.handle), owner=g)
    assert [n.kernel_name for n in wg.nodes] == ["scale2", "copy_struct"]
    assert "scale2" in wg.to_dot()
    we = pcg.GraphExec.wrap(int(exe.handle), owner=exe, graph=wg)
    x2 = buf_of(xs + 1)
    assert we.rebind(x, x2) == 2
    we.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(read_back(y), 2 * (xs + 1))
    we.close()
    wg.close()
    exe.launch(stream)  # not destroyed by the wrappers
    stream.synchronize()
