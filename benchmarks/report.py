"""Output: the environment, each run's tables (absolute figures; head-to-head ratios with
their spread, the floor target and the split against the bare driver call), the summary
over runs, as text and as Markdown. Everything here reads the runs' JSON (``figures`` as
``runner.results_json`` makes it), so a summary can be made again from saved files."""

from __future__ import annotations

import json
from pathlib import Path

from .common import fmt
from .figures import BY_KEY, FIGURES, PEERS, RIVALS, TORCH_NOTE

LABEL_W, COL_W = 40, 11
_HEAD = {"floor": "C++ floor", "driver": "driver", "raw": "raw", "cudacore": "cuda.core",
         "cupy": "CuPy", "torch": "PyTorch*", "pcg": "pcg"}


def environment_lines(meta: dict) -> list[str]:
    v = meta.get("versions", {})
    lines = [f"GPU: {meta.get('gpu', '?')} ({meta.get('arch', '?')}); driver "
             f"{meta.get('driver', '') or '?'}, CUDA driver API {meta.get('cuda_driver', '?')}, "
             f"runtime {meta.get('cuda_runtime', '?')}",
             "versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
             f"rounds per figure: {meta.get('rounds', '?')}; hot path: {meta.get('hot_path', '?')}; "
             f"driver column: {meta.get('bare', '?')}"]
    if meta.get("quick"):
        lines.append("mode: --quick (smaller rounds; numbers are rougher)")
    return lines


def _cell(figs: dict, key: str, peer: str) -> dict | None:
    return figs.get(key, {}).get("cells", {}).get(peer)


def _short(cell: dict | None) -> str:
    if cell is None:
        return ""
    return fmt(cell.get("value")) if cell.get("status") == "ok" else cell.get("status", "")


def table_lines(figs: dict) -> list[str]:
    """Absolute figures: rows = figures, columns = contestants (microseconds unless [x])."""
    head = f"{'figure (us; [x] = ratio), median of rounds':<{LABEL_W}}" + "".join(
        f"{_HEAD[k]:>{COL_W}}" for k, *_ in PEERS)
    rule = "-" * len(head)
    out = [TORCH_NOTE, rule, head, rule]
    for fig in FIGURES:
        if fig.key not in figs:
            continue
        label = fig.label + (" [x]" if fig.unit == "x" else "")
        out.append(f"{label[:LABEL_W - 1]:<{LABEL_W}}" + "".join(
            f"{_short(_cell(figs, fig.key, k)):>{COL_W}}" for k, *_ in PEERS))
    return out + [rule]


def _ratio(r: dict | None) -> str:
    if not r:
        return "-"
    return f"{r['median']:.2f} [{r['min']:.2f}-{r['max']:.2f}]"


def _split(s: dict | None) -> str:
    if not s:
        return "-"
    return f"{fmt(s['pcg'])} = {fmt(s['driver'])} + {fmt(s['rest'])}"


def h2h_lines(figs: dict) -> list[str]:
    """Head to head: pcg / contestant per figure, median [min-max] over rounds; whether pcg is
    ahead of every rival; pcg / floor against the target; pcg = driver call + the rest."""
    cols = [*RIVALS, "floor"]
    head = (f"{'pcg / contestant, median [min-max]':<{LABEL_W}}" +
            "".join(f"{_HEAD[k]:>18}" for k in cols) + f"{'ahead':>8}{'floor target':>16}"
            + "   pcg = driver + rest (us)")
    rule = "-" * len(head)
    out = [rule, head, rule]
    for fig in FIGURES:
        j = figs.get(fig.key, {}).get("judged")
        if not j or not j.get("ratios"):
            continue
        ahead = {None: "-", True: "yes", False: "NO"}[j.get("ahead")]
        target = "-"
        if fig.floor_target is not None and "floor" in j["ratios"]:
            target = (f"<={fig.floor_target:g}x " + ("ok" if j.get("floor_ok") else "MISS"))
        out.append(f"{fig.label[:LABEL_W - 1]:<{LABEL_W}}" +
                   "".join(f"{_ratio(j['ratios'].get(k)):>18}" for k in cols) +
                   f"{ahead:>8}{target:>16}   {_split(j.get('split'))}")
    return out + [rule]


