"""Runs the suite: the C++ floor, then each peer's figures, each in its own try block."""

from __future__ import annotations

import gc
import importlib
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

from .common import REPO, Cell, NotSupported, Settings, error_cell, na
from .cudaenv import RawEnv
from .figures import (FIGURES, PEERS, RUN_ORDER, TASKS, evaluate_targets, fill_derived)
from .report import (environment_lines, note_lines, table_lines, target_lines, to_json, write_json,
                     write_png)


def say(text: str) -> None:
    print(text, flush=True)


def versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for label, dists in (("cuda-bindings", ("cuda-bindings",)), ("cuda-core", ("cuda-core",)),
                         ("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy")), ("torch", ("torch",)),
                         ("numpy", ("numpy",)), ("matplotlib", ("matplotlib",))):
        out[label] = "not installed"
        for dist in dists:
            try:
                out[label] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    try:
        import pycudagraph
        ver = pycudagraph.__version__
    except Exception as exc:  # noqa: BLE001
        ver = f"not importable ({type(exc).__name__})"
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                "pycudagraph"], cwd=REPO, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        if rev and dirty:  # a copied tree whose package differs from that commit
            rev += " + uncommitted changes to pycudagraph/"
    except Exception:  # noqa: BLE001
        rev = ""
    out["pycudagraph"] = f"{ver} ({rev})" if rev else ver
    return out


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def collect_meta(env: RawEnv, settings: Settings) -> dict:
    return {"gpu": env.gpu_name, "arch": env.arch, "driver": env.driver_string(),
            "cuda_driver": _cuda_version(env.driver_cuda),
            "cuda_runtime": _cuda_version(env.runtime_cuda),
            "versions": versions(), "quick": settings.quick,
            "spin_cycles_per_ms": round(env.cycles_per_ms),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "timer": "time.perf_counter_ns (CPU), CUDA events (GPU); medians over repeats"}


def _floor(env: RawEnv, groups: set, results: dict):
    from .floor import run_floor
    want = [f for f in FIGURES if f.floor_key and (f.group in groups or groups == {"floor"})]
    if "floor" not in groups:
        for f in want:
            results.setdefault(f.key, {})["floor"] = na("floor not selected")
        return None
    try:
        raw = run_floor(env.arch, say)
    except NotSupported as exc:
        cell, raw = na(str(exc)), None
    except Exception as exc:  # noqa: BLE001
        cell, raw = error_cell(exc), None
    for f in want:
        row = results.setdefault(f.key, {})
        if raw is None:
            row["floor"] = cell
        elif f.floor_key in raw:
            row["floor"] = Cell(float(raw[f.floor_key]), "ok",
                                f"spin expired in {raw.get('spin_expired', '?')} batches")
        else:
            row["floor"] = na(f"floor.cu does not print {f.floor_key}")
    if raw is not None:
        say("[floor] " + ", ".join(f"{k}={v}" for k, v in raw.items()))
    return raw


def _run_peer(key: str, env: RawEnv, settings: Settings, groups: set, results: dict,
              verbose: bool) -> None:
    tasks = [t for t in TASKS if t[0] in groups]
    if not tasks:
        return
    _, label, module, cls_name = next(p for p in PEERS if p[0] == key)
    say(f"[{key}] setting up {label} ...")

    def fill_all(cell: Cell) -> None:
        for *_, keys in tasks:
            for k in keys:
                results.setdefault(k, {})[key] = cell
        say(f"[{key}] {cell.describe()}")

    try:
        cls = getattr(importlib.import_module(f".{module}", __package__), cls_name)
        peer = cls(env, settings)
        peer.setup()
    except (NotSupported, ImportError) as exc:
        fill_all(na(str(exc)))
        return
    except Exception as exc:  # noqa: BLE001
        if verbose:
            traceback.print_exc()
        fill_all(error_cell(exc))
        return
    try:
        for group, method, kwargs, keys in tasks:
            fn = getattr(peer, method, None)
            t0 = time.monotonic()
            if fn is None:
                out = na(peer.unsupported.get(group, f"{label} has no API for this figure"))
            else:
                try:
                    out = fn(**kwargs)
                except NotSupported as exc:
                    out = na(str(exc))
                except Exception as exc:  # noqa: BLE001
                    if verbose:
                        traceback.print_exc()
                    out = error_cell(exc)
            cells = {keys[0]: out} if isinstance(out, Cell) else dict(out)
            for k in keys:
                cell = cells.get(k) or na(peer.unsupported.get(k, f"{label} has no API for this figure"))
                results.setdefault(k, {})[key] = cell
                if fn is not None or k == keys[0]:
                    say(f"[{key}] {k}: {cell.describe()}  [{time.monotonic() - t0:.1f} s]")
    finally:
        try:
            peer.close()
        except Exception as exc:  # noqa: BLE001
            say(f"[{key}] cleanup failed: {type(exc).__name__}: {exc}")
        del peer
        gc.collect()


def run(groups: set, peers: list, settings: Settings, out_dir: Path, verbose: bool = False) -> int:
    t_start = time.monotonic()
    try:
        env = RawEnv()
    except Exception as exc:  # noqa: BLE001
        print(f"No benchmark was run: CUDA could not be set up on this machine "
              f"({type(exc).__name__}: {exc}).", file=sys.stderr)
        return 1
    meta = collect_meta(env, settings)
    for line in environment_lines(meta):
        say(line)
    results: dict = {}
    floor_raw = _floor(env, groups, results)
    for key in RUN_ORDER:
        if key in peers:
            _run_peer(key, env, settings, groups, results, verbose)
    if "exec_set_arg" in groups:
        fill_derived(results)
    targets = evaluate_targets(results)
    meta["duration_s"] = round(time.monotonic() - t_start, 1)

    json_path, png_path = out_dir / "bench.json", out_dir / "bench.png"
    write_json(json_path, to_json(meta, floor_raw, results, targets))
    why_no_png = write_png(png_path, results, meta)
    lines = [""] + environment_lines(meta) + [""] + target_lines(targets)
    notes = note_lines(results)
    if notes:
        lines += [""] + notes
    lines += ["", f"finished in {meta['duration_s']} s; wrote {json_path}"
              + (f" and {png_path}" if why_no_png is None else f" (no PNG: {why_no_png})"), ""]
    lines += table_lines(results)
    print("\n".join(lines), flush=True)
    return 0
