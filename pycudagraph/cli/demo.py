"""``python -m pycudagraph demo``: what CUDA graphs are for, measured on this GPU.

The modes are listed in :data:`MODES` (plain text: it is also the ``--help`` epilog).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ._model_data import ASSUMED, MEASURED
from .demo_mlp import DEMO_BATCH, DEMO_LAYERS, DEMO_WIDTH, SMALL_MAX_BATCH

DEFAULT_OUT = Path(tempfile.gettempdir()) / "pycudagraph-demo"

MODES = f"""\
modes:
  demo           an MLP of {DEMO_LAYERS} small layers ({DEMO_WIDTH} features, batch {DEMO_BATCH}) on NVRTC
                 kernels: eager, a graph built node by node, a captured graph, the graph
                 after an in-place set_arg, and slower kernels; prints the GPU and how
                 many times faster the graph replays than eager; writes a table, DOT
                 files and a bar chart
  demo --decode  a batch-1 decode-like step of 200 small kernels, eager vs graph
  demo --torch   a PyTorch MLP eager, with torch.cuda.graph and with pcg.capture +
                 GraphExec (needs PyTorch with CUDA)
  demo --model   a cost model of what graphs save, filled with figures measured
                 earlier on a GPU (works without one; labelled a model)

The demo's kernels are chosen to run for less time than launching them costs the CPU,
which is where graphs pay off; where this GPU runs them too slowly (or too fast) for
that, the demo says so in one line. Every variant is checked against a float64 numpy
reference. Files go to --out, printed at the end.
"""


def say(msg: str = "") -> None:
    print(msg, flush=True)


def model_lines(iters: int) -> list[str]:
    """The cost model of ``demo --model``, as lines of text (no CUDA call).

    Per iteration of ``k`` kernels that each need ``w`` us of GPU time (the per-node cost
    of an empty kernel included), the CPU and the GPU work at the same time, so the
    slower of the two sets the pace: eager = max(k x eager launch, k x w) and graph =
    max(graph launch, k x w).
    """
    m, a = MEASURED, ASSUMED
    le, lg, node = m["eager_launch_us"], m["graph_launch_us"], m["graph_node_gpu_us"]
    small = node + a["small_kernel_work_us"]
    out = [
        "MODEL (not a measurement on this machine): what a CUDA graph saves, per iteration",
        f"Measured on {m['gpu']} ({m['when']}; {m['versions']}) by {m['how']}:",
        f"  one eager launch costs the CPU {le:.2f} us, one graph launch {lg:.2f} us; a graph "
        f"node of an empty kernel takes {node:.3f} us of GPU time",
        "The model: the CPU launches while the GPU runs, so the slower side sets the pace:",
        "  eager = N x max(k x eager launch, k x w)    graph = N x max(graph launch, k x w)",
        "  (k kernels per iteration, each needing w us of GPU time)",
    ]
    cases = (
        ("the wide MLP 512-1024-1024-512, batch 32 (w measured)", m["wide_mlp_kernels"],
         m["wide_mlp_gpu_us"] / m["wide_mlp_kernels"],
         f"measured: {m['wide_mlp_eager_us']} -> {m['wide_mlp_graph_us']} us per iteration, "
         f"{m['wide_mlp_eager_us'] / m['wide_mlp_graph_us']:.2f}x"),
        (f"the demo's deep MLP, {DEMO_LAYERS} small kernels (w ASSUMED)", DEMO_LAYERS, small,
         "run `python -m pycudagraph demo` on a GPU to measure it"),
        ("the decode step, 200 small kernels (w ASSUMED)", 200, small,
         "run `python -m pycudagraph demo --decode` on a GPU to measure it"))
    for label, k, w, measured in cases:
        eager = iters * max(k * le, k * w) / 1000
        graph = iters * max(lg, k * w) / 1000
        out += [f"{label}: k = {k}, w = {w:.2f} us, N = {iters}",
                f"  eager = {eager:9.2f} ms   graph = {graph:9.2f} ms   modelled speedup "
                f"{eager / graph:.2f}x ({measured})"]
    out.append(f"ASSUMED: each of the demo's small kernels does {a['small_kernel_work_us']} us of "
               "work beyond an empty kernel's; graphs pay off where k x w is well under k x "
               "eager launch, that is, where kernels run for less time than launching them costs")
    return out


def print_model(iters: int) -> None:
    """Print :func:`model_lines`."""
    for line in model_lines(iters):
        say(line)


def _gpu_problem() -> str | None:
    """None when a GPU is usable; else what is missing, in a few words."""
    import pycudagraph as pcg
    try:
        pcg.Stream().close()  # cudaGetDeviceCount, cudaFree(0), cudaStreamCreate
    except pcg.CudaNotAvailableError as exc:
        return f"no NVIDIA GPU or driver is usable on this machine ({exc.name})"
    return None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pycudagraph demo",
                                description="What CUDA graphs are for, measured on this GPU.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=MODES)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--decode", action="store_true",
                      help="the 200-kernel decode step, eager vs graph")
    mode.add_argument("--torch", action="store_true", help="a PyTorch MLP three ways")
    mode.add_argument("--model", action="store_true",
                      help="print the cost model (works without a GPU)")
    p.add_argument("--iters", type=int, default=None,
                   help="iterations per timing (default 2000; --decode: steps, default 200; "
                        "--model: N, default 1000)")
    p.add_argument("--batch", type=int, default=None,
                   help=f"rows of the default demo's MLP, 1 to {SMALL_MAX_BATCH} (default "
                        f"{DEMO_BATCH}); only the default demo takes it")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"folder for the DOT files and charts (default {DEFAULT_OUT})")
    p.add_argument("--trace", action="store_true",
                   help="print the raw CUDA calls of the built graph")
    return p


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if (args.iters is not None and args.iters < 1) or (args.batch is not None and args.batch < 1):
        p.error("--iters and --batch must be positive")
    if args.batch is not None and (args.model or args.decode or args.torch):
        mode = "--model" if args.model else "--decode" if args.decode else "--torch"
        p.error(f"--batch applies to the default demo only; {mode} has a fixed batch")
    if args.batch is not None and args.batch > SMALL_MAX_BATCH:
        p.error(f"--batch: the demo's small-layer kernel takes 1 to {SMALL_MAX_BATCH} rows, "
                f"got {args.batch}")
    if args.model:
        print_model(args.iters or 1000)
        return 0
    if args.torch:
        from . import demo_torch
        torch, why = demo_torch.import_torch()
        if torch is None:
            print(f"pycudagraph {why}", file=sys.stderr)
            return 1
    problem = _gpu_problem()
    if problem is not None:
        print(f"pycudagraph demo: {problem}; `python -m pycudagraph demo --model` prints the "
              "cost model instead.", file=sys.stderr)
        return 1
    if args.decode:
        from . import demo_decode
        status, figures = demo_decode.run(args.iters or 200, args.out)
    elif args.torch:
        status, figures = demo_torch.run(args.iters or 2000, args.out), {}
    else:
        from . import demo_mlp
        status, figures = demo_mlp.run(args.iters or 2000, args.batch or DEMO_BATCH, args.out,
                                       args.trace)
    if figures:
        say("model figures: " + " ".join(f"{k}={v:.5g}" for k, v in figures.items()))
    say(f"output folder: {args.out}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
