"""Issue 13 on the GPU: graphs made elsewhere, captured kernel-node arguments, rebind,
describe, IDs and flags, graph memory, user objects, capture control, generic node params.

Written in a session without device time: the next session runs them
(``python -m pytest -m gpu -q tests/test_api13_gpu.py``).
"""

from __future__ import annotations

import gc
import struct
import threading

import numpy as np
import pytest

import pycudagraph as pcg

pytestmark = pytest.mark.gpu

N = 1 << 12
SRC = r"""
struct Ptrs { const float* x; float* y; int n; };
extern "C" __global__ void scale2(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
extern "C" __global__ void copy_struct(Ptrs p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.y[i] = p.x[i] + 1.0f;
}
"""


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(SRC, name="api13.cu").compile()


def _buf(values):
    return pcg.DeviceBuffer.from_array(np.asarray(values, np.float32))


def _read(buf, n=N):
    out = np.empty(n, np.float32)
    buf.copy_to(out)
    return out


def _captured(mod, stream, x, y, y2):
    """A captured graph: scale2(x -> y, 2.0) then copy_struct({x, y2, N})."""
    blob = struct.pack("<QQi4x", x.ptr, y2.ptr, N)
    with pcg.capture(stream) as cap:
        mod["scale2"].launch(N // 256, 256, (x, y, 2.0, N), stream=stream)
        mod["copy_struct"].launch(N // 256, 256, (blob,), stream=stream)
    return cap.graph


# Item 2: wrap, captured arguments, rebind --------------------------------------------

def test_rebind_on_a_captured_graph_patches_pointer_and_struct_slots(mod, stream):
    xs = np.arange(N, dtype=np.float32)
    x, x_new = _buf(xs), _buf(xs * 10)
    y, y2 = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = _captured(mod, stream, x, y, y2)
    exe = g.instantiate()
    assert exe.rebind(x, x_new) == 2  # one pointer argument, one slot inside the struct
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y), 2 * xs * 10)
    np.testing.assert_allclose(_read(y2), xs * 10 + 1)
    with pytest.raises(pcg.ArgumentError, match="no kernel argument"):
        exe.rebind(x, x_new)
    assert exe.rebind(x, x_new, missing_ok=True) == 0


def test_set_arg_and_set_params_on_captured_nodes(mod, stream):
    xs = np.arange(N, dtype=np.float32)
    x, y, y2 = _buf(xs), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = _captured(mod, stream, x, y, y2)
    k = [n for n in g.nodes if n.kernel_name == "scale2"][0]
    exe = g.instantiate()
    exe.set_arg(k, 2, 3.0)  # by index: the float
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y), 3 * xs)
    with pytest.raises(pcg.ArgumentError, match="does not fit 4 bytes"):
        exe.set_arg(k, 3, 1 << 40)  # n is a 4-byte int
    exe.set_params(k, args={2: np.float32(4.0)}, grid=N // 128, block=128)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y), 4 * xs)
    k.set_params(args={2: 5.0})  # in the graph: a new exec sees it
    exe2 = g.instantiate()
    exe2.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y), 5 * xs)


def test_wrap_a_graph_and_exec_made_elsewhere(mod, stream):
    xs = np.arange(N, dtype=np.float32)
    x, y, y2 = _buf(xs), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = _captured(mod, stream, x, y, y2)
    exe = g.instantiate()
    wg = pcg.Graph.wrap(int(g.handle), owner=g)
    assert [n.kernel_name for n in wg.nodes] == ["scale2", "copy_struct"]
    assert "scale2" in wg.to_dot()
    we = pcg.GraphExec.wrap(int(exe.handle), owner=exe, graph=wg)
    x2 = _buf(xs + 1)
    assert we.rebind(x, x2) == 2
    we.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y), 2 * (xs + 1))
    we.close()
    wg.close()
    exe.launch(stream)  # not destroyed by the wrappers
    stream.synchronize()


