"""``demo --decode``: one batch-1 decode-like step of 200 small kernels, eager vs graph.

A token step of a decoder without attention, on random weights (nothing is downloaded):
``LAYERS`` layers of 8 kernels each (kernels/decode.cu) on a hidden state ``h`` of
``HIDDEN`` floats::

    a = rmsnorm(h) * g1;  t = W1 a;  h = h + t
    a = rmsnorm(h) * g2;  u = silu(W2 a);  t = W3 u;  h = h + t      (silu is its own kernel)

The hidden size is small (``HIDDEN`` = 256: a 256 x 256 weight is 256 KiB, and the
whole step's weights stay in the GPU's L2 cache), so each kernel runs for well under a
microsecond, less than launching it costs the CPU: an eager step spends its time
launching, and one graph launch replaces the 200.
The step reads ``x`` and writes ``h`` (the first residual add is ``h = x + t``), so every
replay computes the same function of ``x``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pycudagraph as pcg

from .demo_common import (Check, Clock, Row, compare, gpu_name, headline, print_table, say,
                          verdict, write_chart)

HIDDEN, LAYERS, KERNELS_PER_LAYER = 256, 25, 8
EPS = 1e-5
THREADS = 256


def _silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def _rmsnorm(v: np.ndarray, g: np.ndarray) -> np.ndarray:
    return v / np.sqrt(np.mean(v * v) + EPS) * g


class Decoder:
    """Random weights on the device and the step's ``LAYERS * 8`` launches."""

    def __init__(self, hidden: int = HIDDEN, layers: int = LAYERS, seed: int = 0,
                 stream: pcg.Stream | None = None):
        if hidden % THREADS:
            raise ValueError(f"hidden must be a multiple of {THREADS}, got {hidden}")
        mod = pcg.Module.from_file("decode.cu")
        self.k = {name: mod[name] for name in ("rmsnorm", "matvec", "add", "silu")}
        self.hidden, self.layers = hidden, layers
        rng = np.random.default_rng(seed)
        scale = np.float32(1.0 / np.sqrt(hidden))
        self.host = []  # per layer: (g1, w1, g2, w2, w3), float32
        for _ in range(layers):
            ws = [rng.standard_normal((hidden, hidden), dtype=np.float32) * scale for _ in range(3)]
            gs = [(1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32) for _ in range(2)]
            self.host.append((gs[0], ws[0], gs[1], ws[1], ws[2]))
        self.dev = [tuple(pcg.DeviceBuffer.from_array(a, stream=stream) for a in layer)
                    for layer in self.host]
        nb = 4 * hidden
        self.x, self.h, self.a, self.t, self.u = (pcg.DeviceBuffer(nb) for _ in range(5))
        self.launches = []
        for i, (g1, w1, g2, w2, w3) in enumerate(self.dev):
            res_in = self.x if i == 0 else self.h
            self._norm(res_in, g1, self.a)
            self._matvec(w1, self.a, self.t)
            self._add(self.h, res_in, self.t)
            self._norm(self.h, g2, self.a)
            self._matvec(w2, self.a, self.u)
            self.launches.append((self.k["silu"], hidden // THREADS, THREADS, (self.u, hidden)))
            self._matvec(w3, self.u, self.t)
            self._add(self.h, self.h, self.t)

    def _norm(self, x, g, y):
        self.launches.append((self.k["rmsnorm"], 1, THREADS, (x, g, y, self.hidden, EPS)))

    def _matvec(self, w, x, y):
        rows_per_block = THREADS // 32
        self.launches.append((self.k["matvec"], -(-self.hidden // rows_per_block), THREADS,
                              (w, x, y, self.hidden, self.hidden)))

    def _add(self, out, a, b):
        self.launches.append((self.k["add"], self.hidden // THREADS, THREADS,
                              (out, a, b, self.hidden)))

    def step(self, stream) -> None:
        """Eager: ``LAYERS * 8`` ``cuLaunchKernel`` calls."""
        for kernel, grid, block, args in self.launches:
            kernel.launch(grid, block, args, stream=stream)

    def reference(self, x: np.ndarray) -> np.ndarray:
        """The step in float64 numpy."""
        h = x.astype(np.float64)
        for g1, w1, g2, w2, w3 in self.host:
            h = h + w1.astype(np.float64) @ _rmsnorm(h, g1)
            u = _silu(w2.astype(np.float64) @ _rmsnorm(h, g2))
            h = h + w3.astype(np.float64) @ u
        return h

    def check(self, run, stream, rng, trials: int = 2) -> Check:
        """Fresh random ``x``, NaN-poisoned ``h``, ``run()``, compare with float64."""
        result = Check(0.0, 0.0)
        poison = np.full(self.hidden, np.nan, np.float32)
        for _ in range(trials):
            x = rng.standard_normal(self.hidden).astype(np.float32)
            self.x.copy_from(x, stream=stream)
            self.h.copy_from(poison, stream=stream)
            run()
            stream.synchronize()
            got = self.h.to_numpy(np.float32, (self.hidden,))
            result = result.merge(compare(got, self.reference(x)))
        return result

    def check_kernels(self, stream, rng) -> dict[str, Check]:
        """Each kernel once on fresh random data with a poisoned output, against float64."""
        n = self.hidden
        vec = lambda: rng.standard_normal(n).astype(np.float32)  # noqa: E731
        g1, w1 = self.host[0][0], self.host[0][1]
        g1_d, w1_d = self.dev[0][0], self.dev[0][1]
        poison = np.full(n, np.nan, np.float32)
        out = {}

        def one(name, launch, inputs, dst, want):  # poison first: silu works in place
            dst.copy_from(poison, stream=stream)
            for buf, arr in inputs:
                buf.copy_from(arr, stream=stream)
            launch()
            stream.synchronize()
            out[name] = compare(dst.to_numpy(np.float32, (n,)), want)

        a, b = vec(), vec()
        k = self.k
        one("rmsnorm", lambda: k["rmsnorm"].launch(1, THREADS, (self.x, g1_d, self.a, n, EPS),
                                                   stream=stream),
            [(self.x, a)], self.a, _rmsnorm(a.astype(np.float64), g1))
        one("matvec", lambda: self._launch_matvec(w1_d, stream),
            [(self.a, a)], self.t, w1.astype(np.float64) @ a)
        one("add", lambda: k["add"].launch(n // THREADS, THREADS, (self.h, self.x, self.t, n),
                                           stream=stream),
            [(self.x, a), (self.t, b)], self.h, a.astype(np.float64) + b)
        one("silu", lambda: k["silu"].launch(n // THREADS, THREADS, (self.h, n), stream=stream),
            [(self.h, a)], self.h, _silu(a.astype(np.float64)))
        return out

    def _launch_matvec(self, w, stream):
        kernel, grid, block, _ = self.launches[1]
        kernel.launch(grid, block, (w, self.a, self.t, self.hidden, self.hidden), stream=stream)


def run(steps: int, out: Path, layers: int = LAYERS) -> tuple[int, dict]:
    """``demo --decode``; returns (exit status, figures for the cost model)."""
    n_kernels = layers * KERNELS_PER_LAYER
    gpu = gpu_name()
    say(f"pycudagraph demo --decode on {gpu}: a batch-1 decode-like step, {layers} layers x "
        f"{KERNELS_PER_LAYER} kernels = {n_kernels} kernels, hidden {HIDDEN}, random weights "
        f"({layers * 3 * HIDDEN * HIDDEN * 4 / 2**20:.0f} MiB), {steps} steps per timing")
    say("[1/4] compiling kernels/decode.cu and uploading random weights...")
    stream = pcg.Stream()
    clock = Clock(stream)
    dec = Decoder(layers=layers, stream=stream)
    rng = np.random.default_rng(7)
    say("[2/4] each kernel against float64 numpy (fresh random input, poisoned output):")
    per_kernel = dec.check_kernels(stream, rng)
    for name, c in per_kernel.items():
        say(f"      {name:8s} rel err {c.rel:.1e}  {'ok' if c.ok else 'MISMATCH'}")

    say(f"[3/4] eager: {n_kernels} cuLaunchKernel calls per step...")
    eager = lambda: dec.step(stream)  # noqa: E731
    eager_check = dec.check(eager, stream, rng)
    eager_ms = clock.wall_ms(eager, steps)
    eager_span = clock.span_ms(eager, steps)
    eager_gpu, held = clock.gpu_ms(eager, 2, enqueue_ms=2 * eager_ms)
    say("[4/4] the same step captured once (cudaStreamBeginCapture), replayed (cudaGraphLaunch)...")
    with pcg.capture(stream) as cap:
        dec.step(stream)
    graph = cap.graph
    exe = graph.instantiate(upload_stream=stream)
    replay = lambda: exe.launch(stream)  # noqa: E731
    graph_row = clock.row("graph (1 launch/step)", replay, steps, dec.check(replay, stream, rng))
    eager_note = f"GPU busy {100 * eager_gpu / eager_span:.0f}% of the step's timeline"
    if not held:
        eager_note += "; its GPU time is an upper bound (the spin ended early)"
    rows = [Row(f"eager ({n_kernels} launches/step)", eager_ms, eager_gpu, eager_check, eager_note),
            graph_row]

    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_graph.dot").write_text(graph.to_dot("decode step"))
    chart = write_chart(out / "decode_demo.png",
                        f"decode step, {n_kernels} kernels: eager vs CUDA graph", rows, unit="step")
    say("")
    all_ok = print_table(rows, unit="step") and all(c.ok for c in per_kernel.values())
    say("")
    gap_ms = eager_ms - graph_row.ms
    say(headline(gpu, eager_ms, graph_row.ms, n_kernels, "step"))
    say(f"{len(graph.nodes)} kernel nodes in the captured graph; the GPU needs "
        f"{graph_row.gpu_ms * 1e3:.1f} us per step ({graph_row.gpu_ms * 1e3 / n_kernels:.2f} us "
        "per kernel)")
    say(f"launch gap closed: {gap_ms:.3f} ms per step, {gap_ms * 1e3 / n_kernels:.2f} us per "
        f"kernel (eager GPU timeline {eager_span:.3f} ms per step for {eager_gpu:.3f} ms of "
        "kernel work)")
    say(f"wrote {out / 'decode_graph.dot'}; {chart}")
    note = verdict(eager_ms, graph_row.ms, graph_row.gpu_ms, "step")
    if note:
        say(note)
    if not all_ok:
        say("FAILED: a kernel or a variant does not match the float64 reference")
    figures = {"decode_kernels": n_kernels, "decode_gpu_ms_per_step": graph_row.gpu_ms}
    return (0 if all_ok else 1), figures
