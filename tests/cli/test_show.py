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
from pycudagraph.files.archive import read_file

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
    assert "--model draws without a GPU: no --profile" in capsys.readouterr().err
    assert cli.main(["show", "--repeats", "0"]) == 2
    assert cli.main(["show", "--help"]) == 0
    assert "graph file saved with Graph.save" in capsys.readouterr().out


@pytest.mark.skipif(_cuda.cuda_available(), reason="checks the message on a machine without a GPU")
def test_show_without_a_gpu_points_to_the_model(tmp_path):
    out = _run("--out", os.devnull)
    assert out.returncode == 1 and "show --model" in out.stderr
    from tests.graph.test_graph_files_bulk import encode, packed
    path = tmp_path / "chain.pcgraph"  # a file of the package's own kernels: loaded on a GPU
    path.write_bytes(encode(*packed(4)))
    out = _run(str(path), "--out", os.devnull)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"show {path} --model` draws it from the file alone instead" in out.stderr


def test_an_out_folder_that_does_not_exist_is_one_line(tmp_path):
    out = _run("--model", "--out", str(tmp_path / "no" / "such" / "x.html"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"pycudagraph show: --out {tmp_path / 'no' / 'such' / 'x.html'}: the folder "
        f"{tmp_path / 'no' / 'such'} does not exist"]


def test_an_out_that_is_a_folder_is_refused(capsys, tmp_path):
    assert show.main(["--model", "--out", str(tmp_path)]) == 2
    assert "is a folder; name the page's file" in capsys.readouterr().err


def test_a_missing_graph_file_is_one_line(tmp_path):
    out = _run(str(tmp_path / "g.pcgraph"), "--out", str(tmp_path / "g.html"))
    assert out.returncode == 2 and "no such graph file" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_help_says_how_a_file_with_slots_is_shown(capsys):
    assert cli.main(["show", "--help"]) == 0
    text = capsys.readouterr().out
    assert "zeroed" in text and "stand-in" in text and "not launched" in text
    assert "once this version" not in text and "``" not in text


def test_every_slot_gets_a_stand_in_of_its_kind_and_size():
    made = []
    make = {kind: (lambda kind: lambda n: made.append((kind, n)) or f"{kind}:{n}")(kind)
            for kind in ("device", "host", "event")}
    slots = {"x": {"kind": "device", "nbytes": 4096}, "h": {"kind": "host", "nbytes": 16},
             "done": {"kind": "event", "nbytes": 0}}
    assert show.stand_ins(slots, make) == {"x": "device:4096", "h": "host:16", "done": "event:1"}
    assert made == [("device", 4096), ("host", 16), ("event", 1)]
    assert show.stand_ins({}, make) == {}


@pytest.mark.gpu
def test_show_on_the_gpu_checks_and_draws_the_showcase_graph(tmp_path):
    out = _run("--out", str(tmp_path / "g.html"))
    assert out.returncode == 0, out.stdout + out.stderr
    page = (tmp_path / "g.html").read_text()
    assert "reduce_sum" in page and "count_while_below" in page
    assert re.search(r'"type":"conditional"', page)


@pytest.mark.gpu
def test_show_draws_a_saved_file_with_slots(tmp_path):
    """A file whose kernel points into two slots is drawn without binding anything by hand."""
    code = (
        "import numpy as np, pycudagraph as pcg\n"
        "k = pcg.Module.from_file('helpers.cu')['axpy']\n"
        "x, y = pcg.DeviceBuffer(4096), pcg.DeviceBuffer(4096)\n"
        "g = pcg.Graph()\n"
        "g.add_kernel(k, 4, 256, (y, x, 2.0, 1024))\n"
        f"g.save({str(tmp_path / 'g.pcgraph')!r}, slots={{'x': x, 'y': y}})\n")
    made = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stderr
    out = _run(str(tmp_path / "g.pcgraph"), "--out", str(tmp_path / "g.html"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 slot(s) (x, y) bound to zeroed stand-ins" in out.stdout
    assert "axpy" in (tmp_path / "g.html").read_text()


def test_a_file_of_library_kernels_is_drawn_from_the_file(tmp_path, capsys):
    """`show FILE` cannot load a file whose kernels a library holds (this process has not
    loaded the library), so it draws the file alone and says why; --profile is refused with
    where to profile it instead. Neither needs a GPU."""
    from pycudagraph.files import archive
    from tests.graph.test_graph_files_named_kernels import named_manifest, packed
    m, sections, version = packed(named_manifest(6))
    path = tmp_path / "key-000.pcgraph"
    path.write_bytes(archive.encode(m, sections, version=version))
    assert show.library_kernels(read_file(path)) == 1
    assert show.main([str(path), "--out", str(tmp_path / "k.html")]) == 0
    said = capsys.readouterr().out
    assert "drawn from the file without a GPU: its 1 kernel(s) saved by name" in said
    assert "scale" in (tmp_path / "k.html").read_text()
    assert show.main([str(path), "--profile", "--out", str(tmp_path / "p.html")]) == 1
    err = capsys.readouterr().err
    assert "holds 1 kernel(s) saved by name" in err and "--model` draws it here" in err
    assert not (tmp_path / "p.html").exists()


def test_a_long_slot_list_is_shortened():
    assert show._names([f"s{i}" for i in range(9)]) == "s0, s1, s2, s3, s4, s5 and 3 more"
    assert show._names(["x", "y"]) == "x, y"


def test_a_folder_is_refused_naming_a_file_to_show(tmp_path, capsys):
    assert show.main([str(tmp_path), "--model", "--out", str(tmp_path / "g.html")]) == 2
    assert "is a folder with no graph file" in capsys.readouterr().err
    for name in ("key-001.pcgraph", "key-000.pcgraph"):
        (tmp_path / name).write_bytes(b"")
    assert show.main([str(tmp_path), "--out", str(tmp_path / "g.html")]) == 2
    err = capsys.readouterr().err
    assert f"name one, for example {tmp_path / 'key-000.pcgraph'} (2 there)" in err
    assert f"pycudagraph info {tmp_path}" in err and len(err.strip().splitlines()) == 1
