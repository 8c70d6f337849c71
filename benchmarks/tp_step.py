"""The tensor-parallel step and its NCCL collectives on 2, 4 and 8 GPUs, eager vs graph.

The scaling table of ``docs/SCALING.md`` comes from here.

For every GPU count of ``--gpus`` (default 2,4,8) that this machine has, it runs, the way
users run them:

* ``examples/multi_gpu_tp_mlp.py`` one process per GPU (``python -m
  torch.distributed.run --nproc_per_node=N``, or ``--procs N`` where PyTorch is missing)
  and one process driving the N GPUs (``--gpus N``): p50 / p99 per step, eager and
  graph replay (host clock from the first launch to the synchronized result: two
  ``linear_bias_relu`` launches and one ``ncclAllReduce`` per rank, or one
  ``cudaGraphLaunch``), and the CPU launch cost per GPU (host time issuing the step,
  divided by the GPUs the process drives). The example checks the step against a
  single-GPU run before it times it;
* ``examples/multi_gpu_collectives.py`` one process per GPU: all-reduce, all-gather and
  reduce-scatter, NCCL called eagerly and timed as nccl-tests times it ("NCCL's own
  figure") against the same collectives captured into a graph and replayed, as bus
  bandwidth (nccl-tests' formula: algbw * 2(n-1)/n for all-reduce, * (n-1)/n for
  all-gather and reduce-scatter);
* nccl-tests' binaries (``all_reduce_perf`` ...) when ``--nccl-tests DIR`` or ``PATH``
  has them: their out-of-place bus bandwidth at the same sizes, in a last column.

``python -m benchmarks.tp_step [--quick] [--json PATH]`` prints the progress, then the two
tables (markdown; counts this machine lacks say "not measured"). The suite's group ``tp``
(``python -m benchmarks --only tp``) fills the rows ``tp_*`` from the 2-GPU,
process-per-GPU run (:func:`cells`). NVLink multicast stays off: ``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and ``NVSHMEM_DISABLE_NVLS=1`` in every child's
environment (and the examples set them again in every process they start).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import REPO, NotSupported, ok

EXAMPLE = REPO / "examples" / "multi_gpu_tp_mlp.py"
COLLECTIVES_EXAMPLE = REPO / "examples" / "multi_gpu_collectives.py"
FIGURES = ("tp_eager_p50", "tp_eager_p99", "tp_graph_p50", "tp_graph_p99")
COUNTS = (2, 4, 8)
LAYOUTS = {"procs": "1 process per GPU", "one": "1 process, all GPUs"}
NCCL_TESTS = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf",
              "reduce_scatter": "reduce_scatter_perf"}
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
_SIZE = re.compile(r"^\d+[KMG]?$")


def child_env() -> dict:
    """This environment with NVLink multicast forced off and the checkout importable."""
    env = dict(os.environ)
    env.update(MULTICAST_OFF)
    env["PYTHONUNBUFFERED"] = "1"
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + old if old else "")
    return env


def _gpu_count() -> int:
    import pycudagraph as pcg
    return pcg.device_count()


# Command line ----------------------------------------------------------------------

def parse_counts(text: str) -> tuple[int, ...]:
    """``"2,4,8"`` -> (2, 4, 8): each a whole number >= 2, sorted, no repeats."""
    out = set()
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 2:
            raise argparse.ArgumentTypeError(f"GPU counts are whole numbers >= 2, got {part!r}")
        out.add(int(part))
    if not out:
        raise argparse.ArgumentTypeError("give at least one GPU count")
    return tuple(sorted(out))


def parse_sizes(text: str) -> tuple[str, ...]:
    """``"64K,1M"`` -> ("64K", "1M"): sizes as both examples and nccl-tests read them."""
    sizes = tuple(s.strip().upper() for s in text.split(",") if s.strip())
    bad = [s for s in sizes if not _SIZE.match(s) or int(s.rstrip("KMG")) == 0]
    if bad or not sizes:
        raise argparse.ArgumentTypeError(f"sizes are bytes with an optional K, M or G "
                                         f"(e.g. 64K,1M,128M), got {text!r}")
    return sizes


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tp_step",
                                description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=parse_counts, default=COUNTS, metavar="2,4,8",
                   help="GPU counts to run, those this machine has (default 2,4,8)")
    p.add_argument("--layouts", default="procs,one",
                   help="procs (one process per GPU) and/or one (one process, all GPUs)")
    p.add_argument("--steps", type=int, default=2000, help="timed TP steps per variant (default 2000)")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("64K,1M,16M,128M"),
                   help="collective sizes (default 64K,1M,16M,128M)")
    p.add_argument("--iters", type=int, default=20, help="collectives per timing (default 20)")
    p.add_argument("--quick", action="store_true", help="300 steps, sizes 1M,64M, 10 iters")
    p.add_argument("--launcher", choices=("auto", "torchrun", "spawn"), default="auto",
                   help="one process per GPU: torchrun, multiprocessing (spawn), or torchrun "
                        "where PyTorch is installed (auto)")
    p.add_argument("--nccl-tests", metavar="DIR", help="folder of nccl-tests' binaries (else PATH)")
    p.add_argument("--json", metavar="PATH", help="write every figure here")
    args = p.parse_args(argv)
    layouts = tuple(x.strip() for x in args.layouts.split(",") if x.strip())
    if not layouts or any(x not in LAYOUTS for x in layouts):
        p.error(f"--layouts takes {','.join(LAYOUTS)}, got {args.layouts!r}")
    args.layouts = layouts
    if args.steps < 1 or args.iters < 1:
        p.error(f"--steps and --iters must be >= 1, got {args.steps} and {args.iters}")
    if args.quick:
        args.steps, args.sizes, args.iters = min(args.steps, 300), ("1M", "64M"), 10
    return args


# Running the examples --------------------------------------------------------------

def per_process_cmd(n: int, launcher: str) -> list[str]:
    """The command prefix that starts ``n`` processes of one script, one GPU each."""
    if launcher == "auto":
        launcher = "torchrun" if importlib.util.find_spec("torch") is not None else "spawn"
    if launcher == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={n}"]
    return [sys.executable]


def _layout_args(n: int, layout: str, launcher: str) -> tuple[list[str], list[str]]:
    if layout == "one":
        return [sys.executable], ["--gpus", str(n)]
    prefix = per_process_cmd(n, launcher)
    return prefix, ([] if len(prefix) > 1 else ["--procs", str(n)])


def run_script(script: Path, n: int, layout: str, launcher: str, extra: list[str],
               timeout: float) -> dict:
    """Run one example; its rank-0 JSON as a dict (``stdout`` added). NotSupported with
    the reason when it printed SKIPPED; RuntimeError with its last lines when it failed."""
    prefix, layout_args = _layout_args(n, layout, launcher)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fig.json"
        cmd = prefix + [str(script)] + layout_args + extra + ["--json", str(out)]
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            if not out.exists():
                raise RuntimeError(f"{script.name} ran past {timeout:.0f} s without figures") from None
            fig = json.loads(out.read_text())  # measured, then stuck in teardown: say so
            text = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
            fig["stdout"] = text or ""
            fig["note"] = f"the run did not exit within {timeout:.0f} s after writing its figures"
            return fig
        skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
        if proc.returncode == 0 and skipped:
            raise NotSupported(skipped[0].removeprefix("SKIPPED: "))
        if proc.returncode != 0 or not out.exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"{script.name} exited {proc.returncode}: {tail}")
        fig = json.loads(out.read_text())
        fig["stdout"] = proc.stdout
        return fig


def run_tp(n: int, layout: str, steps: int, launcher: str = "auto", timeout: float | None = None) -> dict:
    """The TP step on ``n`` GPUs in ``layout``; the example's figures."""
    timeout = timeout or 120 + 20 * n
    fig = run_script(EXAMPLE, n, layout, launcher, ["--steps", str(steps)], timeout)
    fig["layout"] = layout
    return fig


