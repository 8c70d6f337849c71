"""GPU checks of conditional capture, forks and ``exe.apply`` with pycudagraph kernels only.

Each check runs in its own child process (``tests/graph/test_capture_flow.py`` and
``test_apply.py`` start them through :func:`tests.support.watchdog.run_snippet`): a crash
there cannot take the test run down. ``run(name)`` prints ``PASSED name`` at the end.
"""

from __future__ import annotations

import numpy as np

import pycudagraph as pcg

N = 256
SRC = r"""
extern "C" __global__ void set_int(int* x, int v) { if (threadIdx.x == 0 && blockIdx.x == 0) x[0] = v; }
extern "C" __global__ void add_int(int* x, int v) { if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += v; }
extern "C" __global__ void below(const int* c, const int* limit, int* flag)
{ if (threadIdx.x == 0 && blockIdx.x == 0) flag[0] = c[0] < limit[0]; }
extern "C" __global__ void odd(const int* c, unsigned char* flag)
{ if (threadIdx.x == 0 && blockIdx.x == 0) flag[0] = (unsigned char)(c[0] & 1); }
"""


def kernels():
    return pcg.Module.from_file("helpers.cu"), pcg.Program(SRC, name="flow_checks.cu").compile()


def ints(*values) -> pcg.DeviceBuffer:
    buf = pcg.DeviceBuffer(4 * max(len(values), 1))
    buf.copy_from(np.array(values, dtype=np.int32))
    return buf


def put(buf, *values, dtype=np.int32) -> None:
    buf.copy_from(np.array(values, dtype=dtype))


def floats(buf) -> np.ndarray:
    return buf.to_numpy(np.float32)


def check_if() -> None:
    h, _ = kernels()
    s = pcg.Stream()
    y, flag = pcg.DeviceBuffer(4 * N), ints(1)
    with pcg.capture(s) as cap:
        h["fill"].launch(1, 128, (y, 1.0, N), stream=s)
        with cap.if_(flag) as body:
            h["add_one"].launch(1, 128, (y, N), stream=s)
        h["scale"].launch(1, 128, (y, 2.0, N), stream=s)
    g = cap.graph
    kinds = [str(n.type) for n in g.nodes]
    assert kinds == ["kernel", "kernel", "conditional", "kernel"], kinds
    fill, setter, cond, scale = g.nodes
    assert isinstance(cond, pcg.IfNode) and body.node is cond and body.graph is cond.body
    assert setter.kernel_name == "set_condition_of", setter.kernel_name
    assert cond.dependencies == [setter] and scale.dependencies == [cond]
    assert [n.kernel_name for n in cond.body.nodes] == ["add_one"]
    exe = g.instantiate()
    for value, want in ((1, 4.0), (0, 2.0), (7, 4.0)):
        put(flag, value)
        exe.launch(s)
        s.synchronize()
        assert np.all(floats(y) == want), (value, floats(y)[:4])


def check_if_else_and_bool_flag() -> None:
    h, _ = kernels()
    s = pcg.Stream()
    y, flag = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(1)
    with pcg.capture(s) as cap:
        with cap.if_else(flag, dtype="bool") as (then_, else_):
            with then_:
                h["fill"].launch(1, 128, (y, 1.0, N), stream=s)
            with else_:
                h["fill"].launch(1, 128, (y, 2.0, N), stream=s)
    exe = cap.graph.instantiate()
    for value, want in ((1, 1.0), (0, 2.0)):
        put(flag, value, dtype=np.uint8)
        exe.launch(s)
        s.synchronize()
        assert np.all(floats(y) == want), (value, floats(y)[:4])


def count_to(k, s, c, limit, flag):
    """A captured loop: c = 0; while c < limit: c += 1."""
    with pcg.capture(s) as cap:
        k["set_int"].launch(1, 1, (c, 0), stream=s)
        k["below"].launch(1, 1, (c, limit, flag), stream=s)
        with cap.while_(flag):
            k["add_int"].launch(1, 1, (c, 1), stream=s)
            k["below"].launch(1, 1, (c, limit, flag), stream=s)
    return cap


def check_while() -> None:
    _, k = kernels()
    s = pcg.Stream()
    c, limit, flag = ints(0), ints(0), ints(0)
    cap = count_to(k, s, c, limit, flag)
    exe = cap.graph.instantiate()
    for n in (0, 1, 5, 37):
        put(limit, n)
        exe.launch(s)
        s.synchronize()
        got = int(c.to_numpy(np.int32)[0])
        assert got == n, (n, got)
    loop = [n for n in cap.graph.nodes if isinstance(n, pcg.WhileNode)][0]
    names = [n.kernel_name for n in loop.body.nodes]
    assert names == ["add_int", "below", "set_condition_of"], names


