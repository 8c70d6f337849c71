"""``python -m pycudagraph demo``: a 3-layer MLP run eagerly, as graphs, and updated in place.

The MLP is 512 -> 1024 -> 1024 -> 512 with ReLU (kernels/mlp.cu, a tiled GEMM+bias+ReLU).
Variants: (1) eager, one launch per layer; (2) a graph built node by node;
(3) a graph captured from the eager code; (4) variant 2 with a new input buffer swapped in
by ``exe.set_arg`` (``cuGraphExecKernelNodeSetParams``), no recapture. Every variant is
checked against numpy. Without a GPU, ``--model`` prints the seed's cost model filled with
figures measured earlier on a real GPU (clearly a model, not a measurement).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .. import _cuda
from ._model_data import MEASURED

SIZES = (512, 1024, 1024, 512)


def _say(msg: str) -> None:
    print(msg, flush=True)


def print_model(batch: int, iters: int) -> None:
    """The seed's cost model with shipped figures: eager = N(k*launch + compute), graph = N(launch + compute)."""
    m = MEASURED
    if not m:
        _say("no measured figures are shipped with this build, so there is no model to print")
        return
    k = len(SIZES) - 1
    compute = m["mlp_gpu_ms_per_iter"]
    eager = iters * (k * m["eager_launch_us"] / 1000 + compute)
    graph = iters * (m["graph_launch_us"] / 1000 + compute)
    _say("MODEL (not a measurement on this machine): the seed's cost model,")
    _say(f"filled with figures measured on {m['gpu']} ({m['when']}, {m['versions']}).")
    _say(f"  kernels per iteration k = {k}, iterations N = {iters}, batch = {batch} (figures are for batch {m['batch']})")
    _say(f"  eager  = N x (k x launch {m['eager_launch_us']:.1f} us + compute {compute * 1000:.1f} us) = {eager:.2f} ms")
    _say(f"  graph  = N x (launch {m['graph_launch_us']:.1f} us + compute {compute * 1000:.1f} us)   = {graph:.2f} ms")
    _say(f"  modelled speedup: {eager / graph:.2f}x")