def test_rebind_a_torch_cuda_graph_input():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 32)).cuda()
    static_in = torch.randn(16, 64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    tg = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.no_grad(), torch.cuda.graph(tg):
        static_out = model(static_in)
    tg.instantiate()
    g = pcg.Graph.wrap(tg.raw_cuda_graph(), owner=tg)
    exe = pcg.GraphExec.wrap(tg.raw_cuda_graph_exec(), owner=tg, graph=g)
    other = torch.randn(16, 64, device="cuda")
    assert exe.rebind(static_in, other) >= 1
    exe.launch(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    with torch.no_grad():
        torch.testing.assert_close(static_out, model(other))


# Items 3 and 4: the listing, IDs and flags ---------------------------------------------

def test_describe_lists_a_captured_graph(mod, stream):
    x, y, y2 = _buf(np.ones(N)), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    g = _captured(mod, stream, x, y, y2)
    lines = str(g).splitlines()
    assert lines[0].endswith("2 nodes, 1 edges")
    assert "[0] kernel" in lines[1] and "scale2<<<(16,1,1), (256,1,1), 0>>>" in lines[1]
    assert lines[1].endswith("deps: -")
    assert "[1] kernel" in lines[2] and "copy_struct<<<" in lines[2]
    assert lines[2].endswith("deps: 0")
    assert "func=0x" in lines[1] and "func=0x0 " not in lines[1]


def test_ids_on_this_driver(stream):
    from pycudagraph._cuda import versions
    g = pcg.Graph()
    a = g.add_empty()
    b = g.add_empty(deps=[a])
    if versions.driver_version() < 13010 or not hasattr(versions.rt, "cudaGraphGetId"):
        with pytest.raises(pcg.NotSupportedError, match="13.1"):
            g.id
        with pytest.raises(pcg.NotSupportedError, match="13.1"):
            a.local_id
        assert "id=-" in g.describe()
        return
    assert isinstance(g.id, int) and a.local_id != b.local_id
    assert a.tools_id != b.tools_id
    assert a.containing_graph is g
    exe = g.instantiate()
    assert isinstance(exe.id, int)
    assert f"id={a.local_id}" in g.describe()


def test_exec_flags_read_back():
    g = pcg.Graph()
    g.add_empty()
    assert g.instantiate().flags == {"auto_free_on_launch": False, "device_launch": False,
                                     "use_node_priority": False}
    exe = g.instantiate(auto_free_on_launch=True, use_node_priority=True)
    flags = exe.flags
    assert flags["auto_free_on_launch"] and not flags["device_launch"]
    # what CUDA reports, decoded bit by bit (the CUDA 13.0 driver seen on an H100 does not
    # report UseNodePriority back, though instantiation accepted it)
    bits = int(pcg._cuda.call(pcg._cuda.rt.cudaGraphExecGetFlags, exe.handle))
    prio = int(pcg._cuda.rt.cudaGraphInstantiateFlags.cudaGraphInstantiateFlagUseNodePriority)
    assert flags["use_node_priority"] == bool(bits & prio)


# Item 5: graph memory ---------------------------------------------------------------

def test_graph_memory_figures_move_as_documented(stream):
    pcg.graph_mem_trim()
    pcg.graph_mem_reset_high()
    base = pcg.graph_mem_info()
    g = pcg.Graph()
    alloc = g.add_mem_alloc(64 << 20)
    g.add_mem_free(alloc, deps=[alloc])
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    after = pcg.graph_mem_info()
    assert after["reserved"] >= base["reserved"] + (64 << 20)  # the pool grew
    assert after["used_high"] >= 64 << 20  # the allocation was live during the launch
    # the exec keeps its allocation's memory mapped for the next launch, though the
    # graph freed it (cudaGraphMemAttrUsedMemCurrent: memory associated with graphs)
    assert after["used"] >= base["used"] + (64 << 20)
    exe.close()
    g.close()
    gc.collect()
    pcg.graph_mem_trim()
    trimmed = pcg.graph_mem_info()
    assert trimmed["used"] <= base["used"]  # the exec is gone: nothing is mapped for it
    assert trimmed["reserved"] < after["reserved"]  # trim gave the unused memory back
    pcg.graph_mem_reset_high()
    assert pcg.graph_mem_info()["used_high"] == trimmed["used"]


# Item 6: user objects ---------------------------------------------------------------

class _Payload:
    pass


def _released(ref, seconds=5.0):
    import time
    deadline = time.monotonic() + seconds
    while ref() is not None and time.monotonic() < deadline:
        pcg.UserObject.collect()
        gc.collect()
        time.sleep(0.01)
    return ref() is None


def test_user_object_lives_as_long_as_graphs_clones_and_execs(stream):
    import weakref
    obj = _Payload()
    ref = weakref.ref(obj)
    g = pcg.Graph()
    g.add_empty()
    uo = g.retain_user_object(obj)
    del obj
    clone = g.clone()
    exe = g.instantiate()
    uo.close()
    g.close()
    assert not _released(ref, 0.3)  # the clone and the exec hold it
    clone.close()
    exe.launch(stream)
    assert not _released(ref, 0.3)
    stream.synchronize()
    exe.close()
    del clone, exe, g
    assert _released(ref)


def test_user_object_released_from_cuda_thread_while_python_is_busy(stream):
    """CUDA's destructor thread runs no Python: a thread holding the GIL in a tight loop
    while CUDA destroys the graph does not block the release (the reaper does it after)."""
    import weakref
    obj = _Payload()
    ref = weakref.ref(obj)
    g = pcg.Graph()
    g.add_empty()
    g.retain_user_object(obj).close()
    del obj
    done = threading.Event()

    def spin():
        x = 0
        while not done.is_set():
            x += 1
    t = threading.Thread(target=spin)
    t.start()
    g.close()
    del g
    try:
        assert _released(ref)
    finally:
        done.set()
        t.join()


# Item 7: capture control ------------------------------------------------------------

def test_capture_then_patch_one_node_by_hand(mod, stream):
    """capture_info during a capture, a kernel node added by hand to the capture's graph,
    joined into the capture with update_dependencies('set'); the rest is captured after."""
    xs = np.arange(N, dtype=np.float32)
    x, y, y2 = _buf(xs), pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    blob = struct.pack("<QQi4x", y.ptr, y2.ptr, N)
    assert pcg.capture_info(stream).status == "none"
    with pcg.capture(stream) as cap:
        mod["scale2"].launch(N // 256, 256, (x, y, 2.0, N), stream=stream)
        info = cap.info
        assert info.status == "active" and info.id > 0 and len(info.dependencies) == 1
        assert pcg.capture_info(stream).id == info.id
        hand = info.graph.add_kernel(mod["scale2"], N // 256, 256, (y, y, 3.0, N),
                                     deps=info.dependencies)
        cap.update_dependencies([hand], mode="set")
        assert cap.info.dependencies == [hand]
        mod["copy_struct"].launch(N // 256, 256, (blob,), stream=stream)  # y2 = y + 1
    g = cap.graph
    assert g is info.graph and len(g) == 3
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y2), 6 * xs + 1)
    exe.set_arg(hand, "a", 4.0)  # the hand-made node keeps its signature
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y2), 8 * xs + 1)


