"""The demo MLPs (ReLU, float32) on kernels/mlp.cu and kernels/mlp_small.cu.

The default demo runs a deep, narrow network (``DEMO_LAYERS`` layers of ``DEMO_WIDTH``
features, batch ``DEMO_BATCH``): each layer is one launch of a kernel that runs for well
under a microsecond, so an eager forward pass is bound by launching, which is what a
graph saves. The benchmarks (``benchmarks/mlp.py``) time the wider 512 -> 1024 -> 1024 ->
512 network (``SIZES``), whose three kernels keep the GPU busy longer than launching them
takes.

Three kernel sets compute the same layers, ``y = relu(x @ w + b)`` with ``w`` stored
``[in, out]`` row-major:

* ``"small"``: ``linear_warp`` (kernels/mlp_small.cu), one warp per output feature, the
  weights uploaded transposed; batches of up to ``SMALL_MAX_BATCH`` rows;

* ``"fast"``: ``linear_splitk`` spreads each layer over about ``TARGET_BLOCKS`` blocks
  (32 output columns x one slice of the input features each; the slices of a tile are
  summed by the tile's last block, which also adds the bias and applies ReLU);
* ``"naive"``: ``linear_bias_relu``, a 16x16 shared-memory tiled GEMM with one output per
  thread (``batch/16 x out/16`` blocks, too few to fill a GPU at batch 32).

:class:`MLP` holds the weights, the device buffers and the three launches; the demo
(:func:`run`) runs them eagerly, as a graph built node by node, as a captured graph and
after an in-place ``set_arg``, and the benchmarks (``benchmarks/mlp.py``) reuse it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pycudagraph as pcg

from .demo_common import (Check, Clock, Row, compare, gpu_name, headline, print_table, say,
                          verdict, write_chart)

SIZES = (512, 1024, 1024, 512)
#: Warps per ``linear_splitk`` block and the largest input slice per block: the
#: defaults of ``SPLITK_WARPS`` / ``SPLITK_MAX_KC`` in kernels/mlp.cu.
SPLITK_WARPS, SPLITK_MAX_KC = 8, 256
#: Blocks per layer the split is chosen for: about one per SM of an H100 (132 SMs),
#: where a sweep (``python -m benchmarks.mlp``) found the whole model fastest
#: (19.0 us per iteration; 21.0 at 256 blocks, 30.8 at 512: a block is a short chain
#: of memory round trips, so a second wave of blocks costs a whole chain more).
TARGET_BLOCKS = 128
#: The default demo's network: launch-bound on any current GPU.
DEMO_LAYERS, DEMO_WIDTH, DEMO_BATCH = 24, 32, 2
DEMO_SIZES = (DEMO_WIDTH,) * (DEMO_LAYERS + 1)
#: Rows ``linear_warp`` takes (``LW_MAX_BATCH`` in kernels/mlp_small.cu).
SMALL_MAX_BATCH = 16
#: Warps per ``linear_warp`` block (one output feature each).
SMALL_WARPS = 8


def allowed_splits(in_features: int, warps: int = SPLITK_WARPS) -> list[int]:
    """Slice counts ``linear_splitk`` accepts for ``in_features`` (kernels/mlp.cu's size rules)."""
    return [s for s in (1, 2, 4, 8, 16, 32, 64)
            if in_features % (4 * warps * s) == 0 and in_features // s <= SPLITK_MAX_KC]


def choose_splits(in_features: int, out_features: int, batch: int,
                  target_blocks: int = TARGET_BLOCKS, warps: int = SPLITK_WARPS) -> int:
    """Slices of the input features per ``linear_splitk`` tile: the fewest allowed ones
    that give ``target_blocks`` blocks."""
    if out_features % 32:
        raise ValueError(f"linear_splitk needs out_features % 32 == 0, got {out_features}")
    tiles = out_features // 32 * -(-batch // 32)
    allowed = allowed_splits(in_features, warps)
    if not allowed:
        raise ValueError(f"linear_splitk cannot split in_features={in_features}: it needs a "
                         f"multiple of {4 * warps} with at most {SPLITK_MAX_KC} per slice")
    return next((s for s in allowed if tiles * s >= target_blocks), allowed[-1])


def make_weights(seed: int = 0, sizes=SIZES):
    """Host float32 weights ``[in, out]`` and biases of the demo network."""
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)
          for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [(0.1 * rng.standard_normal(o)).astype(np.float32) for o in sizes[1:]]
    return ws, bs


def reference(x: np.ndarray, ws, bs) -> np.ndarray:
    """The network in float64 numpy."""
    h = np.asarray(x, dtype=np.float64)
    for i, (w, b) in enumerate(zip(ws, bs)):
        h = h @ w.astype(np.float64) + b.astype(np.float64)
        if i < len(ws) - 1:
            h = np.maximum(h, 0.0)
    return h


class MLP:
    """Weights, buffers and the three layer launches of the demo network.

    Parameters
    ----------
    batch : int
        Rows of the input.
    kernels : {"fast", "naive", "small"}
        ``linear_splitk`` or ``linear_bias_relu`` (kernels/mlp.cu), or ``linear_warp``
        (kernels/mlp_small.cu, at most ``SMALL_MAX_BATCH`` rows).
    weights : tuple, optional
        ``(ws, bs)`` from :func:`make_weights`; made from ``seed`` and ``sizes`` when absent.
    warps, target_blocks : int
        ``linear_splitk`` block size in warps (compiled in with ``-DSPLITK_WARPS``) and
        the blocks per layer its split aims at.
    splits : sequence of int, optional
        Slices per layer, overriding ``target_blocks`` (the tuning sweep uses it).
    options : sequence of str
        More NVRTC options for ``linear_splitk`` (``-DSPLITK_PREFETCH=0`` and the like).
    """

    def __init__(self, batch: int, kernels: str = "fast", weights=None, seed: int = 0, sizes=SIZES,
                 warps: int = SPLITK_WARPS, target_blocks: int = TARGET_BLOCKS, splits=None,
                 options=(), stream: pcg.Stream | None = None):
        if kernels not in ("fast", "naive", "small"):
            raise ValueError(f"kernels must be 'fast', 'naive' or 'small', got {kernels!r}")
        if kernels == "small" and not 1 <= batch <= SMALL_MAX_BATCH:
            raise ValueError(f"the small-layer kernel takes 1 to {SMALL_MAX_BATCH} rows, "
                             f"got batch {batch}")
        self.batch, self.kind = batch, kernels
        self.ws, self.bs = weights if weights is not None else make_weights(seed, sizes)
        self.sizes = sizes = (self.ws[0].shape[0],) + tuple(w.shape[1] for w in self.ws)
        if kernels == "fast":
            if warps != SPLITK_WARPS:
                options = tuple(options) + (f"-DSPLITK_WARPS={warps}",)
            self.kernel = pcg.Module.from_file("mlp.cu", options=options)["linear_splitk"]
        elif kernels == "small":
            self.kernel = pcg.Module.from_file("mlp_small.cu")["linear_warp"]
        else:
            self.kernel = pcg.Module.from_file("mlp.cu")["linear_bias_relu"]
        on_device = [np.ascontiguousarray(w.T) for w in self.ws] if kernels == "small" else self.ws
        self.dw = [pcg.DeviceBuffer.from_array(w, stream=stream) for w in on_device]
        self.db = [pcg.DeviceBuffer.from_array(b, stream=stream) for b in self.bs]
        self.x = pcg.DeviceBuffer(4 * batch * sizes[0])
        self.acts = [pcg.DeviceBuffer(4 * batch * o) for o in sizes[1:]]
        self.splits, self.grids, self.scratch = [], [], []
        n = len(self.ws)
        for i in range(n):
            fan_in, fan_out = sizes[i], sizes[i + 1]
            if kernels == "naive":
                self.grids.append(((fan_out + 15) // 16, (batch + 15) // 16))
                continue
            if kernels == "small":
                self.grids.append((-(-fan_out // SMALL_WARPS),))
                continue
            s = splits[i] if splits else choose_splits(fan_in, fan_out, batch, target_blocks, warps)
            if s not in allowed_splits(fan_in, warps):
                raise ValueError(f"layer {i}: {s} slices of {fan_in} inputs is not one of "
                                 f"{allowed_splits(fan_in, warps)}")
            row_tiles = -(-batch // 32)
            partial = pcg.DeviceBuffer(4 * (s * row_tiles * 32 * fan_out if s > 1 else 1))
            counters = pcg.DeviceBuffer(4 * (fan_out // 32) * row_tiles)
            counters.zero(stream=stream)
            self.splits.append(s)
            self.grids.append((fan_out // 32, s, row_tiles))
            self.scratch.append((partial, counters))
        self.block = {"fast": (warps * 32,), "small": (SMALL_WARPS * 32,)}.get(kernels, (16, 16))

    @property
    def blocks(self) -> list[int]:
        """Blocks per layer launch."""
        return [int(np.prod(g)) for g in self.grids]

    def layer_args(self, i: int, x=None) -> tuple:
        inp = (self.x if x is None else x) if i == 0 else self.acts[i - 1]
        relu = 1 if i < len(self.ws) - 1 else 0
        dims = (self.batch, self.sizes[i], self.sizes[i + 1], relu)
        if self.kind in ("naive", "small"):
            return (inp, self.dw[i], self.db[i], self.acts[i], *dims)
        partial, counters = self.scratch[i]
        return (inp, self.dw[i], self.db[i], self.acts[i], partial, counters, *dims)

    def forward(self, stream, x=None) -> None:
        """Eager: one ``cuLaunchKernel`` per layer."""
        for i in range(len(self.ws)):
            self.kernel.launch(self.grids[i], self.block, self.layer_args(i, x), stream=stream)

    def build_graph(self, x=None):
        """A graph of the three layers built node by node (``cudaGraphAddKernelNode``)."""
        g = pcg.Graph()
        nodes, prev = [], ()
        for i in range(len(self.ws)):
            prev = (g.add_kernel(self.kernel, self.grids[i], self.block, self.layer_args(i, x),
                                 deps=prev),)
            nodes.append(prev[0])
        return g, nodes

    def reference(self, x: np.ndarray) -> np.ndarray:
        return reference(x, self.ws, self.bs)

    def check(self, run, stream, rng, trials: int = 2, x_buf=None) -> Check:
        """``trials`` times: fresh random input, NaN-poisoned output, ``run()``, compare
        with float64."""
        result = Check(0.0, 0.0)
        out = self.acts[-1]
        poison = np.full((self.batch, self.sizes[-1]), np.nan, np.float32)
        for _ in range(trials):
            x = rng.standard_normal((self.batch, self.sizes[0])).astype(np.float32)
            (self.x if x_buf is None else x_buf).copy_from(x, stream=stream)
            out.copy_from(poison, stream=stream)
            run()
            stream.synchronize()
            got = out.to_numpy(np.float32, poison.shape)
            result = result.merge(compare(got, self.reference(x)))
        return result


def check_shapes(stream: pcg.Stream, seed: int = 11) -> list[tuple[str, Check]]:
    """``linear_splitk`` on other batches, splits and block sizes than the demo's: eager and
    graph, twice each (the tile counters must re-arm), fresh inputs, poisoned outputs."""
    rng = np.random.default_rng(seed)
    cases = [dict(batch=b) for b in (1, 5, 31, 33, 64, 100)]
    cases += [dict(batch=32, splits=s) for s in ((2, 4, 4), (2, 4, 8), (4, 8, 16), (16, 32, 32))]
    cases += [dict(batch=b, sizes=(256, 128, 96, 64), target_blocks=1) for b in (3, 32, 40)]
    cases += [dict(batch=32, warps=4), dict(batch=45, warps=4, target_blocks=512)]
    out = []
    for case in cases:
        mlp = MLP(kernels="fast", stream=stream, **case)
        exe = mlp.build_graph()[0].instantiate()
        result = Check(0.0, 0.0)
        for run in (lambda: mlp.forward(stream), lambda: exe.launch(stream)) * 2:
            result = result.merge(mlp.check(run, stream, rng, trials=1))
        name = f"batch {mlp.batch:3d}, {mlp.block[0] // 32} warps, slices {mlp.splits}"
        out.append((name, result))
    return out


def run(iters: int, batch: int, out: Path, trace: bool) -> tuple[int, dict]:
    """The default demo: the deep, narrow MLP (``DEMO_SIZES``) eager and as graphs; returns
    (exit status, the figures ``demo --model`` is filled with)."""
    k = len(DEMO_SIZES) - 1
    gpu = gpu_name()
    say(f"pycudagraph demo on {gpu}: an MLP of {k} layers of {DEMO_WIDTH} features, batch "
        f"{batch}, float32, {iters} iterations per timing")
    say(f"      each layer is one small kernel, so an eager pass is {k} launches that cost "
        "the CPU more than the GPU needs to run them: the work CUDA graphs are for")
    say("[1/6] compiling kernels/mlp_small.cu and kernels/mlp.cu with NVRTC (cached after the "
        "first run)...")
    stream = pcg.Stream()
    clock = Clock(stream)
    ws, bs = make_weights(0, DEMO_SIZES)
    mlp = MLP(batch, "small", weights=(ws, bs), stream=stream)
    naive = MLP(batch, "naive", weights=(ws, bs), stream=stream)
    rng = np.random.default_rng(1)
    say(f"      linear_warp: {mlp.block[0]} threads/block, {mlp.blocks[0]} blocks per layer "
        "(one warp per output feature)")
    rows: list[Row] = []

    say(f"[2/6] eager: one launch per layer (cuLaunchKernel x {k})...")
    eager = lambda: mlp.forward(stream)  # noqa: E731
    rows.append(clock.row(f"eager ({k} launches/iter)", eager, iters,
                          mlp.check(eager, stream, rng)))

    say(f"[3/6] graph built node by node (cudaGraphAddKernelNode x {k})...")
    if trace:
        with pcg.trace() as t:
            g, nodes = mlp.build_graph()
            exe = g.instantiate(upload_stream=stream)
            exe.launch(stream)
        say("raw calls:\n  " + "\n  ".join(t.calls))
    else:
        g, nodes = mlp.build_graph()
        exe = g.instantiate(upload_stream=stream)
    built = lambda: exe.launch(stream)  # noqa: E731
    rows.append(clock.row("graph, built node by node", built, iters, mlp.check(built, stream, rng)))

    say("[4/6] graph captured from the eager code (cudaStreamBeginCapture)...")
    with pcg.capture(stream) as cap:
        mlp.forward(stream)
    cexe = cap.graph.instantiate(upload_stream=stream)
    captured = lambda: cexe.launch(stream)  # noqa: E731
    rows.append(clock.row("graph, captured", captured, iters, mlp.check(captured, stream, rng)))

    say("[5/6] a new input buffer swapped into the built graph with exe.set_arg (no recapture)...")
    x2 = pcg.DeviceBuffer(mlp.x.nbytes)
    swap_us = clock.held_us(lambda: exe.set_arg(nodes[0], "x", x2), n=200)
    rows.append(clock.row("graph after set_arg(x -> new buffer)", built, iters,
                          mlp.check(built, stream, rng, x_buf=x2)))
    ng, _ = naive.build_graph()
    nexe = ng.instantiate(upload_stream=stream)
    old = lambda: nexe.launch(stream)  # noqa: E731
    rows.append(clock.row("graph, naive 16x16 GEMM kernels", old, iters,
                          naive.check(old, stream, rng)))

    grid0, args0 = mlp.grids[0], mlp.layer_args(0)
    eager_us = clock.held_us(lambda: mlp.kernel.launch(grid0, mlp.block, args0, stream=stream))
    graph_us = clock.held_us(lambda: exe.launch(stream))

    say(f"[6/6] writing DOT files and the chart to {out}/ ...")
    out.mkdir(parents=True, exist_ok=True)
    (out / "mlp_graph.dot").write_text(g.to_dot("mlp"))
    g.debug_dot_print(out / "mlp_graph_cuda.dot", verbose=True)
    chart = write_chart(out / "mlp_demo.png", f"MLP, {k} layers of {DEMO_WIDTH}, batch {batch}: "
                        "eager vs CUDA graph", rows)
    say("")
    all_ok = print_table(rows)
    say("")
    eager_row, graph_row = rows[0], rows[1]
    say(headline(gpu, eager_row.ms, graph_row.ms, k, "iteration"))
    say(f"the GPU needs {graph_row.gpu_ms * 1e3:.1f} us per iteration with these kernels "
        f"({graph_row.gpu_ms * 1e3 / k:.2f} us per layer), {rows[-1].gpu_ms * 1e3:.1f} us with "
        "the naive ones")
    say(f"set_arg swapping the input buffer took {swap_us:.1f} us "
        "(one cuGraphExecKernelNodeSetParams)")
    say(f"CPU cost of one launch while the GPU is busy: one kernel {eager_us:.2f} us, "
        f"the whole graph of {k} kernels {graph_us:.2f} us")
    say(f"wrote {out / 'mlp_graph.dot'} and {out / 'mlp_graph_cuda.dot'}; {chart}")
    note = verdict(eager_row.ms, graph_row.ms, graph_row.gpu_ms, "iteration")
    if note:
        say(note)
    if not all_ok:
        say("FAILED: a variant does not match the float64 reference")
    figures = {"eager_launch_us": eager_us, "graph_launch_us": graph_us,
               "mlp_layers": k, "mlp_gpu_ms_per_iter": graph_row.gpu_ms,
               "mlp_eager_ms_per_iter": eager_row.ms, "mlp_graph_ms_per_iter": graph_row.ms}
    return (0 if all_ok else 1), figures
