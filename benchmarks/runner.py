"""One run of the suite: set up every contestant, run each figure head to head (its
contestants in alternating rounds, ``contest.py``), then the figures measured once per
contestant (the demo MLP, the tensor-parallel step), and write the run's JSON."""

from __future__ import annotations

import gc
import importlib
import time
import traceback

from .common import Cell, NotSupported, error_cell, fmt, na, ok
from .contest import judge, run_contest, spread
from .figures import FIGURES, PEERS, SETUP_ORDER


def say(text: str) -> None:
    print(text, flush=True)


def make_peers(env, settings, keys, progress=say, verbose: bool = False, made=None) -> tuple:
    """``(peers, failed)``: the contestants of ``keys`` set up (in :data:`SETUP_ORDER`), and
    a Cell saying why for each that could not be. ``made`` maps a key to a contestant object
    made elsewhere (tests: a stand-in), which is set up here like the others."""
    peers, failed = {}, {}
    for key in SETUP_ORDER:
        if key not in keys:
            continue
        _, label, module, cls_name = next(p for p in PEERS if p[0] == key)
        t0 = time.monotonic()
        try:
            if made and key in made:
                peer = made[key]
            else:
                cls = getattr(importlib.import_module(f".{module}", __package__), cls_name)
                peer = cls(env, settings, peers.get("pcg")) if key == "driver" else cls(env, settings)
            peer.setup()
        except (NotSupported, ImportError) as exc:
            failed[key] = na(str(exc))
        except Exception as exc:  # noqa: BLE001
            if verbose:
                traceback.print_exc()
            failed[key] = error_cell(exc)
        else:
            peers[key] = peer
            progress(f"[setup] {label}: ready [{time.monotonic() - t0:.1f} s]")
            continue
        progress(f"[setup] {label}: {failed[key].describe()}")
    return peers, failed


def entries_of(fig, peers: dict, verbose: bool = False) -> tuple[dict, dict]:
    """``(entries, cells)``: each contestant's rounds of ``fig``, and a Cell for each that has
    none (n/a, with the reason, or the error of its preparation)."""
    entries, cells = {}, {}
    for key, peer in peers.items():
        try:
            if key == "floor":
                if fig.floor is None:
                    raise NotSupported("floor.cu does not measure this figure")
                entries[key] = peer.entry(fig.floor)
                continue
            method = getattr(peer, f"r_{fig.kind}", None)
            if method is None:
                raise NotSupported(peer.unsupported.get(fig.kind, f"{peer.label} has no API for "
                                                                  "this figure"))
            entries[key] = method(fig.arg)
        except NotSupported as exc:
            cells[key] = na(str(exc))
        except Exception as exc:  # noqa: BLE001
            if verbose:
                traceback.print_exc()
            cells[key] = error_cell(exc)
    return entries, cells


def contest_figure(fig, peers: dict, rounds: int, verbose: bool = False) -> dict:
    """One figure head to head: ``{"cells", "rounds", "judged"}`` (JSON-ready)."""
    entries, cells = entries_of(fig, peers, verbose)
    values, errors = run_contest(entries, rounds) if entries else ({}, {})
    for key, entry in entries.items():
        if entry.close is not None:
            try:
                entry.close()
            except Exception:  # noqa: BLE001
                pass
        if key in errors:
            if verbose:
                traceback.print_exception(errors[key])
            cells[key] = error_cell(errors[key])
            values[key] = None
            continue
        s = spread(values[key])
        cells[key] = ok(s["median"], entry.note) if s else na("no round kept")
        if s:
            cells[key].spread = s
    return {"cells": cells, "rounds": values, "judged": judge(fig, values)}