def check_switch() -> None:
    h, _ = kernels()
    s = pcg.Stream()
    y, index = pcg.DeviceBuffer(4 * N), ints(0)
    with pcg.capture(s) as cap:
        with cap.switch(index, 3) as branches:
            for i, b in enumerate(branches):
                with b:
                    h["fill"].launch(1, 128, (y, 10.0 * (i + 1), N), stream=s)
    exe = cap.graph.instantiate()
    for i, want in ((0, 10.0), (1, 20.0), (2, 30.0), (3, -1.0), (-1, -1.0)):
        y.copy_from(np.full(N, -1.0, np.float32))
        put(index, i)
        exe.launch(s)
        s.synchronize()
        assert np.all(floats(y) == want), (i, floats(y)[:4])


def check_nested_if_in_while() -> None:
    _, k = kernels()
    s = pcg.Stream()
    c, limit, flag, acc = ints(0), ints(7), ints(0), ints(0)
    is_odd = pcg.DeviceBuffer(1)
    with pcg.capture(s) as cap:
        k["set_int"].launch(1, 1, (c, 0), stream=s)
        k["set_int"].launch(1, 1, (acc, 0), stream=s)
        k["below"].launch(1, 1, (c, limit, flag), stream=s)
        with cap.while_(flag):
            k["add_int"].launch(1, 1, (c, 1), stream=s)
            k["odd"].launch(1, 1, (c, is_odd), stream=s)
            with cap.if_(is_odd, dtype="uint8"):
                k["add_int"].launch(1, 1, (acc, 10), stream=s)
            k["below"].launch(1, 1, (c, limit, flag), stream=s)
    exe = cap.graph.instantiate()
    for n in (0, 1, 4, 7):
        put(limit, n)
        exe.launch(s)
        s.synchronize()
        want = 10 * sum(1 for i in range(1, n + 1) if i % 2)
        got = int(acc.to_numpy(np.int32)[0])
        assert got == want, (n, got, want)


def _reaches(a, b) -> bool:
    todo, seen = [a], set()
    while todo:
        n = todo.pop()
        if n == b:
            return True
        if int(n) not in seen:
            seen.add(int(n))
            todo += n.dependents
    return False


def check_fork_join() -> None:
    h, _ = kernels()
    s = pcg.Stream()
    x, y1, y2 = (pcg.DeviceBuffer(4 * N) for _ in range(3))
    with pcg.capture(s) as cap:
        h["fill"].launch(1, 128, (x, 3.0, N), stream=s)
        with cap.fork(2) as (s1, s2):
            h["copy"].launch(1, 128, (y1, x, N), stream=s1)
            h["scale"].launch(1, 128, (y1, 2.0, N), stream=s1)
            h["copy"].launch(1, 128, (y2, x, N), stream=s2)
            h["add_one"].launch(1, 128, (y2, N), stream=s2)
        h["axpy"].launch(1, 128, (y1, y2, 1.0, N), stream=s)
    by = {}
    for n in cap.graph.nodes:
        by.setdefault(n.kernel_name, []).append(n)
    (fill,), (axpy,) = by["fill"], by["axpy"]
    (scale,), (add,) = by["scale"], by["add_one"]
    first, second = by["copy"]
    assert not _reaches(scale, add) and not _reaches(add, scale), "the branches must be parallel"
    assert not _reaches(first, second) and not _reaches(second, first)
    for n in (first, second, scale, add):
        assert _reaches(fill, n) and _reaches(n, axpy)
    assert {scale, add} <= set(axpy.dependencies), axpy.dependencies
    exe = cap.graph.instantiate()
    y1.zero()
    exe.launch(s)
    s.synchronize()
    assert np.all(floats(y1) == 10.0), floats(y1)[:4]  # 3 * 2 + (3 + 1)


