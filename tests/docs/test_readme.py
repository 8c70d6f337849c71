"""The README: its set-up commands are the CI's and run (CPU), its no-GPU snippet runs here,
its first graph ends in one sentence without a GPU, and its code runs as written (GPU)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pycudagraph as pcg

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README text under the heading ``title`` (up to the next heading of any level)."""
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", README, flags=re.S | re.M)
    assert m, f"README has no section {title!r}"
    return m.group(1)


def blocks(lang, text=README):
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def commands(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.strip().splitlines()]


def run_python(code: str, timeout=120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                    os.environ.get("PYTHONPATH")])))
    env.pop("PYCUDAGRAPH_TRACEBACK", None)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def no_gpu_here():
    if pcg._cuda.cuda_available():
        pytest.skip("a GPU is usable here; this checks what a machine without one shows")


def test_setup_is_install_tests_and_the_main_job_each_on_its_own_line():
    install, tests, main_job = commands(blocks("bash", section("Set up"))[0])
    assert install == 'pip install -e ".[test]"'
    assert tests == "python -m pytest -q"
    assert main_job == "python -m pycudagraph demo"


def test_ci_runs_the_readme_commands():
    install, tests = commands(blocks("bash", section("Set up"))[0])[:2]
    ci = (ROOT / ".ci" / "run").read_text()
    assert install in ci and tests in ci


def test_without_gpu_section_names_the_commands_that_work():
    text = section("Without a GPU")
    cmds = commands(blocks("bash", text)[0])
    assert "python -m pycudagraph info" in cmds and "python -m pycudagraph demo --model" in cmds
    assert 'arch="sm_90"' in text and "pack_args" in text


def test_without_gpu_snippet_runs_here():
    """The README's no-GPU snippet runs as written on this machine, GPU or not."""
    out = run_python(blocks("python", section("Without a GPU"))[0])
    assert out.returncode == 0, out.stderr
    assert "parameter 2 'a'" in out.stdout and "'2.0'" in out.stdout


def test_first_graph_without_gpu_ends_in_one_sentence():
    """A newcomer on a machine with no GPU runs "A first graph": one line naming what is
    missing, not a traceback."""
    no_gpu_here()
    out = run_python(blocks("python", section("A first graph"))[0])
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("pycudagraph: ") and 'arch="sm_90"' in lines[0]
    assert "PYCUDAGRAPH_TRACEBACK=1" in lines[0]


def test_traceback_is_kept_on_request():
    no_gpu_here()
    code = "import pycudagraph as pcg\npcg.Stream()\n"
    env_code = "import os; os.environ['PYCUDAGRAPH_TRACEBACK'] = '1'\n" + code
    out = run_python(env_code)
    assert out.returncode == 1 and "Traceback" in out.stderr
    assert "CudaNotAvailableError" in out.stderr


def test_a_caught_error_is_left_alone():
    """Only an uncaught CudaNotAvailableError is shortened; one the script catches is the
    script's, and other exceptions keep their traceback."""
    no_gpu_here()
    code = ("import pycudagraph as pcg\n"
            "try:\n    pcg.Stream()\nexcept pcg.CudaNotAvailableError as e:\n    print('caught', e.api)\n"
            "raise KeyError('mine')\n")
    out = run_python(code)
    assert out.stdout.strip() == "caught cudaGetDeviceCount"
    assert "Traceback" in out.stderr and "KeyError: 'mine'" in out.stderr


@pytest.mark.gpu
def test_readme_examples_run():
    first, capture = blocks("python", section("A first graph"))[:2]
    scope = {}
    exec(compile(first, "README.md", "exec"), scope)
    exec(compile(capture, "README.md", "exec"), scope)
    scope["stream"].synchronize()


def test_how_fast_speaks_to_users_and_quotes_the_results_page():
    """What was measured, on what, how to reproduce; no development bookkeeping."""
    text = section("How fast")
    assert not re.search(r"\bsets? \d+|\bcommit\b|[0-9a-f]{7}\b|\bissue", text), text
    for want in ("NVIDIA H100 80GB HBM3", "driver 580.159.04", "python -m benchmarks --runs 3",
                 "python -m pycudagraph demo", "To reproduce"):
        assert want in text, want
    results = (ROOT / "docs" / "results" / "head_to_head_h100.md").read_text()
    assert "| MLP eager, per iteration | - | - | - | - | - | 81.4 | 21.2 |" in results
    assert "| MLP graph replay, per iteration | - | - | - | - | - | 42.2 | 19.3 |" in results
    assert "19.3 us per iteration against 21.2 us eager" in text and "42.2 us against 81.4" in text
