"""The suite from the command line: one run (:func:`one_run`), or ``--runs N`` runs, each in
its own process one after the other, and the summary over them (:func:`many_runs`)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from .common import REPO, Settings
from .contest import tally
from .figures import CONTESTS, FIGURES
from .report import (environment_lines, h2h_lines, note_lines, run_markdown, summary_lines,
                     summary_markdown, table_lines, write_json)
from .runner import close_peers, make_peers, results_json, run_figures, say


def versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for label, dists in (("cuda-bindings", ("cuda-bindings",)), ("cuda-core", ("cuda-core",)),
                         ("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy")), ("torch", ("torch",)),
                         ("numpy", ("numpy",))):
        out[label] = "not installed"
        for dist in dists:
            try:
                out[label] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                "pycudagraph"], cwd=REPO, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        out["pycudagraph"] = rev + (" + uncommitted changes to pycudagraph/" if dirty else "")
    except Exception:  # noqa: BLE001
        out["pycudagraph"] = "?"
    return out


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def collect_meta(env, settings: Settings, peers: dict) -> dict:
    try:
        from pycudagraph._cuda import fast
        hot = fast.native_status()
    except Exception as exc:  # noqa: BLE001
        hot = f"not importable ({type(exc).__name__})"
    driver = peers.get("driver")
    return {"gpu": env.gpu_name, "arch": env.arch, "driver": env.driver_string(),
            "cuda_driver": _cuda_version(env.driver_cuda),
            "cuda_runtime": _cuda_version(env.runtime_cuda), "versions": versions(),
            "quick": settings.quick, "rounds": settings.rounds, "hot_path": hot,
            "bare": getattr(driver, "how", "not set up"),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "timer": "time.perf_counter_ns (CPU), CUDA events (GPU); medians over rounds"}


def one_run(groups: set, keys: list, settings: Settings, out: Path, name: str = "bench",
            verbose: bool = False) -> int:
    """One run: writes ``out/<name>.json`` (and ``out/bench.md``, the tables in Markdown,
    when it is the only run); prints progress and tables."""
    t_start = time.monotonic()
    from .cudaenv import RawEnv
    try:
        env = RawEnv()
    except Exception as exc:  # noqa: BLE001
        print(f"No benchmark was run: CUDA could not be set up on this machine "
              f"({type(exc).__name__}: {exc}).", file=sys.stderr)
        return 1
    peers, failed = make_peers(env, settings, keys, say, verbose)
    meta = collect_meta(env, settings, peers)
    for line in environment_lines(meta):
        say(line)
    try:
        results = run_figures(FIGURES, peers, settings, groups, say, verbose)
        if "floor" in peers:
            meta["floor_info"] = peers["floor"].info()
    finally:
        close_peers(peers)
    meta["spins_ended_early"] = env.expired
    meta["duration_s"] = round(time.monotonic() - t_start, 1)
    figs = results_json(results, failed)
    write_json(out / f"{name}.json", {"meta": meta, "figures": figs})
    if name == "bench":  # a run of several writes one tables.md for all (few files back)
        (out / "bench.md").write_text("\n".join(run_markdown(figs, f"{name}: {meta['gpu']}")))
    lines = [""] + environment_lines(meta) + [""] + table_lines(figs) + [""] + h2h_lines(figs)
    lines += note_lines(figs)
    lines += [f"spin kernels that ended before their round did: {env.expired}",
              f"finished in {meta['duration_s']} s; wrote {out / (name + '.json')}"]
    print("\n".join(lines), flush=True)
    return 0


def summarize(out: Path, names: list[str]) -> list[str]:
    """The summary over the runs saved as ``out/<name>.json``; writes ``summary.json`` and
    ``tables.md`` (every run's tables, then the summary) and returns the text lines."""
    runs = []
    for name in names:
        path = out / f"{name}.json"
        if path.exists():
            runs.append(json.loads(path.read_text()))
    tallies = tally(runs, CONTESTS)
    write_json(out / "summary.json", {"runs": len(runs), "figures": tallies})
    md = []
    for name, run in zip(names, runs):
        md += run_markdown(run["figures"], f"{name}: {run['meta'].get('gpu', '?')}, "
                                           f"{run['meta'].get('started', '')}")
    md += summary_markdown(tallies, len(runs))
    (out / "tables.md").write_text("\n".join(md))
    return summary_lines(tallies, len(runs))


def many_runs(argv: list[str], runs: int, out: Path, time_limit: float) -> int:
    """``runs`` runs of the suite, each a child process (``--run-child i``) started only while
    the time left is more than 1.2 times the longest run so far."""
    t0, longest, names = time.monotonic(), 0.0, []
    for i in range(1, runs + 1):
        left = time_limit - (time.monotonic() - t0)
        if left < 1.2 * longest or left < 20:
            say(f"[runs] run {i} not started: {left:.0f} s left, the longest run took {longest:.0f} s")
            break
        say(f"[runs] run {i}/{runs} ({left:.0f} s left)")
        started = time.monotonic()
        cmd = [sys.executable, "-m", "benchmarks", *argv, "--run-child", str(i), "--out", str(out)]
        try:
            done = subprocess.run(cmd, cwd=REPO, timeout=max(left - 5, 10))
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = "timed out"
        longest = max(longest, time.monotonic() - started)
        say(f"[runs] run {i} ended ({rc}) after {time.monotonic() - started:.0f} s")
        names.append(f"run{i}")
    lines = summarize(out, names)
    say("\n" + "\n".join(lines))
    say(f"\nwrote {out / 'summary.json'} and {out / 'tables.md'} "
        f"({time.monotonic() - t0:.0f} s in all)")
    return 0
