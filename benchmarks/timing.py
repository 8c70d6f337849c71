"""Timing helpers: one round of a held launch, of a batch of eager launches, of GPU time.

CPU times come from ``time.perf_counter_ns`` (microseconds), GPU times from CUDA events. A
round function returns one number; the contest (``contest.py``) runs rounds of every
contestant in turn with the garbage collector off. Calls are made with their arguments
spelled out (no ``fn(*args)`` for up to four), so the loop costs every contestant alike.
"""

from __future__ import annotations

import gc
import time

from .common import US_PER_NS, median
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


def _batch_ns(fn, args: tuple, count: int) -> int:
    """Nanoseconds of ``count`` back-to-back ``fn(*args)`` calls."""
    pc = time.perf_counter_ns
    n = len(args)
    if n == 3:
        a, b, c = args
        t0 = pc()
        for _ in range(count):
            fn(a, b, c)
        return pc() - t0
    if n == 4:
        a, b, c, d = args
        t0 = pc()
        for _ in range(count):
            fn(a, b, c, d)
        return pc() - t0
    if n == 2:
        a, b = args
        t0 = pc()
        for _ in range(count):
            fn(a, b)
        return pc() - t0
    if n == 1:
        a, = args
        t0 = pc()
        for _ in range(count):
            fn(a)
        return pc() - t0
    t0 = pc()
    for _ in range(count):
        fn(*args)
    return pc() - t0


def held_round(env: RawEnv, fn, args: tuple, stream: int, per_spin: int, spin_ms: float,
               check_result=None):
    """A round: queue a ~``spin_ms`` spin kernel on ``stream``, then time ``per_spin`` calls
    of ``fn(*args)`` one by one; the median, in microseconds. The GPU is busy all along, so a
    launch never waits for it (a spin that ended early is counted in ``env.expired``).
    ``check_result`` judges the last call's result (a raw call's error code)."""
    pc = time.perf_counter_ns
    n = len(args)
    a0 = args[0] if n > 0 else None
    a1 = args[1] if n > 1 else None

    def one() -> float:
        times = []
        env.queue_spin(stream, spin_ms)
        r = None
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
            env.expired += 1
        env.sync(stream)
        return median(times) * US_PER_NS

    return one


def eager_round(env: RawEnv, fn, args: tuple, stream: int, batch: int, spin_ms: float,
                check_result=None):
    """A round: ``batch`` back-to-back ``fn(*args)`` calls queued behind a spin kernel;
    microseconds per call. ``check_result`` judges one more call's result after them."""

    def one() -> float:
        env.queue_spin(stream, spin_ms)
        ns = _batch_ns(fn, args, batch)
        if check_result is not None:
            check_result(_call(fn, args))
        if env.spin_finished():
            env.expired += 1
        env.sync(stream)
        return ns * US_PER_NS / batch

    return one


def gpu_round(env: RawEnv, fn, args: tuple, stream: int, launches: int, per: int = 1):
    """A round: GPU microseconds per ``fn(*args)`` (over ``per``): CUDA events around
    ``launches`` calls queued behind a short spin, so the GPU never waits for the CPU."""

    def one() -> float:
        return gpu_time_per_launch(env, fn, args, stream, launches, 1) / per

    return one


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


def split_around(res: dict, module, name: str, run):
    """``run()`` with ``module.<name>`` wrapped to read the clock on each side of its call
    (the profiles wrap a ``fast`` hot call): the microseconds before, in and after that call
    are appended to ``res``'s three lists, in its key order. Returns what ``run()`` returns.
    The wrapper's own clock reads land in before and after."""
    real, marks = getattr(module, name), []
    pc = time.perf_counter_ns

    def noted(*a):
        marks.append(pc())
        out = real(*a)
        marks.append(pc())
        return out

    setattr(module, name, noted)
    try:
        t0 = pc()
        out = run()
        t1 = pc()
    finally:
        setattr(module, name, real)
    for part, ns in zip(res, (marks[0] - t0, marks[1] - marks[0], t1 - marks[1])):
        res[part].append(ns * US_PER_NS)
    return out