def note_lines(figs: dict) -> list[str]:
    """Errors (full text), one line each."""
    out = []
    for fig in FIGURES:
        for peer, cell in figs.get(fig.key, {}).get("cells", {}).items():
            if cell.get("status") == "error":
                out.append(f"  error  {peer:<9} {fig.key}: {cell.get('note', '')}")
    return (["errors:"] + out) if out else []


def run_markdown(figs: dict, title: str) -> list[str]:
    """One run as two Markdown tables: absolute figures, then head to head."""
    cols = [k for k, *_ in PEERS]
    out = [f"### {title}", "", "| figure (us) | " + " | ".join(_HEAD[k] for k in cols) + " |",
           "| --- |" + " ---: |" * len(cols)]
    for fig in FIGURES:
        if fig.key in figs:
            out.append(f"| {fig.label} | " + " | ".join(
                _short(_cell(figs, fig.key, k)) or "-" for k in cols) + " |")
    out += ["", "| pcg / contestant: median [min-max] over rounds | " +
            " | ".join(_HEAD[k] for k in (*RIVALS, "floor")) + " | ahead | floor target | "
            "pcg = driver + rest (us) |", "| --- |" + " ---: |" * (len(RIVALS) + 3) + " --- |"]
    for fig in FIGURES:
        j = figs.get(fig.key, {}).get("judged")
        if not j or not j.get("ratios"):
            continue
        target = "-" if fig.floor_target is None or j.get("floor_ok") is None else (
            f"<= {fig.floor_target:g}x: " + ("ok" if j["floor_ok"] else "**miss**"))
        ahead = {None: "-", True: "yes", False: "**no**"}[j.get("ahead")]
        out.append(f"| {fig.label} | " + " | ".join(_ratio(j["ratios"].get(k))
                                                     for k in (*RIVALS, "floor")) +
                   f" | {ahead} | {target} | {_split(j.get('split'))} |")
    return out + [""]


def summary_rows(tallies: list[dict]) -> list[tuple]:
    rows = []
    for t in tallies:
        fig = BY_KEY[t["figure"]]
        ahead = f"{t['ahead']}/{t['ahead_judged']}" if t["ahead_judged"] else "-"
        worst = ", ".join(f"{w['ratio']:.2f} ({_HEAD[w['rival']]})" if w else "-"
                          for w in t["worst"]) or "-"
        floor = "-"
        if t["floor_judged"]:
            floor = (f"{t['floor_ok']}/{t['floor_judged']} <= {fig.floor_target:g}x: " +
                     ", ".join(f"{r:.2f}" if r is not None else "-" for r in t["floor"]))
        split = ", ".join(_split(s) for s in t["split"] if s) or "-"
        rows.append((fig.label, ahead, worst, floor, split))
    return rows


def summary_lines(tallies: list[dict], runs: int) -> list[str]:
    out = [f"summary over {runs} run(s): in how many runs pcg was ahead of every rival (median "
           "ratio <= 1), its worst median ratio in each run, the floor target per run, and "
           "pcg = driver call + the rest (us) per run", ""]
    for label, ahead, worst, floor, split in summary_rows(tallies):
        out.append(f"  {label[:LABEL_W - 1]:<{LABEL_W}} ahead {ahead:<5} worst {worst}")
        out.append(f"  {'':<{LABEL_W}} floor {floor};  {split}")
    return out


def summary_markdown(tallies: list[dict], runs: int) -> list[str]:
    out = [f"### Summary over {runs} run(s)", "",
           "| figure | ahead of every rival | worst median ratio per run (rival) | "
           "pcg / floor per run (target) | pcg = driver + rest, us, per run |",
           "| --- | ---: | --- | --- | --- |"]
    out += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in summary_rows(tallies)]
    return out + [""]


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str))
