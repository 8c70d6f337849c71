"""Pitched 2D/3D copies on the CPU: cudaMemcpy3DParms built from numpy arrays (host
memory: no CUDA call), every bound checked before CUDA, and the add / set calls made with
the struct (recorded in place of cuda.bindings). On the GPU (marker ``gpu``): sub-boxes
match numpy, and an exec update of a box."""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.nodes.copy_params import copy3d_params
from tests.support.fakes import fake_graph, fake_node

_OK = rt.cudaError_t.cudaSuccess


def test_params_of_a_sub_box():
    src = np.zeros((4, 6, 10), np.float32)  # slices, rows, columns
    dst = np.zeros((2, 3, 5), np.float32)
    p = copy3d_params(dst, src, width=5 * 4, height=3, depth=2, src_pitch=10 * 4, src_rows=6,
                      src_pos=(2 * 4, 1, 1), dst_pitch=5 * 4)
    assert int(p.srcPtr.ptr) == src.ctypes.data and int(p.dstPtr.ptr) == dst.ctypes.data
    assert (p.srcPtr.pitch, p.srcPtr.ysize, p.dstPtr.pitch, p.dstPtr.ysize) == (40, 6, 20, 3)
    assert (p.srcPos.x, p.srcPos.y, p.srcPos.z) == (8, 1, 1)
    assert (p.dstPos.x, p.dstPos.y, p.dstPos.z) == (0, 0, 0)
    assert (p.extent.width, p.extent.height, p.extent.depth) == (20, 3, 2)
    assert int(p.kind) == int(rt.cudaMemcpyKind.cudaMemcpyHostToHost)


@pytest.mark.parametrize("kwargs,text", [
    (dict(width=0), "positive extent"),
    (dict(width=48), "pitch 40 is smaller than x \\+ width"),
    (dict(src_pos=(0, 5, 0), height=2), "6 rows per slice is fewer than y \\+ height \\(5 \\+ 2\\)"),
    (dict(depth=5), "past the end of the src \\(960 bytes\\)"),
    (dict(src_pos=(-4, 0, 0)), "must not be negative"),
    (dict(src_pos=(0, 0, 0, 0)), "must be \\(x bytes, y row, z slice\\)"),
    (dict(width=2.5), "width"),
])
def test_bounds_are_checked(kwargs, text):
    src = np.zeros((4, 6, 10), np.float32)
    dst = np.zeros(1 << 12, np.float32)
    args = dict(width=40, height=6, depth=1, src_pitch=40, src_rows=6) | kwargs
    with pytest.raises((pcg.ArgumentError, TypeError, ValueError), match=text):
        copy3d_params(dst, src, **args)


def test_dst_bounds_too():
    with pytest.raises(pcg.ArgumentError, match="past the end of the dst \\(16 bytes\\)"):
        copy3d_params(np.zeros(4, np.float32), np.zeros(64, np.float32), width=8, height=3)


def test_add_and_set_make_their_calls(monkeypatch, cpu_device):
    seen = []

    def add(graph, deps, n, p):
        seen.append(("add", int(graph), [int(d) for d in deps], n, p))
        return _OK, rt.cudaGraphNode_t(0x4700_0000)
    add.__name__ = "cudaGraphAddMemcpyNode"

    def gset(node, p):
        seen.append(("set", int(node), p))
        return (_OK,)
    gset.__name__ = "cudaGraphMemcpyNodeSetParams"

    def eset(exe, node, p):
        seen.append(("exec", int(exe), int(node), p))
        return (_OK,)
    eset.__name__ = "cudaGraphExecMemcpyNodeSetParams"
    monkeypatch.setattr(rt, "cudaGraphAddMemcpyNode", add)
    monkeypatch.setattr(rt, "cudaGraphMemcpyNodeSetParams", gset)
    monkeypatch.setattr(rt, "cudaGraphExecMemcpyNodeSetParams", eset)
    g = fake_graph()
    a = fake_node(g)
    src, dst = np.zeros((8, 8), np.uint8), np.zeros((8, 8), np.uint8)
    node = g.add_memcpy_3d(dst, src, 4, 4, deps=[a], src_pitch=8, dst_pitch=8)
    assert isinstance(node, pcg.MemcpyNode) and node._h == 0x4700_0000
    _, graph, deps, n, p = seen[-1]
    assert (graph, deps, n, p.extent.width, p.extent.height) == (g.table.h, [a._h], 1, 4, 4)
    assert any(x is src for x in g.table.kept(node))
    g.set_memcpy_3d(node, dst, src, 2, 2, src_pitch=8, dst_pitch=8, src_rows=8, src_pos=(4, 4))
    assert seen[-1][0] == "set" and seen[-1][2].srcPos.x == 4
    with pytest.raises(pcg.ArgumentError, match="not a copy node of this graph"):
        g.set_memcpy_3d(a, dst, src, 2)
    exe = pcg.GraphExec.wrap(0x4800_0000, graph=g)
    exe.set_memcpy_3d(node, dst, src, 8, 8)
    assert seen[-1][:3] == ("exec", 0x4800_0000, node._h)
    with pytest.raises(pcg.ArgumentError, match="past the end"):
        exe.set_memcpy_3d(node, dst, src, 8, 9)
    assert len(seen) == 3


# On the GPU ---------------------------------------------------------------------------

def _boxes(stream):
    rng = np.random.default_rng(1)
    host = rng.standard_normal((4, 6, 10)).astype(np.float32)  # slices, rows, columns
    dev = pcg.DeviceBuffer(host.nbytes)
    back = np.zeros((2, 3, 5), np.float32)
    g = pcg.Graph()
    up = g.add_memcpy_3d(dev, host, width=10 * 4, height=6, depth=4)  # whole, host->device
    down = g.add_memcpy_3d(back, dev, width=5 * 4, height=3, depth=2, src_pitch=40,
                           src_rows=6, src_pos=(2 * 4, 1, 1), deps=[up])  # a box, device->host
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(back, host[1:3, 1:4, 2:7])
    return host, dev, back, down, exe


@pytest.mark.gpu
def test_memcpy_3d_sub_boxes_match_numpy(stream):
    host, dev, _, _, _ = _boxes(stream)
    dev2 = pcg.DeviceBuffer(host.nbytes)  # device->device into a second buffer, then back
    g2 = pcg.Graph()
    g2.add_memcpy_3d(dev2, dev, width=40, height=6, depth=4)
    g2.instantiate().launch(stream)
    stream.synchronize()
    out = np.empty_like(host)
    dev2.copy_to(out)
    np.testing.assert_array_equal(out, host)


@pytest.mark.gpu
def test_memcpy_3d_exec_update_of_a_box(stream):
    """cudaGraphExecMemcpyNodeSetParams documents cudaErrorInvalidValue when the original
    or the new memory operands are "multidimensional": whether a pitched box of linear
    memory counts depends on the driver. Either the update is refused with that error and the
    exec goes on copying the old box (the CUDA 13.0 driver on an H100 refuses it), or the
    exec copies the new box."""
    host, dev, back, down, exe = _boxes(stream)
    try:
        exe.set_memcpy_3d(down, back, dev, width=20, height=3, depth=2, src_pitch=40,
                          src_rows=6, src_pos=(0, 3, 2))
        expected = host[2:4, 3:6, 0:5]
    except pcg.CudaError as exc:
        assert exc.api == "cudaGraphExecMemcpyNodeSetParams", exc
        assert exc.name == "cudaErrorInvalidValue", exc
        expected = host[1:3, 1:4, 2:7]  # refused: the exec is unchanged
    back[...] = 0
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(back, expected)
