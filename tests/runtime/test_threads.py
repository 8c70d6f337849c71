"""GPU tests: every call works from any Python thread.

Threads build, instantiate, launch and update their own graphs and execs (results
checked); an exec made in the main thread is updated and launched from another thread;
host-node errors reach the thread whose exec ran them. Cases that crashed before run in
a subprocess with a timeout.
"""

import threading

import numpy as np
import pytest

import pycudagraph as pcg
from tests.support.lifetime_util import run_python, small_graph_works

pytestmark = pytest.mark.gpu

N = 1024
THREADS = 8


def run_threads(fn, n=THREADS):
    """Run ``fn(i)`` in ``n`` threads started together; re-raise the first failure."""
    errors = [None] * n
    barrier = threading.Barrier(n)

    def body(i):
        try:
            barrier.wait()
            fn(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    for exc in errors:
        if exc is not None:
            raise exc


@pytest.fixture
def fresh_module():
    """A module no thread has loaded yet: the threads race on the lazy load."""
    return pcg.Module.from_file("helpers.cu")


def test_eight_threads_build_instantiate_launch_their_own_graphs(fresh_module, helpers):
    fill, axpy = fresh_module["fill"], fresh_module["axpy"]

    def work(i):
        s = pcg.Stream()
        x, y = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
        for it in range(20):
            a, v = float(i + 1), float(it)
            g = pcg.Graph()
            k1 = g.add_kernel(fill, N // 256, 256, (x, v, N))
            k2 = g.add_kernel(fill, N // 256, 256, (y, 1.0, N))
            g.add_kernel(axpy, N // 256, 256, (y, x, a, N), deps=[k1, k2])
            exe = g.instantiate()
            exe.launch(s)
            s.synchronize()
            out = y.to_numpy(np.float32)
            assert (out == np.float32(1.0 + a * v)).all(), (i, it, out[:4])
            exe.close()
            g.close()

    run_threads(work)
    small_graph_works(helpers)


def test_threads_update_and_launch_their_own_execs(helpers):
    fill, scale = helpers["fill"], helpers["scale"]

    def work(i):
        s = pcg.Stream()
        bufs = [pcg.DeviceBuffer(4 * N) for _ in range(2)]
        g = pcg.Graph()
        kf = g.add_kernel(fill, N // 256, 256, (bufs[0], 1.0, N))
        ks = g.add_kernel(scale, N // 256, 256, (bufs[0], 1.0, N), deps=[kf])
        exe = g.instantiate()
        for it in range(50):
            target = bufs[it % 2]
            v, a = float(i * 100 + it), float(1 + it % 3)
            if it % 2:
                exe.set_params(kf, args={"y": target, "v": v})
                exe.set_params(ks, args=(target, a, N))
            else:
                exe.set_arg(kf, 0, target)
                exe.set_arg(kf, "v", v)
                exe.set_arg(ks, 0, target)
                exe.set_arg(ks, 1, a)
            exe.launch(s)
            exe.synchronize()
            out = target.to_numpy(np.float32)
            assert (out == np.float32(v * a)).all(), (i, it, out[:4])

    run_threads(work)
    small_graph_works(helpers)


def test_eager_launches_and_captures_from_threads(helpers):
    fill, add_one = helpers["fill"], helpers["add_one"]

    def work(i):
        s = pcg.Stream()
        buf = pcg.DeviceBuffer(4 * N)
        fill.launch(N // 256, 256, (buf, float(i), N), stream=s)
        with pcg.capture(s, mode="thread_local") as cap:
            for _ in range(i + 1):
                add_one.launch(N // 256, 256, (buf, N), stream=s)
        exe = cap.graph.instantiate()
        exe.launch(s)
        exe.launch(s)
        s.synchronize()
        out = buf.to_numpy(np.float32)
        assert (out == np.float32(i + 2 * (i + 1))).all(), (i, out[:4])
        assert [n.kernel_name for n in cap.graph.nodes] == ["add_one"] * (i + 1)

    run_threads(work)
    small_graph_works(helpers)


def test_host_node_errors_reach_the_thread_whose_exec_ran_them(helpers):
    def work(i):
        s = pcg.Stream()
        g = pcg.Graph()

        def boom(i=i):
            raise RuntimeError(f"from thread {i}")

        g.add_host(boom)
        exe = g.instantiate()
        with pytest.raises(pcg.HostCallbackError, match=f"from thread {i}$"):
            exe.launch(s)  # raises here if the host node already ran,
            exe.synchronize()  # else here

    run_threads(work)
    small_graph_works(helpers)


def test_second_thread_sets_args_and_launches_an_exec_made_in_main():
    """Crashed before (no current context in the second thread): run it in a subprocess."""
    res = run_python("""
        import threading
        import numpy as np
        import pycudagraph as pcg

        mod = pcg.Module.from_file("helpers.cu")
        s = pcg.Stream()
        buf, other = pcg.DeviceBuffer(4096), pcg.DeviceBuffer(4096)
        g = pcg.Graph()
        k = g.add_kernel(mod["fill"], 4, 256, (buf, 1.0, 1024))
        exe = g.instantiate()
        with pcg.capture(s) as cap:
            mod["add_one"].launch(4, 256, (buf, 1024), stream=s)
        captured = cap.graph.nodes[0]
        seen = {}

        def second():
            seen["name"] = captured.kernel_name  # first CUDA use in this thread: a driver call
            exe.set_arg(k, "v", 9.0)
            exe.launch(s)
            exe.synchronize()
            exe.set_params(k, args={0: other, 1: 4.0})
            exe.launch(s)
            s.synchronize()
            seen["grid"] = captured.params.grid
            mod["add_one"].launch(4, 256, (other, 1024), stream=s)
            s.synchronize()

        t = threading.Thread(target=second)
        t.start()
        t.join(120)
        assert (buf.to_numpy(np.float32) == 9.0).all()
        assert (other.to_numpy(np.float32) == 5.0).all()
        assert seen == {"name": "add_one", "grid": (4, 1, 1)}, seen
        print("OK")
    """)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().endswith("OK")


def test_fresh_thread_makes_every_kind_of_object():
    """A thread that is the first to touch CUDA in the process: subprocess."""
    res = run_python("""
        import threading
        import numpy as np
        import pycudagraph as pcg

        out = {}

        def first():
            mod = pcg.Module.from_file("helpers.cu")
            s = pcg.Stream()
            ev = pcg.Event()
            buf = pcg.DeviceBuffer(4096)
            pin = pcg.PinnedBuffer(4096)
            g = pcg.Graph()
            k = g.add_kernel(mod["fill"], 4, 256, (buf, 3.0, 1024))
            g.add_memcpy(pin, buf, deps=[k])
            g.add_event_record(ev)
            exe = g.instantiate()
            exe.launch(s)
            s.synchronize()
            out["v"] = float(pin.array(np.float32)[5])

        t = threading.Thread(target=first)
        t.start()
        t.join(120)
        assert out == {"v": 3.0}, out
        print("OK")
    """)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().endswith("OK")
