"""What every demo variant shares: timing, checking against float64, the table, the chart.

Timing (warm up first, repeat, take the median):

* ``ms/iter``: host clock around ``iters`` back-to-back steps and one synchronize, over
  ``iters``; the median of ``repeats`` such runs. This is what a user waits for.
* ``GPU ms/iter``: CUDA events (``cudaEventRecord`` / ``cudaEventElapsedTime``) around
  ``iters`` steps queued behind a spin kernel, so the GPU runs them back to back and
  never waits for the CPU: the time the GPU itself needs. A spin that ended before the
  last step was queued is detected (``cudaEventQuery``) and the figure is retried with
  a longer spin, then flagged.

Checking: every output is poisoned (NaN) before the run and compared with a float64
numpy reference by ``||out - ref|| / ||ref||`` and ``max |out - ref|``; NaN never passes.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import pycudagraph as pcg

#: Relative error a float32 result must stay under (float32 rounding lands near 1e-7..1e-6).
REL_TOL = 1e-5


def say(msg: str = "") -> None:
    print(msg, flush=True)


@dataclass
class Check:
    """How far a result is from its float64 reference."""

    max_abs: float
    rel: float

    @property
    def ok(self) -> bool:
        return self.rel <= REL_TOL

    def merge(self, other: "Check") -> "Check":
        return Check(max(self.max_abs, other.max_abs), max(self.rel, other.rel))


def compare(out: np.ndarray, ref: np.ndarray) -> Check:
    """``max |out - ref|`` and ``||out - ref|| / ||ref||``; inf when ``out`` has NaN or inf."""
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape or not np.all(np.isfinite(out)):
        return Check(float("inf"), float("inf"))
    diff = out - ref
    return Check(float(np.max(np.abs(diff))), float(np.linalg.norm(diff) / np.linalg.norm(ref)))


@dataclass
class Row:
    """One line of a demo table."""

    name: str
    ms: float           # wall ms per iteration
    gpu_ms: float       # GPU ms per iteration (events behind a spin)
    check: Check
    note: str = ""


class _gc_paused:
    def __enter__(self):
        self.was = gc.isenabled()
        gc.collect()
        gc.disable()

    def __exit__(self, *exc):
        if self.was:
            gc.enable()


class Clock:
    """Host and event timing of a step on one stream, with a calibrated spin kernel.

    Parameters
    ----------
    stream : pcg.Stream
        The stream every step runs on.
    """

    def __init__(self, stream: pcg.Stream):
        self.stream = stream
        self.spin = pcg.Module.from_file("helpers.cu")["spin"]
        self.start, self.end = pcg.Event(), pcg.Event()
        self.spun = pcg.Event(timing=False)
        self.cycles_per_ms = self._calibrate()

    def _calibrate(self) -> float:
        cycles = 4_000_000
        self.spin.launch(1, 1, (cycles,), stream=self.stream)  # load the module
        self.start.record(self.stream)
        self.spin.launch(1, 1, (cycles,), stream=self.stream)
        self.end.record(self.stream)
        self.end.synchronize()
        return cycles / max(self.start.elapsed_ms(self.end), 1e-3)

    def wall_ms(self, step, iters: int, repeats: int = 5) -> float:
        """Median over ``repeats`` of host ms per step, ``iters`` steps then a synchronize."""
        for _ in range(3):
            step()
        self.stream.synchronize()
        out = []
        with _gc_paused():
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(iters):
                    step()
                self.stream.synchronize()
                out.append((time.perf_counter() - t0) * 1e3 / iters)
        return statistics.median(out)

    def gpu_ms(self, step, iters: int, enqueue_ms: float, repeats: int = 5) -> tuple[float, bool]:
        """(median GPU ms per step, True when the GPU never waited for the CPU).

        ``enqueue_ms`` is a guess of the host time to queue ``iters`` steps; the spin
        lasts 1.5x that plus 2 ms, doubled and retried once if it ended too early.
        """
        spin_ms = 1.5 * enqueue_ms + 2.0
        out, held = [], True
        with _gc_paused():
            for _ in range(repeats):
                for attempt in range(2):
                    self.spin.launch(1, 1, (int(spin_ms * self.cycles_per_ms),), stream=self.stream)
                    self.spun.record(self.stream)
                    self.start.record(self.stream)
                    for _ in range(iters):
                        step()
                    self.end.record(self.stream)
                    early = self.spun.query()  # the spin ended while steps were still queued
                    self.end.synchronize()
                    if not early:
                        break
                    spin_ms *= 2
                held = held and not early
                out.append(self.start.elapsed_ms(self.end) / iters)
        return statistics.median(out), held

    def held_us(self, call, n: int = 300) -> float:
        """Median host microseconds of one ``call()`` while a spin keeps the GPU busy
        (so a launch never waits for room in the GPU's queue)."""
        for _ in range(5):
            call()
        self.stream.synchronize()
        times = []
        with _gc_paused():
            self.spin.launch(1, 1, (int(200 * self.cycles_per_ms),), stream=self.stream)
            for _ in range(n):
                t0 = time.perf_counter_ns()
                call()
                times.append(time.perf_counter_ns() - t0)
        self.stream.synchronize()
        return statistics.median(times) / 1e3

    def span_ms(self, step, iters: int) -> float:
        """GPU timeline ms per step (events, no spin): includes the GPU's idle gaps."""
        self.stream.synchronize()
        self.start.record(self.stream)
        for _ in range(iters):
            step()
        self.end.record(self.stream)
        self.end.synchronize()
        return self.start.elapsed_ms(self.end) / iters

    def row(self, name: str, step, iters: int, check: Check, note: str = "") -> Row:
        """Time ``step`` both ways and make a table row."""
        ms = self.wall_ms(step, iters)
        n = max(1, min(iters, 100))  # few enough launches to stay queued behind the spin
        gpu, held = self.gpu_ms(step, n, enqueue_ms=ms * n)
        if not held:
            note = (note + "; " if note else "") + "GPU waited for the CPU"
        return Row(name, ms, gpu, check, note)


def print_table(rows: list[Row], unit: str = "iter") -> bool:
    """Print the table (speedup over the first row); return True when every row matches."""
    width = max(len(r.name) for r in rows) + 2
    say(f"{'variant':{width}s}{'ms/' + unit:>10s}{'GPU ms/' + unit:>14s}{'speedup':>9s}"
        f"{'max |diff|':>12s}{'rel err':>10s}  check")
    base = rows[0].ms
    for r in rows:
        say(f"{r.name:{width}s}{r.ms:10.4f}{r.gpu_ms:14.4f}{base / r.ms:8.2f}x"
            f"{r.check.max_abs:12.2e}{r.check.rel:10.1e}  {'ok' if r.check.ok else 'MISMATCH'}"
            + (f"  ({r.note})" if r.note else ""))
    return all(r.check.ok for r in rows)


def write_chart(path: Path, title: str, rows: list[Row], unit: str = "iter") -> str:
    """A bar chart of ms and GPU ms per row as a PNG; returns one sentence saying what happened."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed, so no chart was drawn (pip install matplotlib)."
    names = [r.name for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.6 * len(rows)))
    ax.barh(y - 0.2, [r.ms for r in rows], 0.4, label=f"ms/{unit} (wall)")
    ax.barh(y + 0.2, [r.gpu_ms for r in rows], 0.4, label=f"GPU ms/{unit}")
    for i, r in enumerate(rows):
        ax.text(r.ms, i - 0.2, f" {r.ms:.4f} ({rows[0].ms / r.ms:.2f}x)", va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel(f"milliseconds per {unit} (lower is better)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"wrote the chart {path}"


#: The speed-up a launch-bound demo is meant to show.
TARGET_SPEEDUP = 2.0


def gpu_name() -> str:
    """The current GPU's product name (``cudaGetDeviceProperties``)."""
    return pcg.Device.current().name


def headline(gpu: str, eager_ms: float, graph_ms: float, kernels: int, unit: str) -> str:
    """The demo's one-line result: the GPU, the ratio and the two times."""
    return (f"{gpu}: graph replay {eager_ms / graph_ms:.2f}x faster than eager "
            f"({kernels} kernels per {unit}: {eager_ms * 1e3:.1f} us -> "
            f"{graph_ms * 1e3:.1f} us per {unit})")


def verdict(eager_ms: float, graph_ms: float, graph_gpu_ms: float, unit: str) -> str | None:
    """None when the graph was at least ``TARGET_SPEEDUP`` times faster than eager; else
    one line saying why this GPU does not show the point.

    The demo's kernels are meant to run for less time than launching them costs the CPU.
    When the GPU itself needs more than half the eager time (``graph_gpu_ms`` is the
    GPU time of one replay), launching is not the bottleneck: the GPU is too slow for the
    demo. Otherwise the graph's GPU work was fast but its replay was not: the GPU is too
    fast for this CPU (the graph launch itself, or other work on the machine, dominates).
    """
    ratio = eager_ms / graph_ms
    if ratio >= TARGET_SPEEDUP:
        return None
    us = lambda ms: f"{ms * 1e3:.1f} us"  # noqa: E731
    if graph_gpu_ms * TARGET_SPEEDUP > eager_ms:
        return (f"NOTE: this GPU is too slow for the demo to show the point ({ratio:.2f}x): "
                f"its kernels need {us(graph_gpu_ms)} of GPU time per {unit}, more than half "
                f"of the {us(eager_ms)} an eager {unit} takes, so launching is not what "
                "limits eager here and a graph has little launch time to save")
    return (f"NOTE: this GPU is too fast for the demo to show the point ({ratio:.2f}x): it "
            f"needs only {us(graph_gpu_ms)} per {unit}, but a graph replay took "
            f"{us(graph_ms)} (the graph launch itself, or other work on this machine, "
            f"dominates), against {us(eager_ms)} eager")
