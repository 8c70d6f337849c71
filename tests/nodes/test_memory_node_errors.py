"""Misuse: sizes on every set-params path (memcpy and memset, in a graph and in an exec).

``add_memcpy``/``add_memset`` checked sizes; their ``set_params`` (graph and exec) did not
always: a memset kept only the raw pointer. Now the destination object is kept (or the
raw address's allocation is sized with ``cuMemGetAddressRange``) and every path checks.
"""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.nodes import MemsetParams
from pycudagraph.nodes.copy_params import memcpy_args, memset_params

from tests.support.fakes import fake_buffer
from tests.support.healthy import assert_small_graph_works


def current(nbytes_row=64, count=16, es=4, height=1, pitch=0, dst=0x1000):
    return MemsetParams(dst=dst, value=0, element_size=es, count=count, height=height, pitch=pitch)


@pytest.mark.parametrize("changes, words", [
    (dict(count=17), "memset of 68 bytes .*does not fit the destination \\(64 bytes\\)"),
    (dict(element_size=2, count=33), "66 bytes"),
    (dict(count=8, height=3, pitch=32), "does not fit"),  # 32*2 + 32 = 96 > 64
    (dict(height=2), "does not fit"),
])
def test_memset_update_overrun_checked_against_kept_destination(changes, words):
    buf = fake_buffer(64)
    with pytest.raises(pcg.ArgumentError, match=words):
        memset_params(current(), kept_dst=buf, **changes)


def test_memset_update_within_kept_destination_passes():
    buf = fake_buffer(64)
    p = memset_params(current(), kept_dst=buf, count=8, element_size=2, value=7)
    assert (int(p.dst), p.width, p.elementSize, p.value) == (buf.ptr, 8, 2, 7)


def test_memset_new_destination_checked():
    with pytest.raises(pcg.ArgumentError, match="does not fit the destination \\(32 bytes\\)"):
        memset_params(current(), dst=fake_buffer(32), kept_dst=fake_buffer(64))


@pytest.mark.parametrize("dst, src, nbytes, words", [
    (32, 64, None, "64 bytes \\(nbytes\\) does not fit the destination \\(32 bytes\\)"),
    (64, 32, 48, "48 bytes .*does not fit the source \\(32 bytes\\)"),
    (64, 64, 65, "does not fit"),
    (64, 64, 2**40, "does not fit"),
])
def test_memcpy_overrun(dst, src, nbytes, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        memcpy_args(fake_buffer(dst), fake_buffer(src), nbytes)


# --- on the GPU -----------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_memset_set_params_overrun(helpers):
    buf = pcg.DeviceBuffer(64)
    g = pcg.Graph()
    n = g.add_memset(buf, 1, 64)
    exe = g.instantiate()
    for target in (lambda **c: n.set_params(**c), lambda **c: exe.set_params(n, **c)):
        with pytest.raises(pcg.ArgumentError, match="does not fit the destination \\(64 bytes\\)"):
            target(count=65)
        with pytest.raises(pcg.ArgumentError, match="does not fit"):
            target(element_size=4, count=17)
        with pytest.raises(pcg.ArgumentError, match="does not fit"):
            target(count=32, height=3, pitch=32)
        with pytest.raises(pcg.ArgumentError, match="does not fit the destination \\(16 bytes\\)"):
            target(dst=pcg.DeviceBuffer(16))
    small = pcg.DeviceBuffer(16)
    exe.set_params(n, dst=small, count=16)
    with pytest.raises(pcg.ArgumentError, match="\\(16 bytes\\)"):
        exe.set_params(n, count=17)  # checked against the new destination the exec keeps
    s = pcg.Stream()
    exe.launch(s)
    s.synchronize()
    assert np.all(small.to_numpy(np.uint8) == 1)
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_memcpy_set_params_overrun(helpers):
    a, b = pcg.DeviceBuffer(64), pcg.DeviceBuffer(64)
    a.copy_from(np.arange(64, dtype=np.uint8))
    g = pcg.Graph()
    n = g.add_memcpy(b, a)
    exe = g.instantiate()
    for target in (lambda **c: n.set_params(**c), lambda **c: exe.set_params(n, **c)):
        with pytest.raises(pcg.ArgumentError, match="does not fit"):
            target(nbytes=65)
        with pytest.raises(pcg.ArgumentError, match="destination \\(32 bytes\\)"):
            target(dst=pcg.DeviceBuffer(32))
        with pytest.raises(pcg.ArgumentError, match="source \\(16 bytes\\)"):
            target(src=pcg.DeviceBuffer(16))
    s = pcg.Stream()
    exe.launch(s)
    s.synchronize()
    assert np.array_equal(b.to_numpy(np.uint8), np.arange(64, dtype=np.uint8))
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_raw_pointers_are_sized_by_their_allocation(helpers):
    a, b = pcg.DeviceBuffer(256), pcg.DeviceBuffer(128)
    g = pcg.Graph()
    with pytest.raises(pcg.ArgumentError, match="destination \\(128 bytes\\)"):
        g.add_memcpy(b.ptr, a.ptr, 256)
    with pytest.raises(pcg.ArgumentError, match="destination \\(64 bytes\\)"):
        g.add_memset(b.ptr + 64, 0, 65)
    n = g.add_memset(b.ptr, 0, 128)
    with pytest.raises(pcg.ArgumentError, match="does not fit"):
        n.set_params(count=129)
    g.add_memcpy(b.ptr, a.ptr, 128)
    assert_small_graph_works(helpers)


@pytest.mark.gpu
def test_gpu_captured_memset_update_checked(helpers):
    """A memset read back from a capture has only a raw address; its allocation sizes it."""
    buf = pcg.DeviceBuffer(64)
    s = pcg.Stream()
    from pycudagraph._cuda import call, rt
    with pcg.capture(s) as cap:
        call(rt.cudaMemsetAsync, buf.ptr, 3, 64, s.ptr)
    (node,) = [x for x in cap.graph.nodes if x.type == "memset"]
    exe = cap.graph.instantiate()
    with pytest.raises(pcg.ArgumentError, match="does not fit"):
        exe.set_params(node, count=128)
    with pytest.raises(pcg.ArgumentError, match="does not fit"):
        node.set_params(count=65)
    exe.launch(s)
    s.synchronize()
    assert np.all(buf.to_numpy(np.uint8) == 3)
    assert_small_graph_works(helpers)
