"""docs/frameworks.md: the page exists with its sections, and the names it uses are real."""

import re
from pathlib import Path

import pycudagraph as pcg

PAGE = Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"


def test_page_has_its_sections():
    text = PAGE.read_text()
    assert text.startswith("# PyTorch and CuPy graphs")
    for heading in ("## Memory-safe capture", "## Graphed callables", "## The audit", "## Limits"):
        assert heading in text, heading


def test_page_names_real_public_names():
    text = PAGE.read_text()
    names = set(re.findall(r"\bpcg\.([A-Za-z_]+)", text))
    assert {"capture", "graphed", "CapturePool", "trace"} <= names
    missing = sorted(n for n in names if not hasattr(pcg, n))
    assert not missing, missing
    for method in ("audit", "memory"):
        assert hasattr(pcg.Graph, method)
    for problem in ("freed", "not kept alive", "other device", "pageable host"):
        assert f"`{problem}`" in text
