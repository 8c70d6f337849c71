"""The compiled hot path (CPU): it builds and imports, is the active path once built,
is off with PYCUDAGRAPH_NO_NATIVE=1, and ``pycudagraph info`` names it."""

import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

from pycudagraph._cuda import _build, fast
from pycudagraph.cli import info
from tests.support.native_driver import ROOT


def test_extension_builds_here(tmp_path):
    """The C source compiles with this interpreter's headers and imports as a module."""
    cmd = _build.command()
    out = tmp_path / os.path.basename(_build.target())
    cmd[cmd.index("-o") + 1] = str(out)
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("_native", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.K_OTHER == 12 and callable(mod.graph_launch)


def test_installed_extension_is_the_active_path():
    """`pip install -e .` builds it in place; without PYCUDAGRAPH_NO_NATIVE it is used."""
    if os.environ.get(fast.NATIVE_ENV, "") not in ("", "0"):
        pytest.skip("PYCUDAGRAPH_NO_NATIVE is set in this session")
    assert fast.native is not None, (
        f"hot path: {fast.native_status()}; build it in place with `pip install -e .`, "
        "`python setup.py build_ext --inplace` or `python pycudagraph/_cuda/_build.py`")
    importlib.import_module("pycudagraph._cuda._native")
    assert fast.native_status().startswith("compiled (pycudagraph._cuda._native")
    assert info.hot_path() == fast.native_status()


def test_disabled_by_environment_variable():
    code = ("from pycudagraph._cuda import fast\n"
            "from pycudagraph.compile.args import Layout\n"
            "from pycudagraph.compile.signature import parse_params\n"
            "from pycudagraph.cli import info\n"
            "assert fast.native is None\n"
            "assert Layout('k', parse_params('float* y, int n')).native is None\n"
            "print(info.hot_path())\n")
    env = dict(os.environ, PYTHONPATH=ROOT, PYCUDAGRAPH_NO_NATIVE="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)"


def test_info_report_names_the_hot_path():
    data = {"pycudagraph": "0", "python": "3", "numpy": "2", "cuda_bindings": "13",
            "runtime": "13.0", "runtime_int": 13000, "driver": "13.0", "driver_int": 13000,
            "nvrtc": "13.0", "devices": [], "device_error": "none", "features": [],
            "hot_path": "ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)"}
    data["features"] = info._features(13000)
    assert "Hot path        ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)" in info.report(data)


def test_layout_kinds():
    from pycudagraph.compile.args import Layout
    from pycudagraph.compile.signature import parse_params
    if fast.native is None:
        pytest.skip(fast.native_status())
    assert Layout("k", parse_params("float* y, double a, bool b, short s")).native.simple
    for sig in ("half h", "__nv_bfloat16 b", "float4 v"):
        assert not Layout("k", parse_params(sig)).native.simple, sig
    with pytest.raises(ValueError, match="outside the buffer"):
        fast.native.Layout(bytes([fast.native.K_I32]), (72,), 84, (None,))
