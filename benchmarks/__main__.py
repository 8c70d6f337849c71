"""``python -m benchmarks``: parse the options, check for a GPU, run the suite."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .figures import BY_KEY, GROUPS, PEER_KEYS, parse_only


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Compare pycudagraph with a C++ floor, raw cuda.bindings, cuda.core, CuPy "
                    "and PyTorch on CUDA Graph operations. Prints progress, then targets, then "
                    "the table last; writes bench.json (and bench.png) to --out.",
        epilog=f"figure groups: {', '.join(GROUPS)}; figure keys: {', '.join(BY_KEY)}")
    p.add_argument("--quick", action="store_true",
                   help="fewer repeats: a smoke run of about a minute")
    p.add_argument("--only", metavar="NAME[,NAME]",
                   help="run only these figure groups (or the groups of these figure keys)")
    p.add_argument("--peers", metavar="NAME[,NAME]",
                   help=f"run only these peers ({', '.join(k for k in PEER_KEYS if k != 'floor')}); "
                        "the C++ floor is the 'floor' group of --only")
    p.add_argument("--out", metavar="DIR", default="bench_out",
                   help="folder for bench.json and bench.png (default: bench_out)")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failed measurements")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        groups = parse_only(args.only)
    except ValueError as exc:
        parser.error(str(exc))
    peers = [k for k in PEER_KEYS if k != "floor"]
    if args.peers:
        chosen = [t.strip() for t in args.peers.split(",") if t.strip()]
        unknown = [t for t in chosen if t not in peers]
        if unknown:
            parser.error(f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(peers)}")
        peers = chosen

    from .common import Settings
    from .cudaenv import probe_gpu
    why = probe_gpu()
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    from .runner import run
    return run(groups, peers, Settings.make(args.quick), Path(args.out), verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
