"""``python -m pycudagraph show``: the page of the showcase model without a GPU, the
refusals, and on a GPU the page of the real showcase graph."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pycudagraph import _cuda
from pycudagraph.cli import main as cli
from pycudagraph.cli import show

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pycudagraph", "show", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_show_model_writes_the_page_without_a_gpu(tmp_path):
    out = _run("--model", "--out", str(tmp_path / "g.html"))
    assert out.returncode == 0, out.stderr
    assert "drawn without a GPU" in out.stdout
    page = (tmp_path / "g.html").read_text()
    assert "count_while_below" in page and 'id="pcg-data"' in page


def test_show_refuses_what_the_model_cannot_do(capsys):
    assert cli.main(["show", "--model", "--profile"]) == 2
    assert "no FILE, no --profile" in capsys.readouterr().err
    assert cli.main(["show", "--repeats", "0"]) == 2
    assert cli.main(["show", "--help"]) == 0
    assert "saved graph file" in capsys.readouterr().out


@pytest.mark.skipif(_cuda.cuda_available(), reason="checks the message on a machine without a GPU")
def test_show_without_a_gpu_points_to_the_model():
    out = _run("--out", os.devnull)
    assert out.returncode == 1 and "show --model" in out.stderr


def test_a_saved_graph_file_is_refused_until_load_exists(tmp_path, monkeypatch, capsys):
    import pycudagraph as pcg
    if hasattr(pcg, "load"):
        pytest.skip("this version reads saved graph files")
    monkeypatch.setattr(pcg.Stream, "close", lambda self: None)
    monkeypatch.setattr(pcg.Stream, "__init__", lambda self, *a, **k: None)
    assert show.main([str(tmp_path / "g.pcg"), "--out", str(tmp_path / "g.html")]) == 2
    assert "cannot read saved graph files" in capsys.readouterr().err


@pytest.mark.gpu
def test_show_on_the_gpu_checks_and_draws_the_showcase_graph(tmp_path):
    out = _run("--out", str(tmp_path / "g.html"))
    assert out.returncode == 0, out.stdout + out.stderr
    page = (tmp_path / "g.html").read_text()
    assert "reduce_sum" in page and "count_while_below" in page
    assert re.search(r'"type":"conditional"', page)
