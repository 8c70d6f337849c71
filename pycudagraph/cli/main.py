"""``python -m pycudagraph {info, demo, show, bench}`` (also the ``pycudagraph`` script).

``info``   versions, devices and the graph features this driver supports; ``info PATH``:
           what a graph file or a saved graphed callable holds (:mod:`pycudagraph.cli.path_info`,
           no GPU needed)
``demo``   the guided demo (:mod:`pycudagraph.cli.demo`); options after ``demo`` go to it
``show``   the interactive page of a graph (:mod:`pycudagraph.cli.show`); options after
           ``show`` go to it (``show --model`` works without a GPU)
``bench``  the benchmark suite in the source repository's ``benchmarks/`` folder;
           options after ``bench`` go to it, as with ``python -m benchmarks``
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from .._cuda.no_gpu import WITHOUT_GPU
from ..errors import CudaNotAvailableError, GraphFileError

__all__ = ["main"]

#: The repository root when running from a source checkout (or an editable install).
_REPO_ROOT = Path(__file__).resolve().parents[2]


def _no_gpu(command: str, exc: CudaNotAvailableError) -> int:
    print(f"pycudagraph: no NVIDIA driver or GPU is usable on this machine ({exc.name}); "
          f"`{command}` needs one.", file=sys.stderr)
    return 1


def _info(rest: list[str]) -> int:
    """Versions, NVRTC and the hot path always; without a usable GPU then one sentence on
    stderr saying what is missing, and exit status 1. With a path (``rest``): what that
    graph file or saved graphed callable holds (:mod:`.path_info`, no CUDA call); a file a
    load refuses is said on stderr, exit status 1."""
    if rest:
        from . import path_info
        try:
            print(path_info.describe_path(rest[0]), flush=True)
        except GraphFileError as exc:
            print(f"pycudagraph info: {exc}", file=sys.stderr)
            return 1
        return 0
    from . import info
    try:
        data = info.collect()
        text = info.report(data)
    except CudaNotAvailableError as exc:
        return _no_gpu("info", exc)
    print(text, flush=True)
    if not data["devices"]:
        print(f"pycudagraph: no usable GPU: {data['device_error'] or 'no device'}; "
              f"{WITHOUT_GPU}.", file=sys.stderr)
        return 1
    return 0


def _demo(rest: list[str]) -> int:
    try:
        demo = importlib.import_module("pycudagraph.cli.demo")
    except ModuleNotFoundError as exc:
        if exc.name != "pycudagraph.cli.demo":
            raise
        print("pycudagraph: this version has no demo module (pycudagraph/cli/demo.py); "
              "see the examples/ folder of the source repository instead.", file=sys.stderr)
        return 2
    try:
        return int(demo.main(rest) or 0)
    except CudaNotAvailableError as exc:
        return _no_gpu("demo", exc)


def _show(rest: list[str]) -> int:
    from . import show
    try:
        return int(show.main(rest) or 0)
    except SystemExit as exc:  # argparse's --help and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    except CudaNotAvailableError as exc:
        return _no_gpu("show", exc)


def _benchmarks_main():
    """``benchmarks.__main__.main`` from the repository root, or None when it is not there."""
    if not (_REPO_ROOT / "benchmarks" / "__main__.py").is_file():
        return None
    root = str(_REPO_ROOT)
    if root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module("benchmarks.__main__")
    if Path(module.__file__).resolve().parent != _REPO_ROOT / "benchmarks":
        return None  # another package called "benchmarks" came first on sys.path
    return getattr(module, "main", None)


def _bench(rest: list[str]) -> int:
    bench_main = _benchmarks_main()
    if bench_main is None:
        print("pycudagraph: the benchmark suite lives in the source repository's "
              "benchmarks/ folder (benchmarks/__main__.py with a main(argv)), which is not "
              f"next to this installation ({_REPO_ROOT}); run it from a checkout of the "
              "repository.", file=sys.stderr)
        return 2
    module = sys.modules.get(getattr(bench_main, "__module__", ""))
    build = getattr(module, "build_parser", None)
    if callable(build):  # its usage and --help name this command, not `python -m benchmarks`
        def build_here():
            parser = build()
            parser.prog = "python -m pycudagraph bench"
            return parser
        module.build_parser = build_here
    try:
        return int(bench_main(rest) or 0)
    except SystemExit as exc:  # argparse's --help and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    except CudaNotAvailableError as exc:
        return _no_gpu("bench", exc)
    finally:
        if callable(build):
            module.build_parser = build


_COMMANDS = {"info": _info, "demo": _demo, "show": _show, "bench": _bench}
#: Commands whose remaining arguments are handed over untouched.
_PASS_THROUGH = ("demo", "show", "bench")


def _parser() -> argparse.ArgumentParser:
    from .. import __version__
    parser = argparse.ArgumentParser(
        prog="python -m pycudagraph",
        description="pycudagraph: a Python binding to the CUDA Graph runtime API.")
    parser.add_argument("--version", action="version", version=f"pycudagraph {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{info,demo,show,bench}")
    info = sub.add_parser("info", help="versions, devices and the graph features this driver "
                                       "supports; with PATH, what a graph file or a saved "
                                       "graphed callable holds (no GPU needed)")
    info.description = ("Versions, devices and the graph features this driver supports; with "
                        "PATH, what a graph file or a saved graphed callable holds, read and "
                        "checked as a load checks them, with no CUDA call.")
    info.add_argument("args", nargs="?", default=[], type=lambda path: [path], metavar="path",
                      help="a graph file (Graph.save) or the folder of a saved graphed "
                           "callable (f.save)")  # (as a list: what every command is handed)
    for name, text in (("demo", "run the guided demo; options after 'demo' go to it"),
                       ("show", "write the interactive page of a graph; options after 'show' "
                                "go to it"),
                       ("bench", "run the benchmark suite (source checkout only); "
                                 "options after 'bench' go to it")):
        p = sub.add_parser(name, help=text, add_help=False)
        p.add_argument("args", nargs=argparse.REMAINDER, help=f"passed to the {name} as is")
    return parser


def main(argv=None) -> int:
    """Run one command; returns the exit status (argparse's own exits included)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _PASS_THROUGH:
        return _COMMANDS[argv[0]](argv[1:])
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help()
        return 2
    return _COMMANDS[args.command](getattr(args, "args", []))
