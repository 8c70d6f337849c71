"""The API reference (docs/api/index.rst) lists every public name, and builds when Sphinx is here."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "tools" / "gen_api_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_page_lists_every_public_name():
    import pycudagraph
    text = (ROOT / "docs" / "api" / "index.rst").read_text()
    missing = [n for n in pycudagraph.__all__ if f"pycudagraph.{n}\n" not in text]
    assert not missing, f"docs/api/index.rst lacks {missing}: run python tools/gen_api_docs.py"
    assert text == _generator().page(), "docs/api/index.rst is stale: run python tools/gen_api_docs.py"


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("numpydoc") is None,
                    reason="Sphinx and numpydoc are not installed (pip install -e '.[docs]')")
def test_sphinx_build_has_no_warning(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(ROOT / "docs"), str(tmp_path / "html")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]


def test_every_debug_dot_flag_is_reachable(monkeypatch):
    """Graph.debug_dot_print takes every cudaGraphDebugDotFlags value by name."""
    from pycudagraph.inspect import dot
    from pycudagraph._cuda import rt
    names = dot.debug_dot_flags()
    members = [m for m in dir(rt.cudaGraphDebugDotFlags) if m.startswith("cudaGraphDebugDotFlags")]
    assert len(names) == len(members) and "verbose" in names and "kernel_node_params" in names
    seen = []
    monkeypatch.setattr(dot, "call", lambda fn, raw, path, bits: seen.append((fn, bits)))

    from pycudagraph.graph.features import GraphFeatures

    class _G(GraphFeatures):
        handle = object()
    for name, value in names.items():
        _G().debug_dot_print("x.dot", flags=[name])
        assert seen[-1] == (rt.cudaGraphDebugDotPrint, value)
    _G().debug_dot_print("x.dot", verbose=True, flags=("handles",))
    assert seen[-1][1] == names["verbose"] | names["handles"]
    import pycudagraph as pcg
    with pytest.raises(pcg.ArgumentError, match="no flag 'colour'"):
        _G().debug_dot_print("x.dot", flags=["colour"])
