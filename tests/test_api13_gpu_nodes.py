"""GPU tests of the runtime graph API (issue 13), part 2: generic node params, 2D/3D copies,
external semaphores, edge ports and batch memory-op nodes. Part 1 is test_api13_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import pycudagraph as pcg
from tests.test_api13_gpu import N, _buf, mod  # noqa: F401 - shared kernels and fixture

pytestmark = pytest.mark.gpu


def test_generic_memset_node_added_and_changed(stream):
    rt = pytest.importorskip("cuda.bindings.runtime")
    buf = pcg.DeviceBuffer(4 * N)

    def memset(value):
        p = rt.cudaGraphNodeParams()
        p.type = rt.cudaGraphNodeType.cudaGraphNodeTypeMemset
        p.memset.dst = buf.ptr
        p.memset.value = value
        p.memset.elementSize = 4
        p.memset.width = N
        p.memset.height = 1
        p.memset.pitch = 0
        return p
    g = pcg.Graph()
    node = g.add_node(memset(7), keep=[buf])
    assert node.type == "memset"
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    out = np.empty(N, np.uint32)
    buf.copy_to(out)
    assert (out == 7).all()
    exe.set_node_params(node, memset(9))
    exe.launch(stream)
    stream.synchronize()
    buf.copy_to(out)
    assert (out == 9).all()
    node.set_node_params(memset(11))
    g.instantiate().launch(stream)
    stream.synchronize()
    buf.copy_to(out)
    assert (out == 11).all()
    from pycudagraph._cuda import versions
    if versions.driver_version() >= 13020:
        assert int(node.node_params.memset.value) == 11
    else:
        with pytest.raises(pcg.NotSupportedError):
            node.node_params


# Item 8b: pitched 2D/3D copies ------------------------------------------------------

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


# Item 8c: external semaphores (no real semaphore on the GPU machine) -------------------

def test_import_of_a_non_semaphore_fd_raises_cleanly():
    """In a subprocess (a driver crash must not take the run down): importing /dev/null as
    a timeline semaphore raises CudaError naming cudaImportExternalSemaphore."""
    import subprocess
    import sys
    code = ("import os, pycudagraph as pcg\n"
            "fd = os.open('/dev/null', os.O_RDONLY)\n"
            "try:\n"
            "    pcg.ExternalSemaphore.import_fd(fd)\n"
            "    print('IMPORTED')\n"
            "except pcg.CudaError as e:\n"
            "    print('CUDAERROR', e.api)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CUDAERROR cudaImportExternalSemaphore" in proc.stdout, proc.stdout


def test_dependency_ports_read_back(mod):
    x, y = _buf(np.ones(N)), pcg.DeviceBuffer(4 * N)
    g = pcg.Graph()
    a = g.add_kernel(mod["scale2"], N // 256, 256, (x, y, 2.0, N))
    b = g.add_kernel(mod["scale2"], N // 256, 256, (x, y, 3.0, N))
    c = g.add_empty(deps=[a])
    g.add_dependency(a, b, port="programmatic")
    assert b.dependency_ports == {a: "programmatic"}
    assert a.dependent_ports == {b: "programmatic", c: "default"}


# Batch memory-op nodes (in a subprocess: a wait that is never met would hang) ---------

_BATCH = r"""
import numpy as np, pycudagraph as pcg
flag, out = pcg.DeviceBuffer(8), pcg.DeviceBuffer(4 * 256)
flag.copy_from(np.zeros(2, np.uint32))
g = pcg.Graph()
wait = g.add_batch_mem_op(pcg.wait_value(flag, 1, "geq"))    # branch 1 waits ...
g.add_memset(out, 5, 256, element_size=4, deps=[wait])       # ... then writes out
write = g.add_batch_mem_op(pcg.write_value(flag, 1))         # branch 2 releases it
assert [o.kind for o in wait.params] == ["wait"] and write.params[0].value == 1
s = pcg.Stream()
exe = g.instantiate()
exe.launch(s)
s.synchronize()
res = np.empty(256, np.uint32); out.copy_to(res)
assert (res == 5).all()
exe.set_params(wait, ops=pcg.wait_value(flag, 2, "eq"))
exe.set_params(write, ops=pcg.write_value(flag, 2))
exe.launch(s)
s.synchronize()
f = np.empty(2, np.uint32); flag.copy_to(f)
assert f[0] == 2
print("BATCH OK")
"""


def test_batch_mem_op_branch_waits_for_a_value_another_writes():
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _BATCH], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "BATCH OK" in proc.stdout, proc.stdout + proc.stderr
