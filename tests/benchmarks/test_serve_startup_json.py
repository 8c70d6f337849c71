"""``benchmarks/serve_startup.py --json``: what it writes is what the serving page's chart
(docs/_tools/startup_chart.py) draws, every child's result kept. CPU only: the children's
results are made up here in the shape the children print them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from benchmarks import serve_startup

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("startup_chart",
                                               ROOT / "docs" / "_tools" / "startup_chart.py")
chart_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chart_mod)


def _load(ms):
    return {"ms": ms, "captures": 0, "loaded": 20, "fallback": 0, "probes": 3,
            "kernel_sets": 10, "kernels": 51, "module_hits": 12,
            "seconds": {"check": 0.008, "kernels": 0.35, "graphs": 0.17, "graph files": 0.11,
                        "instantiate": 0.027, "rebind plans": 0.027}}


def test_what_json_writes_is_what_the_chart_draws(tmp_path):
    capture = [{"ms": 800.0, "captures": 20}, {"ms": 820.0, "captures": 20},
               {"ms": 790.0, "captures": 20}]
    load = [_load(580.0), _load(600.0), _load(570.0)]
    first = [{"ms": 230.0}, {"ms": 220.0}, {"ms": 240.0}]
    pools = ({"bytes": 416 << 20, "reserved": 1}, {"bytes": 1146 << 20, "reserved": 2})
    env = {"gpu": "NVIDIA H200 (sm_90)", "torch": "2.11.0"}
    text = serve_startup.result_json(12, capture, load, first, pools, env)
    result = json.loads(text)
    assert result["repeat"] == 3 and result["buckets"] == len(serve_startup.BUCKETS)
    assert result["load"] == load and result["capture"] == capture  # every child, as printed
    assert result["pool_bytes"] == {"shared": 416 << 20, "per_key": 1146 << 20}
    path = tmp_path / "result.json"
    path.write_text(text)
    rows = {label: total for label, total, _ in chart_mod.bars(json.loads(path.read_text()))}
    assert rows == {"capture path": 800.0, "load path": 580.0, "one eager call": 230.0}
    assert "<svg" in chart_mod.write(path, tmp_path / "chart.svg").read_text()


def test_per_bucket_shares_out_the_capture_path_less_one_eager_call():
    n = len(serve_startup.BUCKETS)
    line = serve_startup.per_bucket(230.0 + 30.0 * n, 230.0, _load(580.0))
    assert "a load 8.5 ms" in line  # 0.17 s of graphs over 20 keys loaded
    assert "a capture 30.0 ms" in line and line.endswith(f"{8.5 / 30.0:.0%}")


def test_a_key_left_out_at_save_is_said_with_its_reason():
    why = "0x7f00 lies in no block of PyTorch's allocator; the value sits in node 12 arg 1"
    text = serve_startup.saved_lines({"keys": 19, "skipped": [why]}, "/tmp/g")
    assert text.splitlines() == ["saved 19 keys (1 left out) to /tmp/g", f"  left out: {why}"]
    assert serve_startup.saved_lines({"keys": 20, "skipped": []}, "/tmp/g") == \
        "saved 20 keys (0 left out) to /tmp/g"
