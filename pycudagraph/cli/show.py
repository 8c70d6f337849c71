"""``python -m pycudagraph show``: write the interactive page of a graph.

The modes are in :data:`MODES` (plain text: it is also the ``--help`` epilog).
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

__all__ = ["main", "build_showcase", "stand_ins", "DEFAULT_OUT"]

MODES = f"""\
modes:
  show              build the showcase graph on this GPU (a host-to-device copy, a
                    memset, kernels on two branches, a child graph, a while loop of
                    three passes, a reduction and the copy back), launch it once,
                    check its result, and write its page
  show --profile    also profile it: nodes coloured by GPU time
  show --model      the page of a CPU-side model of the same graph: no GPU needed
                    (parameters typed in, addresses made up, no times)
  show FILE         the page of a graph file saved with Graph.save (loaded with
                    pcg.load). Each slot of the file is bound to a fresh, zeroed
                    stand-in of its saved kind and size (device or pinned host memory,
                    or an event), so the page shows the file's structure and
                    parameters; the graph is not launched, except with --profile,
                    which runs it on those zeroed stand-ins. A file with kernels
                    saved by name from a library (a key of a saved graphed callable)
                    is drawn from the file alone, as with --model
  show FILE --model the page of a graph file from the file alone: no GPU needed (its
                    nodes, launch fields and argument bytes as saved, addresses as the
                    slots they point into, no times)