def test_capture_mode_context_manager(stream):
    with pcg.capture_mode("relaxed") as cm:
        assert cm.previous == "global"
        with pcg.capture_mode("thread_local") as inner:
            assert inner.previous == "relaxed"
    with pcg.capture_mode("global") as again:
        assert again.previous == "global"


def test_recapture_into_the_same_graph_or_a_clear_error(mod, stream):
    from pycudagraph._cuda import versions
    xs = np.arange(N, dtype=np.float32)
    x, y = _buf(xs), pcg.DeviceBuffer(4 * N)
    with pcg.capture(stream) as cap:
        mod["scale2"].launch(N // 256, 256, (x, y, 2.0, N), stream=stream)
    g = cap.graph
    if versions.driver_version() < 13030 or not hasattr(versions.rt, "cudaStreamBeginRecaptureToGraph"):
        with pytest.raises(pcg.NotSupportedError, match="13.3"):
            with pcg.recapture(stream, g):
                pass
        return
    with pcg.recapture(stream, g) as rc:
        mod["scale2"].launch(N // 256, 256, (x, y, 5.0, N), stream=stream)
    assert rc.graph is g and len(g) == 1
    g.instantiate().launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(_read(y), 5 * xs)


# Item 8: generic node params --------------------------------------------------------