class MLP:
    """Weights, buffers and the three layer launches of the demo network."""

    def __init__(self, batch: int, seed: int = 0):
        import pycudagraph as pcg
        self.pcg = pcg
        self.batch = batch
        rng = np.random.default_rng(seed)
        self.kernel = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
        # cast last: float32 / np.float64 scalar is float64 under NumPy 2 promotion
        self.ws = [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)
                   for i, o in zip(SIZES[:-1], SIZES[1:])]
        self.bs = [(rng.standard_normal(o) * 0.1).astype(np.float32) for o in SIZES[1:]]
        self.dw = [pcg.DeviceBuffer.from_array(w) for w in self.ws]
        self.db = [pcg.DeviceBuffer.from_array(b) for b in self.bs]
        self.x = pcg.DeviceBuffer(4 * batch * SIZES[0])
        self.acts = [pcg.DeviceBuffer(4 * batch * o) for o in SIZES[1:]]

    def layer_args(self, i: int, x=None):
        inp = (x or self.x) if i == 0 else self.acts[i - 1]
        relu = 1 if i < len(self.ws) - 1 else 0
        return (inp, self.dw[i], self.db[i], self.acts[i], self.batch, SIZES[i], SIZES[i + 1], relu)

    def dims(self, i: int):
        return ((SIZES[i + 1] + 15) // 16, (self.batch + 15) // 16), (16, 16)

    def forward(self, stream) -> None:
        for i in range(len(self.ws)):
            grid, block = self.dims(i)
            self.kernel.launch(grid, block, self.layer_args(i), stream=stream)

    def build_graph(self):
        g = self.pcg.Graph()
        nodes, prev = [], ()
        for i in range(len(self.ws)):
            grid, block = self.dims(i)
            prev = (g.add_kernel(self.kernel, grid, block, self.layer_args(i), deps=prev),)
            nodes.append(prev[0])
        return g, nodes

    def reference(self, x: np.ndarray) -> np.ndarray:
        h = x.astype(np.float64)
        for i, (w, b) in enumerate(zip(self.ws, self.bs)):
            h = h @ w.astype(np.float64) + b
            if i < len(self.ws) - 1:
                h = np.maximum(h, 0)
        return h

    def output(self) -> np.ndarray:
        return self.acts[-1].to_numpy(np.float32, (self.batch, SIZES[-1]))


def _time(step, stream, iters: int, spin) -> tuple[float, float]:
    """(wall ms per iteration, GPU-only ms per iteration).

    Wall: host clock around ``iters`` steps and a final synchronize. GPU-only: events
    around ``iters`` steps queued behind a spin kernel, so the GPU runs them back to
    back with no waiting on the CPU.
    """
    pcg = sys.modules["pycudagraph"]
    for _ in range(3):
        step()
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    stream.synchronize()
    wall = (time.perf_counter() - t0) * 1000 / iters
    start, end = pcg.Event(), pcg.Event()
    spin.launch(1, 1, (20_000_000,), stream=stream)
    start.record(stream)
    for _ in range(iters):
        step()
    end.record(stream)
    end.synchronize()
    return wall, start.elapsed_ms(end) / iters


def _held_cost(launch, stream, spin, n: int = 300) -> float:
    """Microseconds of CPU per call of ``launch`` while a spin kernel keeps the GPU busy."""
    for _ in range(5):
        launch()
    stream.synchronize()
    spin.launch(1, 1, (200_000_000,), stream=stream)
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    cost = (time.perf_counter() - t0) * 1e6 / n
    stream.synchronize()
    return cost


def run(iters: int, batch: int, out: Path, trace: bool) -> int:
    import pycudagraph as pcg
    out.mkdir(parents=True, exist_ok=True)
    _say(f"pycudagraph demo: MLP {' -> '.join(map(str, SIZES))}, batch {batch}, {iters} iterations")
    _say("[1/6] compiling kernels with NVRTC (cached after the first run)...")
    mlp = MLP(batch)
    spin = pcg.Module.from_file("helpers.cu")["spin"]
    stream = pcg.Stream()
    rng = np.random.default_rng(1)
    x1 = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    x2 = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    mlp.x.copy_from(x1)
    ref1, ref2 = mlp.reference(x1), mlp.reference(x2)
    rows = []

    def check(name, ref):
        diff = float(np.max(np.abs(mlp.output() - ref)))
        scale = float(np.max(np.abs(ref)))
        ok = diff <= 1e-4 * max(scale, 1.0)
        return diff, ok

    _say("[2/6] eager: one launch per layer (cuLaunchKernel x 3)...")
    wall, gpu = _time(lambda: mlp.forward(stream), stream, iters, spin)
    rows.append(("eager (3 launches/iter)", wall, gpu, *check("eager", ref1)))

    _say("[3/6] graph built node by node (cudaGraphAddKernelNode x 3)...")
    if trace:
        with pcg.trace() as t:
            g, nodes = mlp.build_graph()
            exe = g.instantiate(upload_stream=stream)
            exe.launch(stream)
        _say("raw calls:\n  " + "\n  ".join(t.calls))
    else:
        g, nodes = mlp.build_graph()
        exe = g.instantiate(upload_stream=stream)
    wall, gpu = _time(lambda: exe.launch(stream), stream, iters, spin)
    rows.append(("graph, built node by node", wall, gpu, *check("built", ref1)))

    _say("[4/6] graph captured from the eager code (cudaStreamBeginCapture)...")
    with pcg.capture(stream) as cap:
        mlp.forward(stream)
    cexe = cap.graph.instantiate(upload_stream=stream)
    wall, gpu = _time(lambda: cexe.launch(stream), stream, iters, spin)
    rows.append(("graph, captured", wall, gpu, *check("captured", ref1)))

    _say("[5/6] new input buffer swapped in with exe.set_arg (no recapture)...")
    x2buf = pcg.DeviceBuffer.from_array(x2)
    t0 = time.perf_counter()
    exe.set_arg(nodes[0], "x", x2buf)
    swap_us = (time.perf_counter() - t0) * 1e6
    wall, gpu = _time(lambda: exe.launch(stream), stream, iters, spin)
    rows.append(("graph after set_arg(x -> new buffer)", wall, gpu, *check("swapped", ref2)))

    grid, block = mlp.dims(0)
    eager_us = _held_cost(lambda: mlp.kernel.launch(grid, block, mlp.layer_args(0), stream=stream), stream, spin)
    graph_us = _held_cost(lambda: exe.launch(stream), stream, spin)

    _say(f"[6/6] writing DOT files to {out}/ ...")
    (out / "mlp_graph.dot").write_text(g.to_dot("mlp"))
    g.debug_dot_print(out / "mlp_graph_cuda.dot", verbose=True)

    eager_wall = rows[0][1]
    _say("")
    _say(f"{'variant':40s} {'ms/iter':>9s} {'GPU ms/iter':>12s} {'speedup':>8s} {'max |diff|':>11s}  check")
    for name, wall, gpu, diff, ok in rows:
        _say(f"{name:40s} {wall:9.4f} {gpu:12.4f} {eager_wall / wall:7.2f}x {diff:11.2e}  {'ok' if ok else 'MISMATCH'}")
    _say(f"set_arg swapping the input buffer took {swap_us:.1f} us (one cuGraphExecKernelNodeSetParams)")
    _say(f"CPU cost of one launch while the GPU is busy: kernel {eager_us:.2f} us, whole graph {graph_us:.2f} us")
    _say(f"model figures: eager_launch_us={eager_us:.2f} graph_launch_us={graph_us:.2f} "
         f"mlp_gpu_ms_per_iter={rows[1][2]:.5f} batch={batch}")
    _say(f"wrote {out / 'mlp_graph.dot'} and {out / 'mlp_graph_cuda.dot'}")
    all_ok = all(r[4] for r in rows)
    faster = rows[1][1] < eager_wall
    if not all_ok:
        _say("FAILED: a variant does not match numpy")
    if not faster:
        _say("NOTE: graph replay was not faster than eager launch on this run")
    return 0 if all_ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pycudagraph demo", description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=2000, help="iterations per variant (default 2000)")
    p.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    p.add_argument("--out", type=Path, default=Path("demo_out"), help="folder for DOT files")
    p.add_argument("--trace", action="store_true", help="print the raw CUDA calls made")
    p.add_argument("--model", action="store_true", help="print the cost model (works without a GPU)")
    args = p.parse_args(argv)
    if args.iters < 1 or args.batch < 1:
        p.error("--iters and --batch must be positive")
    if not _cuda.cuda_available():
        print("pycudagraph demo: no NVIDIA GPU or driver is usable on this machine"
              + ("." if args.model else "; run with --model for the cost model."), file=sys.stderr)
        if args.model:
            print_model(args.batch, args.iters)
            return 0
        return 1
    if args.model:
        print_model(args.batch, args.iters)
    return run(args.iters, args.batch, args.out, args.trace)


if __name__ == "__main__":
    raise SystemExit(main())
