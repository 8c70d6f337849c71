"""Output: the text report (environment, targets, notes, then the table LAST), the JSON
file and, when matplotlib is importable, a PNG bar chart of ratios to the C++ floor."""

from __future__ import annotations

import json
from pathlib import Path

from .common import Cell, fmt
from .figures import BY_KEY, FIGURES, PEERS, TORCH_NOTE

LABEL_W, COL_W = 44, 13


def environment_lines(meta: dict) -> list[str]:
    v = meta.get("versions", {})
    drv = meta.get("driver", "") or "?"
    lines = [f"GPU: {meta.get('gpu', '?')} ({meta.get('arch', '?')}); driver {drv}, "
             f"CUDA driver API {meta.get('cuda_driver', '?')}, runtime {meta.get('cuda_runtime', '?')}",
             "versions: " + ", ".join(f"{k} {val}" for k, val in v.items())]
    if meta.get("quick"):
        lines.append("mode: --quick (fewer repeats; numbers are rougher)")
    return lines


def target_lines(targets: list[dict]) -> list[str]:
    out = ["targets:"]
    for t in targets:
        out.append(f"  {t['status']:<14} {t['target']}")
        out.append(f"  {'':<14}   {t['detail']}")
    return out


def note_lines(results: dict) -> list[str]:
    """Errors (full text) and n/a reasons worth knowing, one line each."""
    out = []
    for fig in FIGURES:
        for peer, *_ in PEERS:
            c: Cell | None = results.get(fig.key, {}).get(peer)
            if c is not None and c.status == "error":
                out.append(f"  error  {peer:<9} {fig.key}: {c.note}")
    return (["errors:"] + out) if out else []


_HEAD = {"floor": ("C++", "floor"), "raw": ("raw", "cuda.bindings"), "cudacore": ("", "cuda.core"),
         "cupy": ("", "CuPy"), "torch": ("", "PyTorch*"), "pcg": ("", "pycudagraph")}


def table_lines(results: dict) -> list[str]:
    """Rows = figures, columns = peers; the legend line first, then the table."""
    w = COL_W + 2
    head1 = f"{'':<{LABEL_W}}" + "".join(f"{_HEAD[k][0]:>{w}}" for k, *_ in PEERS)
    head2 = f"{'figure (microseconds; [x] = ratio)':<{LABEL_W}}" + "".join(
        f"{_HEAD[k][1]:>{w}}" for k, *_ in PEERS)
    rule = "-" * len(head2)
    out = [TORCH_NOTE, rule, head1, head2, rule]
    for fig in FIGURES:
        row = results.get(fig.key)
        if not row:
            continue
        label = fig.label + (" [x]" if fig.unit == "x" else "")
        cells = "".join(f"{(row[k].short() if k in row else '-'):>{w}}" for k, *_ in PEERS)
        out.append(f"{label[:LABEL_W - 1]:<{LABEL_W}}" + cells)
    out.append(rule)
    return out


def to_json(meta: dict, floor_raw, results: dict, targets: list[dict]) -> dict:
    return {
        "meta": meta,
        "floor_raw": floor_raw,
        "figures": [
            {"key": f.key, "label": f.label.strip(), "unit": f.unit, "group": f.group,
             "cells": {peer: c.to_json() for peer, c in results.get(f.key, {}).items()}}
            for f in FIGURES if f.key in results
        ],
        "targets": targets,
    }


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def write_png(path: Path, results: dict, meta: dict) -> str | None:
    """Grouped bars of value / C++ floor (log scale). Returns None or why it was skipped."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:  # noqa: BLE001
        return f"matplotlib is not importable ({exc})"
    figs, peers = [], [(k, lbl) for k, lbl, *_ in PEERS if k != "floor"]
    for f in FIGURES:
        row = results.get(f.key, {})
        floor = row.get("floor")
        if f.floor_key is None or floor is None or floor.status != "ok" or not floor.value:
            continue
        ratios = {}
        for k, _ in peers:
            c = row.get(k)
            if c is not None and c.status == "ok" and c.value:
                ratios[k] = c.value / floor.value
        if ratios:
            figs.append((f, ratios))
    if not figs:
        return "no figure has both a C++ floor and a peer value"
    width = 0.8 / len(peers)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.3 * len(figs) + 3), 5.5))
    for j, (k, label) in enumerate(peers):
        xs = [i + (j - (len(peers) - 1) / 2) * width for i in range(len(figs))]
        ys = [r.get(k, 0) for _, r in figs]
        bars = ax.bar(xs, [y if y > 0 else float("nan") for y in ys], width, label=label)
        for b, y in zip(bars, ys):
            if y > 0:
                ax.annotate(fmt(y), (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                            fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    top = max(max(r.values()) for _, r in figs)
    ax.set_ylim(top=max(top, 1.0) * 4)
    ax.set_xticks(range(len(figs)))
    ax.set_xticklabels([BY_KEY[f.key].label.strip() for f, _ in figs], rotation=30, ha="right",
                       fontsize=7)
    ax.set_ylabel("time / C++ floor (lower is better)")
    ax.set_title(f"pycudagraph peers vs the C++ floor on {meta.get('gpu', '?')}", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return None
