"""``python -m benchmarks.graphed`` (benchmarks/graphed.py) without a GPU: the ratios to the
hand-captured replay, the table's cells, the verdict per target over several runs, and the
one sentence printed without PyTorch."""

import sys

from benchmarks import graphed as bench


def row(floor, same, new, **others):
    out = {c: 10.0 for c in bench.COLUMNS}
    out[bench.FLOOR], out["pcg.graphed same input"], out["pcg.graphed new address"] = \
        floor, same, new
    out.update(others)
    return out


def test_ratios_are_to_the_static_replay():
    r = bench.ratios(row(4.0, 5.0, 8.0))
    assert r[bench.FLOOR] == 1.0 and r["pcg.graphed same input"] == 1.25
    assert r["pcg.graphed new address"] == 2.0 and r["eager"] == 2.5
    assert bench.ratios(row(None, 5.0, 8.0))["eager"] is None


def test_table_cells_and_errors():
    run = {"tiny": row(3.2, 4.0, 6.0, eager=None)}
    lines = bench.table(run, {"tiny": "tiny fn"})
    assert lines[0].startswith("| function | eager | torch replay (static)")
    assert lines[2].startswith("| tiny fn | error | 3.2 (1.00x) |")
    assert "| 4.0 (1.25x) | 6.0 (1.88x) |" in lines[2]
    assert len(lines[1].split("|")) == len(lines[0].split("|"))


def test_verdicts_count_runs_that_met_each_target():
    runs = [{"tiny": row(3.0, 4.4, 6.1), "mlp": row(50.0, 50.5, 51.5)},
            {"tiny": row(3.0, 4.6, 5.9), "mlp": row(50.0, 50.9, 50.2)},
            {"tiny": row(3.0, 4.0, None), "mlp": row(50.0, 51.0, 51.0)}]
    lines = bench.verdicts(runs)
    assert "tiny, pcg.graphed same input: <= 1.5x in 2 of 3 runs (1.47, 1.53, 1.33)" in lines
    assert "tiny, pcg.graphed new address: <= 2.0x in 1 of 3 runs (2.03, 1.97, error)" in lines
    assert "mlp, pcg.graphed same input: <= 1.02x in 3 of 3 runs (1.01, 1.02, 1.02)" in lines
    assert "mlp, pcg.graphed new address: <= 1.02x in 2 of 3 runs (1.03, 1.00, 1.02)" in lines
    assert not [ln for ln in lines if ln.startswith("gpt2")]  # not measured: not judged


def test_without_pytorch_one_sentence(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert bench.main(["--runs", "2"]) == 0
    assert "PyTorch is not installed" in capsys.readouterr().out
