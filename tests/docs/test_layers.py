"""The package's layering, checked by ``tools/layers.py`` (CPU only).

Features import the core, never the reverse: the core (``graph/``) and what it stands on
(``nodes/``, ``compile/``, ``runtime/``, ``_cuda/``) import no feature wing at import time,
and node-type switches stay in ``nodes/``.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("layers", ROOT / "tools" / "layers.py")
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)

#: The most node-type switches allowed outside nodes/ (docs/ARCHITECTURE.md).
MAX_SWITCHES = 0


def test_the_script_passes_and_prints_each_wing():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "layers.py")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    for wing in ("graph/", "capture/", "files/", "profile/", "inspect/", "apply/", "nodes/"):
        assert wing in out.stdout


def test_the_core_is_small():
    mods = [p for p in (ROOT / "pycudagraph" / "graph").glob("*.py")]
    lines = sum(len(p.read_text().splitlines()) for p in mods)
    assert len(mods) <= 14 and lines <= 2500, (len(mods), lines)


def test_node_type_switches_stay_in_nodes():
    found = layers.switches()
    assert len(found) <= MAX_SWITCHES, "\n".join(found)


def test_a_core_import_of_a_feature_is_caught(tmp_path, monkeypatch):
    pkg = tmp_path / "pycudagraph"
    (pkg / "graph").mkdir(parents=True)
    (pkg / "inspect").mkdir()
    (pkg / "graph" / "bad.py").write_text("from ..inspect import dot\n\n"
                                          "def lazy():\n    from ..inspect import html\n")
    (pkg / "inspect" / "dot.py").write_text("")
    monkeypatch.setattr(layers, "ROOT", pkg)
    faults = layers.import_faults()
    assert len(faults) == 1 and "graph/bad.py:1" in faults[0] and "inspect/" in faults[0]


def test_a_type_switch_is_counted(tmp_path, monkeypatch):
    pkg = tmp_path / "pycudagraph"
    (pkg / "nodes").mkdir(parents=True)
    (pkg / "inspect").mkdir()
    (pkg / "nodes" / "x.py").write_text("class KernelNode:\n    pass\n")
    (pkg / "inspect" / "y.py").write_text(
        "def f(n):\n    if isinstance(n, KernelNode):\n        return 1\n"
        "    if n.type == 'memcpy':\n        return 2\n    return n.fields()\n")
    monkeypatch.setattr(layers, "ROOT", pkg)
    assert layers.switches() == ["pycudagraph/inspect/y.py:2", "pycudagraph/inspect/y.py:4"]


def test_no_two_c_files_of_the_hot_path_call_each_other():
    assert layers.c_circles() == [], layers.c_calls()


def test_two_c_files_calling_each_other_are_caught(tmp_path):
    (tmp_path / "_native_a.c").write_text("int f(void)\n{\n    return g(); /* h() */\n}\n")
    (tmp_path / "_native_b.c").write_text("int g(void)\n{\n    return f() + S.h();\n}\n"
                                          "static int h(void)\n{\n    return 0;\n}\n")
    assert layers.c_circles(tmp_path) == ["_native_a.c <-> _native_b.c"]
    (tmp_path / "_native_b.c").write_text("int g(void)\n{\n    return 1; /* f() */\n}\n")
    assert layers.c_circles(tmp_path) == []
