"""``benchmarks/model_file_check.py`` (CPU, no driver): the model-shaped graph file it
times is a valid file of the shape it says (runs of kernels saved by name between memsets,
slots named for weights), read with one parse of its manifest, and the script prints a row
per step."""

import os
import subprocess
import sys

from benchmarks import model_file_check
from pycudagraph.files import archive as files
from tests.support.native_driver import ROOT


def test_the_model_file_has_runs_between_memsets_and_is_parsed_once(monkeypatch):
    data = model_file_check.model_file(2)
    parses = []
    parse = files._parse_manifest
    monkeypatch.setattr(files, "_parse_manifest",
                        lambda *a, **k: parses.append(1) or parse(*a, **k))
    gf = files.decode(data)
    assert len(parses) == 1  # slot names with ':' in them cost no second parse
    kinds = [n["type"] for n in gf.manifest["root"]["nodes"]]
    assert kinds == ["kernel_run", "memset"] * 4  # two halves a layer, two layers
    assert len(gf.bulk[0]) == 2 * 2 * len(model_file_check.SIZES)
    assert "param:transformer.h.1.mlp.c_proj.bias" in gf.manifest["slots"]


def test_the_script_prints_each_step():
    out = subprocess.run([sys.executable, "benchmarks/model_file_check.py", "--layers", "2",
                          "--repeat", "1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    steps = [ln.strip().rsplit(None, 1) for ln in out.stdout.splitlines() if ln.startswith("  ")]
    assert [s[0] for s in steps] == ["container", "JSON parse", "manifest check", "decode"]
    assert float(steps[-1][1]) > 0