def run_collectives(n: int, sizes, iters: int, launcher: str = "auto",
                    timeout: float | None = None) -> dict:
    """The three collectives on ``n`` GPUs, one process each; the example's figures."""
    timeout = timeout or 180 + 30 * n
    return run_script(COLLECTIVES_EXAMPLE, n, "procs", launcher,
                      ["--sizes", ",".join(sizes), "--iters", str(iters)], timeout)


def find_nccl_tests(where: str | None) -> Path | None:
    """The folder holding nccl-tests' ``all_reduce_perf``: ``where``, else ``PATH``."""
    if where:
        p = Path(where)
        return p if (p / NCCL_TESTS["all_reduce"]).exists() else None
    found = shutil.which(NCCL_TESTS["all_reduce"])
    return Path(found).parent if found else None


def parse_nccl_tests(text: str) -> dict[int, float]:
    """nccl-tests' output -> {size in bytes: out-of-place busbw in GB/s}. A data row is
    ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``."""
    out = {}
    for line in text.splitlines():
        t = line.split()
        if len(t) >= 12 and not line.lstrip().startswith("#") and t[0].isdigit():
            try:
                out[int(t[0])] = float(t[7])
            except ValueError:
                continue
    return out


def run_nccl_tests(bindir: Path, collective: str, n: int, sizes, iters: int,
                   timeout: float = 300) -> dict[int, float]:
    """One nccl-tests binary, one process driving ``n`` GPUs (``-g n``), each size."""
    found = {}
    for s in sizes:
        cmd = [str(bindir / NCCL_TESTS[collective]), "-b", s, "-e", s, "-g", str(n),
               "-n", str(iters), "-w", "5", "-c", "0"]
        proc = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-400:]}")
        found.update(parse_nccl_tests(proc.stdout))
    return found


