"""``python -m pycudagraph {info, demo, bench}`` and :mod:`pycudagraph.info`.

The subprocess tests run the real command line; the in-process ones check the
dispatch (options reach the demo and the benchmark suite untouched) with stand-ins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pycudagraph.cli import main as cli
from pycudagraph import _cuda
from pycudagraph.cli import info
from pycudagraph.errors import CudaNotAvailableError

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pycudagraph", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def has_gpu() -> bool:
    return _cuda.cuda_available()


# Command line ------------------------------------------------------------------------

def test_help_lists_the_commands():
    out = _run("--help")
    assert out.returncode == 0, out.stderr
    for command in ("info", "demo", "bench"):
        assert command in out.stdout


def test_bare_command_prints_the_help_and_exits_2():
    out = _run()
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stdout.startswith("usage: python -m pycudagraph")
    for command in ("info", "demo", "show", "bench"):
        assert command in out.stdout


def test_bench_help_names_this_command():
    out = _run("bench", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m pycudagraph bench")
    assert "python -m benchmarks" not in out.stdout


def test_bench_usage_error_is_a_status(monkeypatch, capsys):
    module = types.ModuleType("fake_bench")
    import argparse

    def build_parser():
        p = argparse.ArgumentParser(prog="python -m benchmarks")
        p.add_argument("--quick", action="store_true")
        return p

    def bench_main(argv):
        return module.build_parser().parse_args(argv) and 0
    module.build_parser, bench_main.__module__ = build_parser, "fake_bench"
    monkeypatch.setitem(sys.modules, "fake_bench", module)
    monkeypatch.setattr(cli, "_benchmarks_main", lambda: bench_main)
    assert cli.main(["bench", "--nope"]) == 2
    assert "usage: python -m pycudagraph bench" in capsys.readouterr().err
    assert module.build_parser is build_parser  # put back


def test_main_returns_argparse_status_instead_of_exiting(capsys):
    assert cli.main(["--help"]) == 0
    assert cli.main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_info_without_gpu_prints_versions_then_one_sentence(has_gpu):
    """What someone without a working driver needs: versions, NVRTC and the hot path on
    stdout; then one sentence on stderr saying what is missing, exit status 1."""
    if has_gpu:
        pytest.skip("a GPU is usable here; this checks the message on machines without one")
    out = _run("info")
    assert out.returncode == 1
    for line in ("pycudagraph ", "Python", "numpy", "cuda-bindings", "CUDA runtime",
                 "CUDA driver", "NVRTC", "Hot path"):
        assert line in out.stdout, out.stdout
    assert info.hot_path() in out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert lines[0].startswith("pycudagraph: no usable GPU: ") and 'arch="sm_90"' in lines[0]


@pytest.mark.gpu
def test_info_on_gpu_names_device_and_features(has_gpu):
    if not has_gpu:
        pytest.skip("needs an NVIDIA GPU and driver")
    out = _run("info")
    assert out.returncode == 0, out.stderr
    props = _cuda.call(_cuda.rt.cudaGetDeviceProperties, 0)
    name = props.name
    name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    assert name.strip() in out.stdout
    assert "conditional" in out.stdout
    assert "Traceback" not in out.stderr


# Dispatch ----------------------------------------------------------------------------

def test_demo_gets_the_remaining_arguments(monkeypatch):
    seen = []
    fake = types.ModuleType("pycudagraph.cli.demo")
    fake.main = lambda argv: seen.append(list(argv)) or 7
    monkeypatch.setitem(sys.modules, "pycudagraph.cli.demo", fake)
    assert cli.main(["demo", "--steps", "3", "-v", "extra"]) == 7
    assert seen == [["--steps", "3", "-v", "extra"]]
    assert cli.main(["demo", "--help"]) == 7  # the demo's own --help, not ours
    assert seen[-1] == ["--help"]


def test_demo_missing_module_is_explained(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pycudagraph.cli.demo", None)  # import fails as if absent
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "no demo module" in err and "Traceback" not in err


def test_bench_gets_the_remaining_arguments(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "_benchmarks_main", lambda: (lambda argv: seen.append(argv) or 0))
    assert cli.main(["bench", "--quick", "launch"]) == 0
    assert seen == [["--quick", "launch"]]


def test_bench_outside_a_checkout_is_explained(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "_REPO_ROOT", tmp_path)
    assert cli.main(["bench"]) == 2
    assert "benchmarks/ folder" in capsys.readouterr().err


def test_commands_without_gpu_do_not_raise(monkeypatch, capsys):
    def no_driver(argv=None):
        raise CudaNotAvailableError("cudaDriverGetVersion", 35, "cudaErrorInsufficientDriver",
                                    "no NVIDIA driver was found on this machine")
    fake = types.ModuleType("pycudagraph.cli.demo")
    fake.main = no_driver
    monkeypatch.setitem(sys.modules, "pycudagraph.cli.demo", fake)
    monkeypatch.setattr(info, "report", no_driver)
    assert cli.main(["demo"]) == 1
    assert cli.main(["info"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("cudaErrorInsufficientDriver" in line for line in err)


# pycudagraph.info ----------------------------------------------------------------------

def test_collect_without_driver_says_what_is_missing(has_gpu):
    if has_gpu:
        pytest.skip("a GPU is usable here")
    data = info.collect()
    assert data["devices"] == [] and data["features"] == []
    assert data["device_error"] and data["nvrtc"] and data["hot_path"]
    assert "Devices: none" in info.report(data)


def test_features_follow_the_driver_version():
    by_name = {f.feature: f for f in info._features(12030)}
    assert by_name["conditional nodes: if / while (cudaGraphConditionalHandleCreate)"].supported
    assert not by_name["conditional nodes: if-else and switch"].supported
    assert by_name["conditional nodes: if-else and switch"].required == "12.8"
    assert all(f.supported for f in info._features(13000) if "bindings" not in f.feature)
    assert not any(f.supported for f in info._features(11000) if "bindings" not in f.feature)


def test_report_formats_collected_data():
    data = {
        "pycudagraph": "0.1.0", "python": "3.12.0", "numpy": "2.0.0",
        "cuda_bindings": "13.0.0", "runtime": "13.0", "runtime_int": 13000,
        "driver": "12.4", "driver_int": 12040, "nvrtc": "13.0",
        "devices": [{"index": 0, "name": "NVIDIA Test GPU", "compute_capability": "9.0",
                     "memory_bytes": 80 << 30, "multiprocessors": 132}],
        "device_error": None, "features": info._features(12040),
    }
    text = info.report(data)
    assert "NVIDIA Test GPU" in text and "compute capability 9.0" in text
    assert "80.0 GiB" in text and "132 SMs" in text
    assert "[yes] conditional nodes: if / while" in text
    assert "[no ] conditional nodes: if-else and switch" in text
    data.update(devices=[], device_error="cudaErrorNoDevice (no CUDA-capable device is detected)")
    assert "Devices: none (cudaErrorNoDevice" in info.report(data)
