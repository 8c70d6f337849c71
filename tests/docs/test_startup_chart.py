"""The serving page's start-up chart (docs/_tools/startup_chart.py): bars as long as what
was measured, the median process drawn, a bad result refused by name, and the picture on
the page drawn from the result file beside it. No GPU."""

from __future__ import annotations

import copy
import importlib.util
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("startup_chart",
                                               ROOT / "docs" / "_tools" / "startup_chart.py")
chart_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chart_mod)

SVG = "{http://www.w3.org/2000/svg}"


def _load(ms, kernels=0.40, graphs=0.21):
    return {"ms": ms, "seconds": {"check": 0.01, "kernels": kernels, "graphs": graphs,
                                  "graph files": 0.13, "instantiate": 0.03,
                                  "rebind plans": 0.03}}


RESULT = {"layers": 12, "buckets": 20, "repeat": 3,
          "capture": [{"ms": 900.0}, {"ms": 850.0}, {"ms": 870.0}],
          "load": [_load(790.0), _load(700.0, kernels=0.36), _load(760.0, kernels=0.38)],
          "first_eager": [{"ms": 250.0}, {"ms": 230.0}, {"ms": 270.0}],
          "env": {"gpu": "NVIDIA H200 (sm_90)", "torch": "2.11.0"}}


def _bars(svg: str) -> dict:
    """Label -> the widths of its bar's parts, from the drawn SVG."""
    root = ET.fromstring(svg)
    parts = [r for r in root.iter(f"{SVG}rect") if r.get("data-ms") is not None]
    rows: dict = {}
    for r in parts:
        rows.setdefault(float(r.get("y")), []).append(r)
    labels = {float(t.get("y")): t.text for t in root.iter(f"{SVG}text")
              if t.get("text-anchor") == "end" and t.text != "milliseconds"}
    out = {}
    for y, rects in rows.items():
        label = next(text for ty, text in labels.items() if y < ty < y + chart_mod.BAR)
        out[label] = [float(r.get("width")) for r in rects]
    return out


def test_each_bar_is_as_long_as_the_median_process_of_its_kind():
    bars = _bars(chart_mod.chart(RESULT))
    assert set(bars) == {"capture path", "load path", "one eager call"}
    scale = chart_mod.PLOT / 870.0  # the longest bar: the median capture
    assert sum(bars["capture path"]) == pytest.approx(870.0 * scale, abs=0.05)
    assert sum(bars["load path"]) == pytest.approx(760.0 * scale, abs=0.05)
    assert sum(bars["one eager call"]) == pytest.approx(250.0 * scale, abs=0.05)


def test_the_load_bar_is_split_by_its_own_report():
    rows = {label: parts for label, _, parts in chart_mod.bars(RESULT)}
    got = [round(ms, 6) for _, ms, _ in rows["load path"]]
    # check, kernels, graph files, instantiate, rebind plans, rest of the keys, replays
    assert got == [10.0, 380.0, 130.0, 30.0, 30.0, 20.0, 760.0 - 10.0 - 380.0 - 210.0]


def test_an_even_count_draws_the_lower_middle_process():
    result = copy.deepcopy(RESULT)
    result["capture"] = [{"ms": 800.0}, {"ms": 900.0}]
    assert chart_mod.bars(result)[0][1] == 800.0


def test_the_dashed_line_marks_the_eager_call():
    root = ET.fromstring(chart_mod.chart(RESULT))
    line = next(x for x in root.iter(f"{SVG}line") if x.get("class") == "least-load")
    assert float(line.get("x1")) == pytest.approx(chart_mod.LEFT + 250.0 * chart_mod.PLOT / 870.0,
                                                  abs=0.01)


@pytest.mark.parametrize("change, words", [
    (lambda r: r.pop("load"), "load: expected a list"),
    (lambda r: r["capture"][1].update(ms=-3), "capture[1].ms: expected a positive number"),
    (lambda r: r["load"][2]["seconds"].pop("kernels"), "load[2].seconds.kernels"),
    (lambda r: r["load"][2]["seconds"].update(graphs="x"), "load[2].seconds.graphs"),
    (lambda r: r["load"][2]["seconds"].update(kernels=0.7), "add up to more"),
    (lambda r: r["load"][2]["seconds"].update(graphs=0.1), "add up to more"),
])
def test_a_result_that_is_not_whole_is_refused_by_name(change, words):
    result = copy.deepcopy(RESULT)
    change(result)
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        chart_mod.chart(result)


def test_text_from_the_result_cannot_break_the_picture():
    result = copy.deepcopy(RESULT)
    result["env"]["gpu"] = "GPU <one> & \"two\""
    root = ET.fromstring(chart_mod.chart(result))  # parses: escaped
    assert any("GPU <one> & \"two\"" in (t.text or "") for t in root.iter(f"{SVG}text"))


def test_the_pages_picture_is_drawn_from_the_result_beside_it(tmp_path):
    result = ROOT / "docs" / "results" / "serve_startup_h200.json"
    picture = ROOT / "docs" / "_static" / "serve_startup.svg"
    assert "_static/serve_startup.svg" in (ROOT / "docs" / "serving_with_graphs.md").read_text()
    out = chart_mod.write(result, tmp_path / "again.svg")
    assert out.read_text() == picture.read_text(), (
        "docs/_static/serve_startup.svg is not what its result draws: run "
        "python docs/_tools/make_pictures.py startup")
    assert json.loads(result.read_text())["env"]["gpu"]  # says where it was measured
