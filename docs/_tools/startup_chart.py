"""The serving page's start-up chart: what ``benchmarks/serve_startup.py --json PATH`` measured,
drawn as three bars on one millisecond axis (an SVG; no GPU, no plotting library)::

    python docs/_tools/make_pictures.py startup docs/results/serve_startup_h200.json

* **capture path**: ``pcg.graphed`` warming up, capturing and instantiating every bucket;
* **load path**: ``pcg.load_graphed``, split by that process's own ``f.load_report.seconds``
  (the index and files checked, the library kernels found, then per key its graph file,
  instantiate and rebinding plan), then the first replays;
* **one eager call**: the first eager call of one bucket in a fresh process: a load finds the
  library kernels by running the model once, so no load costs less. A dashed line marks it
  across the bars.

Each bar is the fresh process whose time is the median of its kind (the lower middle one
for an even count), so the load bar's parts add up to its own length.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

#: Okabe-Ito colours: told apart by colour-blind readers too
_BLUE, _ORANGE, _GREEN, _SKY, _PURPLE, _YELLOW, _RED, _GREY, _DARK = (
    "#0072B2", "#E69F00", "#009E73", "#56B4E9", "#CC79A7", "#F0E442", "#D55E00", "#999999",
    "#555555")

#: the load steps drawn (``f.load_report.seconds`` keys), in order, with their legend text
LOAD_STEPS = (("check", "index, model and files checked", _GREY),
              ("kernels", "library kernels found: one eager run, then the probe captures",
               _ORANGE),
              ("graph files", "graph files read and rebuilt (pcg.load)", _GREEN),
              ("instantiate", "instantiate", _SKY),
              ("rebind plans", "rebinding plans", _PURPLE))
#: how far the measured steps may add up past the load's own time (clock reads) before the
#: result is refused
_SLACK_MS = 0.5

WIDTH, LEFT, PLOT = 760, 120, 520  # the picture, the label column, the longest bar (px)
BAR, GAP, TOP = 26, 18, 58


def _runs(result: dict, name: str) -> list:
    runs = result.get(name)
    if not isinstance(runs, list) or not runs:
        raise ValueError(f"{name}: expected a list of the runs measured, got {runs!r}")
    for i, run in enumerate(runs):
        ms = run.get("ms") if isinstance(run, dict) else None
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not ms > 0:
            raise ValueError(f"{name}[{i}].ms: expected a positive number of milliseconds, "
                             f"got {ms!r}")
    return runs


def median_run(runs: list) -> dict:
    """The run whose ``ms`` is the median (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda r: r["ms"])
    return ordered[(len(ordered) - 1) // 2]


def bars(result: dict) -> list:
    """``[(label, total ms, [(legend text, ms, colour), ...]), ...]``: the three bars.

    Raises
    ------
    ValueError
        A field missing or of the wrong kind (named), or load steps adding up to more than
        the load's own time.
    """
    capture = median_run(_runs(result, "capture"))
    load_runs = _runs(result, "load")
    load = median_run(load_runs)
    first = median_run(_runs(result, "first_eager"))
    where = f"load[{load_runs.index(load)}].seconds"
    seconds = load.get("seconds")
    if not isinstance(seconds, dict):
        raise ValueError(f"{where}: expected the load's steps, got {seconds!r}")
    ms = {}
    for key in [k for k, _, _ in LOAD_STEPS] + ["graphs"]:
        value = seconds.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{where}.{key}: expected seconds (a number >= 0), got {value!r}")
        ms[key] = 1000.0 * value
    parts = [(text, ms[key], colour) for key, text, colour in LOAD_STEPS]
    per_key = ms["graphs"] - ms["graph files"] - ms["instantiate"] - ms["rebind plans"]
    rest = load["ms"] - ms["check"] - ms["kernels"] - ms["graphs"]
    for what, value in (("graphs less its graph files, instantiate and rebind plans", per_key),
                        ("the load's time less its steps", rest)):
        if value < -_SLACK_MS:
            raise ValueError(f"{where}: {what} is {value:.1f} ms: the steps add up to more "
                             "than they are part of")
    parts += [("the rest of each key (scratch inputs, pools, outputs)", max(per_key, 0.0),
               _YELLOW),
              ("first replays and the synchronize", max(rest, 0.0), _RED)]
    return [("capture path", capture["ms"],
             [("warm-ups, captures and instantiates of every bucket", capture["ms"], _BLUE)]),
            ("load path", load["ms"], parts),
            ("one eager call", first["ms"],
             [("first eager call of one bucket: the least a load can cost", first["ms"], _DARK)])]


def _tick_step(longest: float) -> float:
    for step in (10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000):
        if longest / step <= 8:
            return step
    return 10 ** len(str(int(longest)))


def chart(result: dict) -> str:
    """The SVG text of :func:`bars` for ``result`` (``serve_startup.py --json``'s content)."""
    rows = bars(result)
    env = result.get("env") if isinstance(result.get("env"), dict) else {}
    longest = max(total for _, total, _ in rows)
    scale = PLOT / longest
    height = TOP + len(rows) * (BAR + GAP) + 30
    legend = [(text, colour) for _, _, parts in rows for text, _, colour in parts]
    height += 18 * len(legend) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">Start to first replay of '
           f'{escape(str(result.get("buckets", "?")))} buckets, GPT-2 '
           f'({escape(str(result.get("layers", "?")))} layers)</text>',
           f'<text x="10" y="38" fill="{_DARK}">{escape(str(env.get("gpu", "GPU not named")))}'
           f', PyTorch {escape(str(env.get("torch", "?")))}; each bar the median of '
           f'{escape(str(result.get("repeat", "?")))} fresh processes</text>']
    axis_y = TOP + len(rows) * (BAR + GAP)
    step = _tick_step(longest)
    tick = 0.0
    while tick <= longest + 1e-9:
        x = LEFT + tick * scale
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{axis_y - GAP + 6}" '
                   'stroke="#dddddd"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 2}" text-anchor="middle" '
                   f'fill="{_DARK}">{tick:g}</text>')
        tick += step
    out.append(f'<text x="{LEFT + PLOT}" y="{axis_y + 18}" text-anchor="end" '
               f'fill="{_DARK}">milliseconds</text>')
    for i, (label, total, parts) in enumerate(rows):
        y = TOP + i * (BAR + GAP)
        out.append(f'<text x="{LEFT - 8}" y="{y + BAR / 2 + 4}" text-anchor="end">'
                   f'{escape(label)}</text>')
        x = float(LEFT)
        for text, ms, colour in parts:
            w = ms * scale
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{BAR}" '
                       f'fill="{colour}" data-ms="{ms:.2f}"><title>{escape(text)}: '
                       f'{ms:.1f} ms</title></rect>')
            x += w
        out.append(f'<text x="{x + 6:.1f}" y="{y + BAR / 2 + 4}">{total:.0f} ms</text>')
    floor_x = LEFT + rows[-1][1] * scale
    out.append(f'<line x1="{floor_x:.2f}" y1="{TOP - 6}" x2="{floor_x:.2f}" '
               f'y2="{axis_y - GAP + 6}" stroke="{_DARK}" stroke-dasharray="4 3" '
               'class="least-load"/>')
    y = axis_y + 40
    for text, colour in legend:
        out.append(f'<rect x="{LEFT}" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{LEFT + 18}" y="{y}">{escape(text)}</text>')
        y += 18
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(result_path, out_path) -> Path:
    """Read ``result_path`` (JSON), write its chart to ``out_path``; returns ``out_path``."""
    result = json.loads(Path(result_path).read_text(encoding="utf-8"))
    if not isinstance(result, dict):
        raise ValueError(f"{result_path}: expected a JSON object (serve_startup.py --json)")
    out = Path(out_path)
    out.write_text(chart(result), encoding="utf-8")
    return out