def check_unjoined_named() -> None:
    h, _ = kernels()
    s = pcg.Stream()
    y = pcg.DeviceBuffer(4 * N)
    try:
        with pcg.capture(s) as cap:
            with cap.fork(1) as (s1,):
                h["fill"].launch(1, 128, (y, 1.0, N), stream=s1)
            h["add_one"].launch(1, 128, (y, N), stream=s1)  # after the join: not joined
        raise AssertionError("the capture ended with unjoined work")
    except pcg.CaptureError as exc:
        text = str(exc)
        assert "side stream 0 of the cap.fork at flow_checks.py:" in text, text
        assert "not joined" in text and "cuLaunchKernel(add_one)" in text, text
        assert "kernel add_one" in text, text
    assert pcg.capture_status(s1) == "none" and pcg.capture_status(s) == "none"
    s1.synchronize()
    g = pcg.Graph()
    g.add_kernel(h["fill"], 1, 128, (y, 5.0, N))
    g.instantiate().launch(s1)
    s1.synchronize()
    assert np.all(floats(y) == 5.0)


def check_diff_and_apply_in_body() -> None:
    _, k = kernels()
    s = pcg.Stream()
    limit, flag = ints(3), ints(0)
    counters = [ints(0), ints(0)]
    graphs = [count_to(k, s, c, limit, flag).graph for c in counters]
    d = pcg.diff(*graphs)
    assert d.same_topology, str(d)
    moved = {(c.where, c.field) for c in d.changes}
    assert moved == {("node 0", "arg 0"), ("node 1", "arg 0"), ("node 0 in body 0 of node 3", "arg 0"),
                     ("node 1 in body 0 of node 3", "arg 0")}, str(d)
    exe = graphs[0].instantiate()
    with pcg.trace() as t:
        report = exe.apply(graphs[1], strategy="set_params")
    sets = [r for r in t.records if r.api == "cuGraphExecKernelNodeSetParams"]
    assert report.method == "set_params" and len(sets) == 4, (str(report), t.calls)
    put(counters[0], 0)
    exe.launch(s)
    s.synchronize()
    assert int(counters[1].to_numpy(np.int32)[0]) == 3 and int(counters[0].to_numpy(np.int32)[0]) == 0


def run(name: str) -> None:
    globals()["check_" + name]()
    print("PASSED", name)


def check_apply_built() -> None:
    h, _ = kernels()
    s = pcg.Stream()
    y = pcg.DeviceBuffer(4 * N)

    def build(v, extra=False):
        g = pcg.Graph()
        a = g.add_kernel(h["fill"], 1, 128, (y, v, N))
        b = g.add_kernel(h["add_one"], 1, 128, (y, N), deps=[a])
        if extra:
            g.add_kernel(h["scale"], 1, 128, (y, 2.0, N), deps=[b])
        return g

    def result(exe) -> float:
        exe.launch(s)
        s.synchronize()
        out = floats(y)
        assert np.all(out == out[0]), out[:4]
        return float(out[0])

    g1, g2, g3 = build(1.0), build(5.0), build(1.0, extra=True)
    d = pcg.diff(g1, g2)
    assert [(c.where, c.field, c.old, c.new) for c in d.changes] == [("node 0", "arg 'v'", 1.0, 5.0)], str(d)
    exe = g1.instantiate()
    with pcg.trace() as t:
        report = exe.apply(g2)
    apis = [r.api for r in t.records]
    assert report.method == "set_params" and apis.count("cuGraphExecKernelNodeSetParams") == 1, apis
    assert "cuGraphExecUpdate" not in apis, apis
    assert result(exe) == 6.0
    report = exe.apply(g3)
    assert report.method == "reinstantiate" and "topology" in report.reason, str(report)
    assert exe.graph is g3 and result(exe) == 4.0
    assert exe.apply(g1).method == "reinstantiate" and result(exe) == 2.0
    other = refused_apply(g1, g3)
    assert other.graph is g1 and result(other) == 2.0
    assert pcg.Graph().instantiate() is not None  # nothing sticky left behind


def refused_apply(g1, g3):
    """An exec of ``g1`` that ``apply(g3, fallback="raise")`` refuses (topology changed);
    it must still be ``g1``'s."""
    other = g1.instantiate()
    try:
        other.apply(g3, fallback="raise")
        raise AssertionError("the refused update did not raise")
    except pcg.GraphExecUpdateError as exc:
        assert "topology" in exc.reason, exc
    assert other.graph is g1
    return other


def check_calibrate() -> None:
    from pycudagraph.apply.calibrate import calibrate
    costs = calibrate()
    print("measured:", costs)
    assert costs.per_node_call_us > 0 and costs.update_base_us >= 0 and costs.update_per_node_us >= 0
