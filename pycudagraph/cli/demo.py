"""``python -m pycudagraph demo``: what CUDA graphs are for, measured on this GPU.

``demo``           the 3-layer MLP (512 -> 1024 -> 1024 -> 512, ReLU, batch 32) on NVRTC
                   kernels (kernels/mlp.cu): eager, a graph built node by node, a captured
                   graph, the graph after an in-place ``set_arg``, and the naive kernels;
                   a table, DOT files and a bar chart (:mod:`.demo_mlp`)
``demo --decode``  a batch-1 decode-like step of 200 small kernels, eager vs graph
                   (:mod:`.demo_decode`)
``demo --torch``   the seed's PyTorch model eager, with ``torch.cuda.graph`` and with
                   ``pcg.capture`` + ``GraphExec`` (:mod:`.demo_torch`)
``demo --model``   the seed's cost model filled with figures measured earlier on a GPU
                   (works without one; labelled a model, never a measurement)

Every variant is checked against a float64 numpy reference. Files go to ``--out``
(default: ``pycudagraph-demo`` in the system's temporary folder), printed at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ._model_data import MEASURED

DEFAULT_OUT = Path(tempfile.gettempdir()) / "pycudagraph-demo"


def say(msg: str = "") -> None:
    print(msg, flush=True)


def print_model(iters: int) -> None:
    """The seed's cost model, eager = N(k*launch + compute) and graph = N(launch + compute),
    for the MLP and the decode step, with the figures shipped in :mod:`._model_data`."""
    m = MEASURED
    say("MODEL (not a measurement on this machine): the seed's cost model, filled with figures")
    say(f"measured on {m['gpu']} ({m['when']}; {m['versions']}) by `{m['how']}`:")
    say(f"  launch = CPU cost of one launch while the GPU is busy: eager kernel "
        f"{m['eager_launch_us']:.2f} us, graph {m['graph_launch_us']:.2f} us")
    cases = (("MLP, batch %d" % m["batch"], 3, m["mlp_gpu_ms_per_iter"], "iter"),
             ("decode step", m["decode_kernels"], m["decode_gpu_ms_per_step"], "step"))
    for label, k, compute, unit in cases:
        eager = iters * (k * m["eager_launch_us"] / 1000 + compute)
        graph = iters * (m["graph_launch_us"] / 1000 + compute)
        say(f"{label}: k = {k} kernels per {unit}, compute = {compute * 1000:.1f} us of GPU "
            f"time, N = {iters}")
        say(f"  eager = N x (k x {m['eager_launch_us']:.2f} us + compute) = {eager:9.2f} ms")
        say(f"  graph = N x ({m['graph_launch_us']:.2f} us + compute)     = {graph:9.2f} ms"
            f"   modelled speedup {eager / graph:.2f}x")
    say("(the GPU runs while the CPU launches, so real eager times fall between the larger of "
        "the two terms and their sum)")


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
                                epilog=__doc__.split("\n\n", 1)[1])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--decode", action="store_true",
                      help="the 200-kernel decode step, eager vs graph")
    mode.add_argument("--torch", action="store_true", help="the seed's PyTorch model three ways")
    mode.add_argument("--model", action="store_true",
                      help="print the cost model (works without a GPU)")
    p.add_argument("--iters", type=int, default=None,
                   help="iterations per timing (default 2000; --decode: steps, default 50; "
                        "--model: N, default 1000)")
    p.add_argument("--batch", type=int, default=32, help="MLP batch size (default 32)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"folder for the DOT files and charts (default {DEFAULT_OUT})")
    p.add_argument("--trace", action="store_true",
                   help="print the raw CUDA calls of the built graph")
    return p


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if (args.iters is not None and args.iters < 1) or args.batch < 1:
        p.error("--iters and --batch must be positive")
    if args.model:
        print_model(args.iters or 1000)
        return 0
    if args.torch:
        from . import demo_torch
        torch, why = demo_torch.import_torch()
        if torch is None:
            say(why)
            return 0
    problem = _gpu_problem()
    if problem is not None:
        print(f"pycudagraph demo: {problem}; `python -m pycudagraph demo --model` prints the "
              "cost model instead.", file=sys.stderr)
        return 1
    if args.decode:
        from . import demo_decode
        status, figures = demo_decode.run(args.iters or 50, args.out)
    elif args.torch:
        status, figures = demo_torch.run(args.iters or 2000, args.out), {}
    else:
        from . import demo_mlp
        status, figures = demo_mlp.run(args.iters or 2000, args.batch, args.out, args.trace)
    if figures:
        say("model figures: " + " ".join(f"{k}={v:.5g}" for k, v in figures.items()))
    say(f"output folder: {args.out}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
