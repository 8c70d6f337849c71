"""GPU checks of conditional capture, forks and ``exe.apply`` with PyTorch and CuPy work.

Each check runs in its own child process (``tests/frameworks/test_capture_flow_frameworks.py``
starts them through :func:`tests.support.watchdog.run_snippet`). ``run(name)`` prints
``SKIPPED`` when the framework is missing, else ``PASSED name`` at the end.
"""

from __future__ import annotations

import numpy as np

import pycudagraph as pcg
from tests.support.flow_checks import refused_apply

N = 256


class Missing(Exception):
    pass


def need(name: str):
    try:
        if name == "torch":
            import torch
            ok = torch.cuda.is_available()
            mod = torch
        else:
            import cupy
            ok = cupy.cuda.runtime.getDeviceCount() > 0
            mod = cupy
    except Exception as exc:  # not installed, or no CUDA for it
        raise Missing(f"{name}: {exc}") from None
    if not ok:
        raise Missing(f"{name} sees no GPU")
    return mod


def check_torch_while_halving() -> None:
    torch = need("torch")
    s = pcg.Stream()
    ts = torch.cuda.ExternalStream(s.ptr)
    tol = 0.01
    x = torch.empty(8, device="cuda")
    m = torch.empty((), device="cuda")
    flag = torch.empty((), dtype=torch.bool, device="cuda")

    def test():  # flag = max(x) > tol
        torch.amax(x, 0, out=m)
        torch.gt(m, tol, out=flag)

    with torch.cuda.stream(ts):  # warm-up: nothing is allocated inside the capture
        x.fill_(1.0)
        test()
        x.mul_(0.5)
    s.synchronize()
    with pcg.capture(s, mode="thread_local") as cap:
        with torch.cuda.stream(ts):
            test()
            with cap.while_(flag):
                x.mul_(0.5)
                test()
        cap.keep(x, m, flag)
    loops = [n for n in cap.graph.nodes if isinstance(n, pcg.WhileNode)]
    assert len(loops) == 1, [str(n.type) for n in cap.graph.nodes]
    exe = cap.graph.instantiate()
    for start in (0.005, 0.75, 3.0, 1000.0):
        with torch.cuda.stream(ts):  # made on the stream that copies it: no race with it
            values = torch.linspace(start / 4, start, 8, device="cuda")
            x.copy_(values)
        exe.launch(s)  # one launch: the loop runs on the GPU, no host sync per pass
        s.synchronize()
        want, passes = values.clone(), 0
        while float(want.max()) > tol:
            want.mul_(0.5)
            passes += 1
        torch.testing.assert_close(x, want, rtol=0, atol=0)
        print(f"start {start}: {passes} halvings in one launch")


def check_cupy_switch() -> None:
    cp = need("cupy")
    s = pcg.Stream()
    cs = cp.cuda.ExternalStream(s.ptr)
    index = cp.zeros((), dtype=cp.int32)
    out = cp.zeros(16, dtype=cp.float32)

    def ops():
        return (lambda: cp.add(out, 1, out=out), lambda: cp.multiply(out, 3, out=out),
                lambda: cp.subtract(out, 5, out=out))

    with cs:  # warm-up: CuPy compiles its kernels here
        for op in ops():
            op()
    s.synchronize()
    with pcg.capture(s, mode="thread_local") as cap:
        with cs:
            with cap.switch(index, 3) as branches:
                for branch, op in zip(branches, ops()):
                    with branch:
                        op()
        cap.keep(index, out)
    exe = cap.graph.instantiate()
    for i, want in ((0, 3.0), (1, 6.0), (2, -3.0), (5, 2.0)):
        with cs:
            out.fill(2.0)
            index.fill(i)
        exe.launch(s)
        s.synchronize()
        got = cp.asnumpy(out)
        assert np.all(got == want), (i, got[:4])


