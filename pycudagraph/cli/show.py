"""``python -m pycudagraph show``: write the interactive page of a graph.

``show``              build the showcase graph on this GPU (a host-to-device copy, a
                      memset, kernels on two branches, a child graph, a ``while`` loop of
                      three passes, a reduction and the copy back), launch it once, check
                      its result, and write its page
``show --profile``    also profile it (``GraphExec.profile``): nodes coloured by GPU time
``show --model``      the page of a CPU-side model of the same graph: no GPU needed
                      (parameters typed in, addresses made up, no times)
``show FILE``         the page of a saved graph file (``pcg.load``), once this version
                      has saved graph files

The page goes to ``--out`` (default ``pycudagraph-graph.html`` in the system's temporary
folder); its path is printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(tempfile.gettempdir()) / "pycudagraph-graph.html"
N = 1 << 16
LOOPS = 3

__all__ = ["main", "build_showcase", "DEFAULT_OUT"]


def build_showcase():
    """(graph, check, keep): the showcase graph, a function that says whether one launch
    computed the right sum, and the buffers it uses."""
    import pycudagraph as pcg
    h = pcg.Module.from_file("helpers.cu")
    ctl = pcg.Module.from_file("graph_control.cu")
    grid, block = N // 256, 256
    host_x = pcg.PinnedBuffer(4 * N)
    host_x.array(np.float32)[:] = 1.0
    host_out = pcg.PinnedBuffer(4)
    x, y = pcg.DeviceBuffer(4 * N), pcg.DeviceBuffer(4 * N)
    out, counter = pcg.DeviceBuffer(4), pcg.DeviceBuffer(4)

    g = pcg.Graph()
    upload = g.add_memcpy(x, host_x)
    clear = g.add_memset(y, 0, N, element_size=4)
    fill = g.add_kernel(h["fill"], grid, block, (y, 1.0, N), deps=[clear])
    axpy = g.add_kernel(h["axpy"], grid, block, (y, x, 2.0, N), deps=[upload, fill])  # y = 3
    scale = g.add_kernel(h["scale"], grid, block, (y, 2.0, N), deps=[axpy])  # y = 6
    sub = pcg.Graph()
    first = sub.add_kernel(h["add_one"], grid, block, (y, N))
    sub.add_kernel(h["add_one"], grid, block, (y, N), deps=[first])
    child = g.add_child_graph(sub, deps=[scale])  # y = 8
    zero = g.add_memset(counter, 0, 1, element_size=4)
    handle = g.conditional_handle(default=1)
    loop = g.add_while(handle, deps=[child, zero])
    step = loop.body.add_kernel(h["add_one"], grid, block, (y, N))  # y = 8 + LOOPS
    loop.body.add_kernel(ctl["count_while_below"], 1, 1, (counter, LOOPS, handle), deps=[step])
    zero_out = g.add_memset(out, 0, 1, element_size=4)
    total = g.add_kernel(h["reduce_sum"], 64, 256, (y, out, N), deps=[loop, zero_out])
    g.add_memcpy(host_out, out, deps=[total])

    def check() -> bool:
        return float(host_out.array(np.float32)[0]) == float((8 + LOOPS) * N)
    return g, check, (host_x, host_out, x, y, out, counter)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pycudagraph show",
                                description="Write the interactive page of a graph.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("file", nargs="?", type=Path, help="a saved graph file (pcg.load)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"where to write the page (default {DEFAULT_OUT})")
    p.add_argument("--profile", action="store_true", help="colour the nodes by GPU time")
    p.add_argument("--repeats", type=int, default=10, help="launches to profile (default 10)")
    p.add_argument("--model", action="store_true",
                   help="a CPU-side model of the showcase graph (works without a GPU)")
    return p


def _write_model(out: Path) -> int:
    from ..inspect.html import render_page
    from .show_model import showcase_model
    out.write_text(render_page(showcase_model()), encoding="utf-8")
    print(f"wrote {out} (a model of the showcase graph, drawn without a GPU)")
    return 0


def _gpu_graph(args):
    import pycudagraph as pcg
    if args.file is not None:
        load = getattr(pcg, "load", None)
        if load is None:
            return None
        return load(args.file), None, (), f"pycudagraph graph {args.file.name}"
    g, check, keep = build_showcase()
    return g, check, keep, "pycudagraph showcase graph"


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be positive")
    if args.model:
        if args.file is not None or args.profile:
            p.error("--model draws the showcase model: no FILE, no --profile")
        return _write_model(args.out)
    import pycudagraph as pcg
    try:
        pcg.Stream().close()
    except pcg.CudaNotAvailableError as exc:
        print(f"pycudagraph show: no NVIDIA GPU or driver is usable here ({exc.name}); "
              "`python -m pycudagraph show --model` draws a model of the graph instead.",
              file=sys.stderr)
        return 1
    found = _gpu_graph(args)
    if found is None:
        print("pycudagraph show: this version cannot read saved graph files yet (pcg.load); "
              "run `show` or `show --model` instead", file=sys.stderr)
        return 2
    g, check, keep, title = found
    stream = pcg.Stream()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    if check is not None and not check():
        print("pycudagraph show: the showcase graph computed a wrong sum", file=sys.stderr)
        return 1
    profile = exe.profile(stream, repeats=args.repeats) if args.profile else None
    if profile is not None:
        print(profile)
    g.to_html(args.out, profile=profile, title=title)
    print(f"wrote {args.out}")
    del keep
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
