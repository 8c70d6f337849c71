"""Timing helpers. CPU times come from ``time.perf_counter_ns`` (microseconds), GPU times
from CUDA events; every figure is a median over repeats, with the garbage collector off
inside timed regions."""

from __future__ import annotations

import gc
import time

from .common import US_PER_NS, Cell, elapsed_us, median, now, ok
from .cudaenv import RawEnv, check


class gc_paused:
    """Collect, then keep the garbage collector off inside timed regions."""

    def __enter__(self):
        self._was = gc.isenabled()
        gc.collect()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self._was:
            gc.enable()
        return False


def _call(fn, args):
    n = len(args)
    if n == 0:
        return fn()
    if n == 1:
        return fn(args[0])
    if n == 2:
        return fn(args[0], args[1])
    return fn(*args)


def held_launch(env: RawEnv, fn, args: tuple, stream: int, per_spin: int, spins: int,
                spin_ms: float, check_result=None, budget_s: float = 30.0) -> Cell:
    """CPU time of one ``fn(*args)`` while a spin kernel keeps the GPU busy.

    For each of ``spins`` batches: queue a ~``spin_ms`` spin kernel on ``stream``, then
    time ``per_spin`` calls one by one with ``perf_counter_ns``. Median over all calls.
    """
    pc = time.perf_counter_ns
    n = len(args)
    a0 = args[0] if n > 0 else None
    a1 = args[1] if n > 1 else None
    times, expired, done = [], 0, 0
    start = time.monotonic()
    with gc_paused():
        for _ in range(spins):
            env.queue_spin(stream, spin_ms)
            for _ in range(per_spin):
                if n == 1:
                    t0 = pc(); r = fn(a0); t1 = pc()  # noqa: E702
                elif n == 2:
                    t0 = pc(); r = fn(a0, a1); t1 = pc()  # noqa: E702
                elif n == 0:
                    t0 = pc(); r = fn(); t1 = pc()  # noqa: E702
                else:
                    t0 = pc(); r = fn(*args); t1 = pc()  # noqa: E702
                times.append(t1 - t0)
                if check_result is not None:
                    check_result(r)
            if env.spin_finished():
                expired += 1
            env.sync(stream)
            done += 1
            if time.monotonic() - start > budget_s:
                break
    note = f"{len(times)} launches in {done} spins"
    if expired:
        note += f"; spin ended early in {expired}"
    if done < spins:
        note += f"; stopped after {budget_s:.0f} s"
    return ok(median(times) * US_PER_NS, note)


def held_batch(env: RawEnv, fn, args: tuple, stream: int, batch: int, repeats: int,
               spin_ms: float, check_result=None) -> Cell:
    """CPU time per call of ``batch`` back-to-back calls queued behind a spin kernel
    (two batches per repeat, as the C++ floor's eager-launch figure does)."""
    pc = time.perf_counter_ns
    per_call, expired = [], 0
    with gc_paused():
        for r in range(repeats + 1):  # the first repeat warms up
            total = 0
            for _ in range(2):
                env.queue_spin(stream, spin_ms)
                t0 = pc()
                for _ in range(batch):
                    res = _call(fn, args)
                t1 = pc()
                total += t1 - t0
                if check_result is not None:
                    check_result(res)
                if env.spin_finished():
                    expired += 1
                env.sync(stream)
            if r:
                per_call.append(total / (2 * batch))
    note = f"{2 * batch} calls x {repeats}"
    if expired:
        note += f"; spin ended early {expired}x"
    return ok(median(per_call) * US_PER_NS, note)


def gpu_time_per_launch(env: RawEnv, fn, args: tuple, stream: int, launches: int,
                        repeats: int, check_result=None, spin_ms: float = 5.0) -> float:
    """GPU microseconds per ``fn(*args)``: events around ``launches`` calls queued behind
    a short spin (so the GPU never waits for the CPU), median over ``repeats``."""
    rt = env.rt
    out = []
    for _ in range(repeats):
        env.queue_spin(stream, spin_ms)
        check(rt.cudaEventRecord(env.ev_a, stream))
        for _ in range(launches):
            res = _call(fn, args)
            if check_result is not None:
                check_result(res)
        check(rt.cudaEventRecord(env.ev_b, stream))
        check(rt.cudaEventSynchronize(env.ev_b))
        out.append(check(rt.cudaEventElapsedTime(env.ev_a, env.ev_b)) * 1000.0 / launches)
    return median(out)


def timed_repeats(body, repeats: int) -> float:
    """Median over ``repeats`` (after one warm-up) of ``body()``, which returns
    microseconds for one repeat."""
    out = []
    with gc_paused():
        for r in range(repeats + 1):
            us = body()
            if r:
                out.append(us)
    return median(out)


def build_instantiate_update(build3, n: int, repeats: int, notes: tuple[str, str, str]) -> dict:
    """Per-node build, instantiate and whole-graph update of an ``n``-node chain.

    ``build3(n, a)`` returns ``(graph, nodes, build_us)``; the graph has ``instantiate()``
    and its exec ``update(graph)`` and ``close()`` (pycudagraph and cuda.core alike).
    Medians over ``repeats`` after one warm-up.
    """
    b, i, u = [], [], []
    for r in range(repeats + 1):
        with gc_paused():  # collected between repeats (the last repeat's graphs go), off inside
            g1, _, build_us = build3(n, 1.0)
            t0 = now()
            exe = g1.instantiate()
            inst_us = elapsed_us(t0)
            g2, _, _ = build3(n, 2.0)
            t0 = now()
            exe.update(g2)
            upd_us = elapsed_us(t0)
            exe.close()
            del g1, g2, exe
        if r:
            b.append(build_us / n)
            i.append(inst_us / n)
            u.append(upd_us / n)
    return {"build_per_node": ok(median(b), notes[0]),
            "instantiate_per_node": ok(median(i), notes[1]),
            "exec_update_per_node": ok(median(u), notes[2])}