The page goes to --out (default {DEFAULT_OUT}); its path is printed.
"""


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
                                epilog=MODES)
    p.add_argument("file", nargs="?", type=Path,
                   help="a graph file saved with Graph.save (its slots get zeroed stand-ins)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"where to write the page (default {DEFAULT_OUT})")
    p.add_argument("--profile", action="store_true", help="colour the nodes by GPU time")
    p.add_argument("--repeats", type=int, default=10, help="launches to profile (default 10)")
    p.add_argument("--model", action="store_true",
                   help="a CPU-side model of the showcase graph, or with FILE the page of "
                        "the file alone (works without a GPU)")
    return p


def _fail(msg: str, status: int) -> int:
    print(f"pycudagraph show: {msg}", file=sys.stderr)
    return status


def _out_problem(out: Path) -> str | None:
    """None when the page can be written to ``out``; else why not, in a few words."""
    if out.is_dir():
        return f"--out {out} is a folder; name the page's file (for example {out / 'graph.html'})"
    if not out.parent.is_dir():
        return f"--out {out}: the folder {out.parent} does not exist"
    return None


def _folder_problem(folder: Path) -> str:
    """Why ``show FOLDER`` draws nothing, and which files of it can be drawn."""
    files = sorted(folder.glob("*.pcgraph"))
    if not files:
        return f"{folder} is a folder with no graph file (*.pcgraph); show draws one graph file"
    more = f" ({len(files)} there)" if len(files) > 1 else ""
    return (f"{folder} is a folder; show draws one graph file: name one, for example "
            f"{files[0]}{more}; `python -m pycudagraph info {folder}` says what the folder holds")


def _write_model(out: Path) -> int:
    from ..inspect.html import render_page
    from .show_model import showcase_model
    out.write_text(render_page(showcase_model()), encoding="utf-8")
    print(f"wrote {out} (a model of the showcase graph, drawn without a GPU)")
    return 0


def _write_file_model(gf, path: Path, out: Path, why: str = "") -> int:
    """The page of the graph file ``gf`` (read from ``path``), drawn from the file alone."""
    from ..inspect.file_page import file_model
    from ..inspect.html import render_page
    model = file_model(gf, f"pycudagraph graph {path.name} (from the file)")
    out.write_text(render_page(model), encoding="utf-8")
    print(f"wrote {out} (the graph file {path.name}, drawn from the file without a GPU{why})")
    return 0


def library_kernels(gf) -> int:
    """How many kernels the graph file ``gf`` (as
    :func:`~pycudagraph.files.archive.read_file` gave it) saved by name (a library's:
    PyTorch's, cuBLAS's): a process that has not loaded that library cannot find them, so
    ``show`` cannot load the file to draw or profile it. No CUDA call."""
    from ..files.bulk_format import named_kernels
    return int(named_kernels(gf.manifest["kernels"]).sum())


def _library_file(args, gf, named: int) -> int:
    """The answer for ``show FILE`` (on the GPU) when FILE holds ``named`` library kernels:
    its page from the file alone; with --profile, a refusal saying where to profile it."""
    if args.profile:
        return _fail(f"{args.file.name} holds {named} kernel(s) saved by name from a library "
                     "(PyTorch's, cuBLAS's), which this process cannot find, so it cannot run "
                     "the graph to profile it. Profile it where it is loaded (the process that "
                     "calls pcg.load_graphed or pcg.load with resolve=); "
                     f"`python -m pycudagraph show {args.file} --model` draws it here.", 1)
    return _write_file_model(gf, args.file, args.out,
                             f": its {named} kernel(s) saved by name from a library are found "
                             "only where that library runs")


def _names(names, shown: int = 6) -> str:
    names = list(names)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def stand_ins(slots: dict, make: dict) -> dict:
    """``{slot name: stand-in}`` for every slot of a graph file.

    Parameters
    ----------
    slots : dict
        The file's slot table, ``{name: {"kind": "device" | "host" | "event", "nbytes": n}}``.
    make : dict
        ``{kind: factory}``: ``factory(nbytes)`` makes a zeroed stand-in of that kind
        (:func:`_factories`: ``cudaMalloc`` + ``cudaMemsetAsync``, ``cudaHostAlloc``,
        ``cudaEventCreate``).
    """
    return {name: make[meta["kind"]](max(int(meta["nbytes"]), 1)) for name, meta in slots.items()}


def _factories(pcg, stream) -> dict:
    def device(nbytes):
        buf = pcg.DeviceBuffer(nbytes)
        buf.zero(stream=stream)
        return buf

    def host(nbytes):
        buf = pcg.PinnedBuffer(nbytes)
        buf.array(np.uint8)[:] = 0
        return buf
    return {"device": device, "host": host, "event": lambda nbytes: pcg.Event()}


def _gpu_graph(args, stream, gf):
    import pycudagraph as pcg
    if args.file is not None:
        bind = stand_ins(gf.manifest["slots"], _factories(pcg, stream))
        stream.synchronize()
        if bind:
            print(f"{args.file.name}: {len(bind)} slot(s) ({_names(bind)}) bound to zeroed "
                  "stand-ins")
        return pcg.load(args.file, bind=bind), None, bind, f"pycudagraph graph {args.file.name}"
    g, check, keep = build_showcase()
    return g, check, keep, "pycudagraph showcase graph"


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be positive")
    if args.model and args.profile:
        p.error("--model draws without a GPU: no --profile")
    problem = _out_problem(args.out)
    if problem is not None:
        return _fail(problem, 2)
    if args.file is not None and args.file.is_dir():
        return _fail(_folder_problem(args.file), 2)
    if args.file is not None and not args.file.is_file():
        return _fail(f"{args.file}: no such graph file", 2)
    try:
        if args.file is None:
            return _write_model(args.out) if args.model else _on_gpu(args, None)
        from ..errors import GraphFileError
        from ..files.archive import read_file
        try:
            gf = read_file(args.file)  # read and checked once: every route below draws it
        except GraphFileError as exc:
            return _fail(str(exc), 1)
        if args.model:
            return _write_file_model(gf, args.file, args.out)
        named = library_kernels(gf)
        return _library_file(args, gf, named) if named else _on_gpu(args, gf)
    except OSError as exc:  # the page could not be written
        return _fail(f"cannot write {args.out}: {exc.strerror or exc}", 2)


def _on_gpu(args, gf) -> int:
    import pycudagraph as pcg
    try:
        stream = pcg.Stream()
    except pcg.CudaNotAvailableError as exc:
        instead = (f"`python -m pycudagraph show {args.file} --model` draws it from the file "
                   "alone" if args.file is not None else
                   "`python -m pycudagraph show --model` draws a model of the graph")
        return _fail(f"no NVIDIA GPU or driver is usable here ({exc.name}); {instead} instead.", 1)
    try:
        g, check, keep, title = _gpu_graph(args, stream, gf)
    except (pcg.GraphFileError, pcg.ArgumentError) as exc:
        return _fail(str(exc), 1)
    if args.file is None or args.profile:
        exe = g.instantiate()
        exe.launch(stream)
        stream.synchronize()
        if check is not None and not check():
            return _fail("the showcase graph computed a wrong sum", 1)
        profile = exe.profile(stream, repeats=args.repeats) if args.profile else None
    else:
        profile = None
    if profile is not None:
        print(profile)
    g.to_html(args.out, profile=profile, title=title)
    print(f"wrote {args.out}")
    del keep
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
