"""The README's code must run as written (GPU) and its two set-up commands must be the CI's (CPU)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_commands():
    setup = blocks("bash")[0]
    install, tests = [line.split("#")[0].strip() for line in setup.strip().splitlines()[:2]]
    ci = (ROOT / ".ci" / "run").read_text()
    assert install in ci and tests in ci


@pytest.mark.gpu
def test_readme_examples_run():
    first, capture = blocks("python")[:2]
    scope = {}
    exec(compile(first, "README.md", "exec"), scope)
    exec(compile(capture, "README.md", "exec"), scope)
    scope["stream"].synchronize()