# The tables ------------------------------------------------------------------------

def not_measured(have: int) -> str:
    return f"not measured: this machine has {have} GPU{'s' if have != 1 else ''}"


def _num(v, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def step_table(rows: list[dict], counts, have: int, layouts=tuple(LAYOUTS)) -> str:
    """Markdown: one row per GPU count and layout; a row dict is the TP example's JSON
    (or ``{"world", "layout", "error"}``); counts above ``have`` read "not measured"."""
    head = ("| GPUs | layout | eager p50 | eager p99 | graph p50 | graph p99 | graph/eager p50 "
            "| CPU launch/GPU eager | CPU launch/GPU graph |")
    lines = [head, "|" + "---|" * 9]
    by = {(r["world"], r["layout"]): r for r in rows}
    for n in counts:
        for layout in layouts:
            r = by.get((n, layout))
            name = LAYOUTS[layout]
            if r is None or "error" in r:
                why = not_measured(have) if n > have else (r or {}).get("error", "not run")
                lines.append(f"| {n} | {name} | {why} |" + " – |" * 6)
                continue
            ratio = r["graph_p50_us"] / r["eager_p50_us"]
            lines.append(f"| {n} | {name} | {_num(r['eager_p50_us'])} | {_num(r['eager_p99_us'])} | "
                         f"{_num(r['graph_p50_us'])} | {_num(r['graph_p99_us'])} | {ratio:.2f}x | "
                         f"{_num(r.get('eager_launch_us_per_gpu'))} | "
                         f"{_num(r.get('graph_launch_us_per_gpu'))} |")
    lines.append("(microseconds per step, host clock from the first launch to the synchronized "
                 "result; CPU launch: host time issuing the step / GPUs the process drives)")
    return "\n".join(lines)


def human_bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def collective_table(rows: list[dict], counts, have: int, nccl_tests=None) -> str:
    """Markdown: one row per GPU count, collective and size; a row dict is one entry of
    the collectives example's ``results`` plus ``world`` (or ``{"world", "error"}``)."""
    nccl_tests = nccl_tests or {}
    lines = ["| GPUs | collective | size | eager us | graph us | eager busbw | graph busbw "
             "| graph/eager busbw | nccl-tests busbw |", "|" + "---|" * 9]
    for n in counts:
        mine = [r for r in rows if r["world"] == n]
        if not mine or "error" in mine[0]:
            why = not_measured(have) if n > have else (mine[0]["error"] if mine else "not run")
            lines.append(f"| {n} | all | {why} |" + " – |" * 6)
            continue
        for r in mine:
            ref = nccl_tests.get((n, r["collective"]), {}).get(r["bytes"])
            lines.append(f"| {n} | {r['collective']} | {human_bytes(r['bytes'])} | "
                         f"{_num(r['eager_us'])} | {_num(r['graph_us'])} | "
                         f"{_num(r['eager_busbw'], 2)} | {_num(r['graph_busbw'], 2)} | "
                         f"{r['graph_busbw'] / r['eager_busbw']:.2f}x | {_num(ref, 2)} |")
    lines.append("(bus bandwidth in GB/s, nccl-tests' formula; eager: NCCL called back to back "
                 "between events, as nccl-tests times it; graph: the same calls captured and "
                 "replayed; nccl-tests: its out-of-place figure, – where not installed)")
    return "\n".join(lines)


# The suite's cells and the command -------------------------------------------------

def cells(steps: int) -> dict:
    """The suite's cells for the ``tp`` group (pycudagraph column): 2 GPUs, one process each."""
    n = _gpu_count()
    if n < 2:
        raise NotSupported(f"needs 2 GPUs, this machine has {n}")
    fig = run_tp(2, "procs", steps)
    note = f"{fig['mode']}, {fig['nccl']}, {fig['steps']} steps"
    return {"tp_eager_p50": ok(fig["eager_p50_us"], note), "tp_eager_p99": ok(fig["eager_p99_us"]),
            "tp_graph_p50": ok(fig["graph_p50_us"], "equal to the single-GPU run"),
            "tp_graph_p99": ok(fig["graph_p99_us"])}


def _attempt(what: str, fn, base: dict) -> dict:
    print(f"== {what}", flush=True)
    try:
        fig = fn()
    except (NotSupported, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"   {type(exc).__name__}: {exc}")
        return dict(base, error=f"{'n/a' if isinstance(exc, NotSupported) else 'failed'}: "
                                f"{str(exc).splitlines()[0][:160]}")
    print("   " + fig.pop("stdout", "").rstrip().replace("\n", "\n   "))
    return fig


def main(argv=None) -> int:
    args = parse_args(argv)
    have = _gpu_count()
    if have == 0:
        print("n/a: no usable NVIDIA GPU here")
        return 0
    run_counts = [n for n in args.gpus if n <= have]
    print(f"{have} GPUs here; measuring {run_counts or 'nothing'} of {list(args.gpus)}; "
          f"{' '.join(f'{k}={v}' for k, v in MULTICAST_OFF.items())}")
    bindir = find_nccl_tests(args.nccl_tests)
    tp_rows, coll_rows, nccl_tests = [], [], {}
    for n in run_counts:
        for layout in args.layouts:
            tp_rows.append(_attempt(f"TP step, {n} GPUs, {LAYOUTS[layout]}",
                                    lambda: run_tp(n, layout, args.steps, args.launcher),
                                    {"world": n, "layout": layout}))
        fig = _attempt(f"collectives, {n} GPUs, one process each",
                       lambda: run_collectives(n, args.sizes, args.iters, args.launcher),
                       {"world": n})
        coll_rows += [dict(r, world=n) for r in fig["results"]] if "results" in fig else [fig]
        for coll in NCCL_TESTS if bindir else ():
            try:
                nccl_tests[(n, coll)] = run_nccl_tests(bindir, coll, n, args.sizes, args.iters)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"   nccl-tests {coll}: {exc}")
    print()
    print(f"### TP MLP step (batch 32, 512 -> 2048 -> 512), {args.steps} steps per variant")
    print(step_table(tp_rows, args.gpus, have, args.layouts))
    print()
    print(f"### Captured collectives vs NCCL called eagerly, one process per GPU, {args.iters} "
          f"per timing{'' if bindir else ' (nccl-tests not found)'}")
    print(collective_table(coll_rows, args.gpus, have, nccl_tests))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"gpus_here": have, "counts": list(args.gpus), "tp": tp_rows, "collectives": coll_rows,
             "nccl_tests": {f"{n}/{c}": v for (n, c), v in nccl_tests.items()},
             "env": MULTICAST_OFF}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
