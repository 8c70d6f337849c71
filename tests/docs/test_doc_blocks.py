"""Every Python block of the documentation site's pages runs, as a test.

The ```` ```python ```` blocks of each page in :data:`PAGES` run in order, in one namespace
(a page tells one story: later blocks use what earlier ones made), in a child process
whose working folder is a fresh temporary one. A block runs on the GPU machine; a block
preceded by the MyST comment ``% cpu`` also runs without a GPU (and must not need one),
``% needs MODULE`` (torch, cupy, triton, numba) skips it where that module is missing.
Each block is one test item: it passes when the child reached the end of that block.
The blocks of :data:`STANDALONE` pages must also run each on its own, as printed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _REASON as NO_GPU

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = ("quickstart.md", "without_gpu.md", "tutorial.md", "seeing_inside.md", "own_kernels.md",
         "graph_files.md", "frameworks.md", "when_a_graph_goes_wrong.md", "sleep_and_wake.md",
         "serving_with_graphs.md")
#: Pages whose every block says it stands alone.
STANDALONE = ("without_gpu.md",)
BLOCK = re.compile(r"^(?P<marks>(?:%[^\n]*\n)*)```python\n(?P<code>.*?)^```", re.M | re.S)
HAS_TORCH = importlib.util.find_spec("torch") is not None


def missing(marks: set) -> list[str]:
    """The modules a block's ``% needs MODULE`` marks name that are not installed here."""
    names = [m.split(None, 1)[1].strip() for m in marks if m.startswith("needs ")]
    return [n for n in names if importlib.util.find_spec(n) is None]

RUNNER = r"""
import json, sys, traceback
blocks, run, page = json.load(open(sys.argv[1])), set(json.loads(sys.argv[2])), sys.argv[3]
ns = {"__name__": "__main__"}
for i, code in enumerate(blocks):
    if i not in run:
        continue
    print(f"=== BLOCK {i} START", flush=True)
    path = f"{page.replace('.', '_')}_block_{i}.py"  # a real file: Triton reads @jit source
    open(path, "w").write(code)
    exec(compile(code, path, "exec"), ns)
    print(f"=== BLOCK {i} OK", flush=True)
"""


def blocks(page: str) -> list[tuple[str, set, int]]:
    """(code, marks, line) of every Python block of ``docs/<page>``."""
    text = (DOCS / page).read_text()
    out = []
    for m in BLOCK.finditer(text):
        marks = {ln[1:].strip() for ln in m.group("marks").splitlines()}
        out.append((m.group("code"), marks, text.count("\n", 0, m.start("code")) + 1))
    return out


def runnable(marks: set) -> bool:
    if NO_GPU is not None and "cpu" not in marks:
        return False
    return not missing(marks)


_RUNS: dict = {}


def run_page(page: str, tmp_factory) -> str:
    """Run the page's runnable blocks once (cached); the child's output."""
    if page not in _RUNS:
        found = blocks(page)
        todo = [i for i, (_, marks, _) in enumerate(found) if runnable(marks)]
        work = tmp_factory.mktemp(page.replace(".", "_"))
        (work / "blocks.json").write_text(json.dumps([code for code, _, _ in found]))
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("MPLBACKEND", "Agg")
        try:
            done = subprocess.run([sys.executable, "-c", RUNNER, str(work / "blocks.json"),
                                   json.dumps(todo), page], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=900)
            _RUNS[page] = done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            _RUNS[page] = f"TIMEOUT\n{exc.stdout or ''}{exc.stderr or ''}"
    return _RUNS[page]


def _items():
    for page in PAGES:
        if not (DOCS / page).exists():
            continue
        for i, (_, marks, line) in enumerate(blocks(page)):
            m = [] if "cpu" in marks else [pytest.mark.gpu]
            absent = missing(marks)
            if absent:
                m.append(pytest.mark.skip(reason=f"{', '.join(absent)} not installed"))
            yield pytest.param(page, i, line, marks=m, id=f"{page}:{line}")


def test_the_pages_have_blocks():
    assert all(blocks(p) for p in PAGES if p != "seeing_inside.md" or (DOCS / p).exists())


@pytest.mark.parametrize("page,index,line", list(_items()))
def test_block_runs(page, index, line, tmp_path_factory):
    out = run_page(page, tmp_path_factory)
    if f"=== BLOCK {index} OK" in out:
        return
    started = out.rfind(f"=== BLOCK {index} START")
    if started < 0:
        pytest.fail(f"docs/{page} line {line}: not reached; an earlier block failed:\n{out[-4000:]}")
    pytest.fail(f"docs/{page} line {line} failed:\n{out[started:][-4000:]}")


def _standalone_items():
    for page in STANDALONE:
        for i, (_, marks, line) in enumerate(blocks(page)):
            m = [] if "cpu" in marks else [pytest.mark.gpu]
            yield pytest.param(page, i, line, marks=m, id=f"{page}:{line}")


@pytest.mark.parametrize("page,index,line", list(_standalone_items()))
def test_block_runs_alone(page, index, line, tmp_path):
    """The block, in a fresh process with nothing run before it."""
    code = blocks(page)[index][0]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"docs/{page} line {line}, run alone:\n{done.stderr[-3000:]}"


def test_pages_mark_what_their_blocks_need():
    """A block that imports torch, cupy, triton or numba (at top level) says so with ``% needs``."""
    for page in PAGES:
        for code, marks, line in blocks(page):
            for module in ("torch", "cupy", "triton", "numba"):
                if re.search(rf"^(import|from) {module}\b", code, re.M):  # top level
                    assert f"needs {module}" in marks, f"docs/{page} line {line}: {module}"