def check_torch_nested_if_in_while() -> None:
    torch = need("torch")
    s = pcg.Stream()
    ts = torch.cuda.ExternalStream(s.ptr)
    i32 = dict(dtype=torch.int32, device="cuda")
    c, limit, acc, odd = (torch.zeros((), **i32) for _ in range(4))
    go = torch.zeros((), dtype=torch.bool, device="cuda")
    torch.cuda.synchronize()  # the zeros ran on PyTorch's stream, not ordered before ts

    def start():
        c.zero_()
        acc.zero_()
        torch.lt(c, limit, out=go)

    def body(cap):
        c.add_(1)
        torch.bitwise_and(c, 1, out=odd)
        with cap.if_(odd):
            acc.add_(10)
        torch.lt(c, limit, out=go)

    with torch.cuda.stream(ts):
        start()
        c.add_(1)
        torch.bitwise_and(c, 1, out=odd)
        acc.add_(10)
    s.synchronize()
    with pcg.capture(s, mode="thread_local") as cap:
        with torch.cuda.stream(ts):
            start()
            with cap.while_(go):
                body(cap)
        cap.keep(c, limit, acc, odd, go)
    exe = cap.graph.instantiate()
    for n in (0, 1, 6, 9):
        limit.fill_(n)
        torch.cuda.synchronize()
        exe.launch(s)
        s.synchronize()
        assert int(acc) == 10 * ((n + 1) // 2), (n, int(acc))


def check_pcg_kernel_in_torch_body() -> None:
    torch = need("torch")
    add_one = pcg.Module.from_file("helpers.cu")["add_one"]
    s = pcg.Stream()
    ts = torch.cuda.ExternalStream(s.ptr)
    y = torch.ones(N, device="cuda")
    flag = torch.zeros((), dtype=torch.bool, device="cuda")
    torch.cuda.synchronize()  # ones / zeros ran on PyTorch's stream, not ordered before ts
    with torch.cuda.stream(ts):
        y.mul_(2)
    add_one.launch(1, 128, (y, N), stream=s)
    s.synchronize()
    with pcg.capture(s, mode="thread_local") as cap:
        with torch.cuda.stream(ts):
            y.fill_(1.0)
            with cap.if_(flag):
                y.mul_(2)
                add_one.launch(1, 128, (y, N), stream=s)  # a pycudagraph kernel in the body
        cap.keep(y, flag)
    exe = cap.graph.instantiate()
    (cond,) = [n for n in cap.graph.nodes if isinstance(n, pcg.IfNode)]
    names = [n.kernel_name for n in cond.body.nodes]
    assert names[-1] == "add_one" and len(names) == 2, names
    for value, want in ((True, 3.0), (False, 1.0)):
        flag.fill_(value)
        torch.cuda.synchronize()
        exe.launch(s)
        s.synchronize()
        assert torch.all(y == want), (value, y[:4])


def check_torch_fork() -> None:
    torch = need("torch")
    s = pcg.Stream()
    ts = torch.cuda.ExternalStream(s.ptr)
    t1, t2 = torch.cuda.Stream(), torch.cuda.Stream()
    a, b1, b2, c = (torch.empty(N, device="cuda") for _ in range(4))
    with torch.cuda.stream(ts):  # warm-up
        a.fill_(2.0)
        torch.mul(a, 3.0, out=b1)
        torch.add(a, 1.0, out=b2)
        torch.add(b1, b2, out=c)
    torch.cuda.synchronize()
    with pcg.capture(s, mode="thread_local") as cap:
        with torch.cuda.stream(ts):
            a.fill_(2.0)
            with cap.fork([t1, t2]) as (u1, u2):
                assert (u1, u2) == (t1, t2)  # given back as they were given
                with torch.cuda.stream(u1):
                    torch.mul(a, 3.0, out=b1)
                with torch.cuda.stream(u2):
                    torch.add(a, 1.0, out=b2)
            torch.add(b1, b2, out=c)
        cap.keep(a, b1, b2, c)
    kernels = [n for n in cap.graph.nodes if str(n.type) == "kernel"]
    fill, mul, add, total = kernels
    assert mul not in add.dependencies and add not in mul.dependencies
    assert fill in mul.dependencies and fill in add.dependencies
    assert {mul, add} <= set(total.dependencies), total.dependencies
    c.zero_()
    torch.cuda.synchronize()
    exe = cap.graph.instantiate()
    exe.launch(s)
    s.synchronize()
    assert torch.all(c == 9.0), c[:4]


def _words(data: bytes) -> list:
    return [int.from_bytes(data[k:k + 8], "little") for k in range(0, len(data) - 7, 8)]


def check_torch_apply() -> None:
    torch = need("torch")
    s = pcg.Stream()
    ts = torch.cuda.ExternalStream(s.ptr)
    torch.manual_seed(0)
    W1, b1 = torch.randn(64, 32, device="cuda"), torch.randn(64, device="cuda")
    W2, b2 = torch.randn(16, 64, device="cuda"), torch.randn(16, device="cuda")
    x1, x2 = torch.randn(8, 32, device="cuda"), torch.randn(8, 32, device="cuda")
    h, y = torch.empty(8, 64, device="cuda"), torch.empty(8, 16, device="cuda")
    torch.cuda.synchronize()  # randn ran on PyTorch's stream, not ordered before ts

    def model(x, extra=False):
        torch.addmm(b1, x, W1.t(), out=h)
        h.relu_()
        torch.addmm(b2, h, W2.t(), out=y)
        if extra:
            y.mul_(2.0)

    def eager(x, extra=False):
        out = torch.relu(x @ W1.t() + b1) @ W2.t() + b2
        return out * 2.0 if extra else out

    with torch.cuda.stream(ts):
        model(x1)
        model(x2, extra=True)
    s.synchronize()

    def capture(x, extra=False):
        with pcg.capture(s, mode="thread_local") as cap:
            with torch.cuda.stream(ts):
                model(x, extra)
            cap.keep(x, h, y, W1, b1, W2, b2)
        return cap.graph

    def run(exe) -> None:
        exe.launch(s)
        s.synchronize()

    g1, g2, g3 = capture(x1), capture(x2), capture(x1, extra=True)
    d = pcg.diff(g1, g2)
    print(d)
    assert d.same_topology and d.changes, str(d)
    a1, a2 = x1.data_ptr(), x2.data_ptr()
    from pycudagraph.inspect.ranges import pointer_info

    def device_word(w: int) -> bool:
        return w >= 1 << 16 and pointer_info(w).memory == "device"

    pointer_nodes = set()
    for c in d.changes:  # each change: argument bytes whose differing device words moved x1 -> x2
        assert c.field.startswith("arg ") and isinstance(c.old, bytes), str(c)
        moved = [(o, n) for o, n in zip(_words(c.old), _words(c.new)) if o != n]
        assert moved, str(c)
        # A library kernel's by-value struct may carry padding whose bytes are whatever the
        # host stack held (seen on an H200: host heap words in an elementwise functor): a
        # difference there is real in the bytes but no address; every device word moved.
        on_device = [(o, n) for o, n in moved if device_word(o) or device_word(n)]
        assert all(n - o == a2 - a1 and a1 <= o < a1 + x1.nbytes for o, n in on_device), str(c)
        if on_device:
            pointer_nodes.add(c.node)
    holders = [n for n in g1.nodes if str(n.type) == "kernel"
               and any(a1 <= w < a1 + x1.nbytes for arg in n.arguments for w in _words(arg))]
    assert pointer_nodes == set(holders) and set(holders) <= set(d.changed_nodes), \
        (d.changed_nodes, holders)

    exe = g1.instantiate()
    with pcg.trace() as t:
        report = exe.apply(g2)
    print(report)
    apis = [r.api for r in t.records]
    sets = [a for a in apis if a.startswith(("cuGraphExec", "cudaGraphExec")) and "SetParams" in a]
    assert report.method == "set_params", str(report)
    assert len(sets) == len(d.changed_nodes) and "cuGraphExecUpdate" not in apis, apis
    run(exe)
    torch.testing.assert_close(y, eager(x2), rtol=1e-4, atol=1e-4)

    before = exe.handle
    report = exe.apply(g3)  # one more node: CUDA refuses the update
    print(report)
    assert report.method == "reinstantiate" and "topology" in report.reason, str(report)
    assert exe.handle is not before and exe.graph is g3
    run(exe)
    torch.testing.assert_close(y, eager(x1, extra=True), rtol=1e-4, atol=1e-4)

    other = refused_apply(g1, g3)
    run(other)  # still its old work
    torch.testing.assert_close(y, eager(x1), rtol=1e-4, atol=1e-4)


def run(name: str) -> None:
    try:
        globals()["check_" + name]()
    except Missing as exc:
        print("SKIPPED", exc)
        return
    print("PASSED", name)