def _progress_line(i: int, total: int, fig, result: dict, seconds: float) -> str:
    cells, ratios = result["cells"], result["judged"]["ratios"]
    parts = []
    for key, *_ in PEERS:
        c = cells.get(key)
        if c is None or c.status != "ok":
            continue
        text = f"{key} {fmt(c.value)}"
        if key in ratios and key != "pcg":
            text += f" ({ratios[key]['median']:.2f}x)"
        parts.append(text)
    ahead = result["judged"]["ahead"]
    tag = "" if ahead is None else ("  AHEAD" if ahead else "  behind")
    return f"[{i:>2}/{total}] {fig.key}: {' | '.join(parts)}{tag}  [{seconds:.1f} s]"


def solo_figures(peers: dict, groups: set, results: dict, progress=say, verbose=False) -> None:
    """The demo MLP (pycudagraph, PyTorch) and the tensor-parallel step (pycudagraph):
    measured once per contestant, not head to head."""
    jobs = [("mlp", key, "mlp") for key in ("pcg", "torch")] + [("tp", "pcg", "tp_step")]
    for group, key, method in jobs:
        if group not in groups or key not in peers:
            continue
        t0 = time.monotonic()
        try:
            out = getattr(peers[key], method)()
        except NotSupported as exc:
            out = {f.key: na(str(exc)) for f in FIGURES if f.group == group}
        except Exception as exc:  # noqa: BLE001
            if verbose:
                traceback.print_exc()
            out = {f.key: error_cell(exc) for f in FIGURES if f.group == group}
        for fkey, cell in out.items():
            results.setdefault(fkey, {"cells": {}, "rounds": {}, "judged": None})["cells"][key] = cell
        progress(f"[{group}] {key}: " + ", ".join(f"{k} {c.short()}" for k, c in out.items())
                 + f"  [{time.monotonic() - t0:.1f} s]")


def derived(results: dict) -> None:
    """update_vs_recapture: CuPy's capture + instantiate over each one-argument update."""
    cupy = results.get("recapture_instantiate_1000", {}).get("cells", {}).get("cupy")
    row = results.setdefault("update_vs_recapture", {"cells": {}, "rounds": {}, "judged": None})
    for key, cell in results.get("set_arg_3", {}).get("cells", {}).items():
        if cupy is None or cupy.status != "ok":
            row["cells"][key] = na("needs CuPy's capture figure")
        elif cell.status == "ok" and cell.value:
            row["cells"][key] = ok(cupy.value / cell.value, f"{fmt(cupy.value)} us / {fmt(cell.value)} us")


def run_figures(figures, peers: dict, settings, groups: set, progress=say,
                verbose: bool = False) -> dict:
    """Every selected figure: the contests in order, then the solo figures."""
    results: dict = {}
    contests = [f for f in figures if f.kind is not None and f.group in groups]
    for i, fig in enumerate(contests, 1):
        t0 = time.monotonic()
        gc.collect()
        results[fig.key] = contest_figure(fig, peers, settings.rounds * fig.round_factor,
                                          verbose)
        progress(_progress_line(i, len(contests), fig, results[fig.key], time.monotonic() - t0))
    solo_figures(peers, groups, results, progress, verbose)
    derived(results)
    return results


def close_peers(peers: dict, progress=say) -> None:
    for key in reversed(list(peers)):
        try:
            peers[key].close()
        except Exception as exc:  # noqa: BLE001
            progress(f"[{key}] cleanup failed: {type(exc).__name__}: {exc}")
    peers.clear()
    gc.collect()


def cell_json(cell: Cell) -> dict:
    out = cell.to_json()
    s = getattr(cell, "spread", None)
    if s:
        out["spread"] = s
    return out


def results_json(results: dict, failed: dict) -> dict:
    """The figures of one run, JSON-ready (a contestant that could not be set up reads n/a
    or error in every figure)."""
    out = {}
    for fig in FIGURES:
        r = results.get(fig.key)
        if r is None:
            continue
        cells = {**{k: cell_json(c) for k, c in failed.items()},
                 **{k: cell_json(c) for k, c in r["cells"].items()}}
        out[fig.key] = {"cells": cells, "rounds": r["rounds"], "judged": r["judged"]}
    return out
