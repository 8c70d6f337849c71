"""The API reference (docs/api/index.rst) lists every public name, and builds when Sphinx is here."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
