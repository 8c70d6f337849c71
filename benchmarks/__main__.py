"""``python -m benchmarks``: parse the options, check for a GPU, run the suite."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .figures import BY_KEY, GROUPS, PEER_KEYS, parse_only


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="pycudagraph head to head with a C++ floor, raw cuda.bindings, cuda.core, "
                    "CuPy and PyTorch on CUDA Graph operations: each figure's contestants in "
                    "alternating rounds, pcg / contestant per round. Prints progress, then the "
                    "tables; writes JSON and Markdown tables to --out.",
        epilog=f"figure groups: {', '.join(GROUPS)}; figure keys: {', '.join(BY_KEY)}")
    p.add_argument("--quick", action="store_true", help="fewer, smaller rounds: a smoke run")
    p.add_argument("--rounds", type=int, help="rounds per figure (default 11; 5 with --quick)")
    p.add_argument("--runs", type=int, default=1,
                   help="run the whole suite this many times, each in its own process, then "
                        "say per figure in how many runs pcg was ahead of every rival")
    p.add_argument("--time-limit", type=float, default=570.0,
                   help="with --runs: start no run that would end after this many seconds "
                        "(judged by the longest run so far; default 570)")
    p.add_argument("--only", metavar="NAME[,NAME]",
                   help="run only these figure groups (or the groups of these figure keys)")
    p.add_argument("--peers", metavar="NAME[,NAME]",
                   help=f"run only these contestants ({', '.join(PEER_KEYS)}); pcg always runs")
    p.add_argument("--out", metavar="DIR", default="bench_out",
                   help="folder for the JSON and Markdown files (default: bench_out)")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failed measurements")
    p.add_argument("--run-child", type=int, help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        groups = parse_only(args.only)
    except ValueError as exc:
        parser.error(str(exc))
    keys = list(PEER_KEYS)
    if args.peers:
        chosen = [t.strip() for t in args.peers.split(",") if t.strip()]
        unknown = [t for t in chosen if t not in PEER_KEYS]
        if unknown:
            parser.error(f"unknown contestant(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(PEER_KEYS)}")
        keys = sorted(set(chosen) | {"pcg"}, key=PEER_KEYS.index)
    if args.runs < 1 or (args.rounds is not None and args.rounds < 1):
        parser.error("--runs and --rounds take a positive number")

    from .cudaenv import probe_gpu
    why = probe_gpu()
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    from .common import Settings
    from .suite import many_runs, one_run
    out = Path(args.out)
    settings = Settings.make(args.quick, args.rounds)
    if args.run_child is not None:
        return one_run(groups, keys, settings, out, f"run{args.run_child}", args.verbose)
    if args.runs > 1:
        child_argv = [a for a in _strip(argv, ("--runs", "--out", "--time-limit"))]
        return many_runs(child_argv, args.runs, out, args.time_limit)
    return one_run(groups, keys, settings, out, "bench", args.verbose)


def _strip(argv: list[str], names: tuple) -> list[str]:
    """``argv`` without the options ``names`` (``--name value`` or ``--name=value``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in names:
            skip = True
            continue
        if any(a.startswith(n + "=") for n in names):
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
