"""Packaging: license, py.typed, the CUDA 12/13 extras, NVRTC missing, CUDA headers (CPU)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pycudagraph as pcg
from pycudagraph.compile import headers
from pycudagraph.compile import program

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib")
requirements = pytest.importorskip("packaging.requirements")


@pytest.fixture(scope="module")
def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _reqs(lines):
    return {r.name: r for r in map(requirements.Requirement, lines)}


def test_license_file_matches_pyproject(project):
    text = (ROOT / "LICENSE").read_text()
    assert project["license"]["text"] == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text


def test_py_typed_is_shipped():
    assert (ROOT / "pycudagraph" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["pycudagraph"]


def test_base_install_allows_both_majors_and_cu12_narrows_every_cuda_package(project):
    base = _reqs(project["dependencies"])
    cu12 = _reqs(project["optional-dependencies"]["cu12"])
    cu13 = _reqs(project["optional-dependencies"]["cu13"])
    cuda = {n for n in base if n.startswith(("cuda", "nvidia"))}
    assert {"cuda-bindings", "cuda-toolkit"} <= cuda
    assert {"nvrtc", "cudart"} <= base["cuda-toolkit"].extras
    for name in cuda:  # no base package the [cu12] extra cannot move to 12.x
        assert base[name].specifier.contains("12.9") and base[name].specifier.contains("13.5"), name
        assert cu12[name].specifier.contains("12.9") and not cu12[name].specifier.contains("13.0"), name
        assert cu13[name].specifier.contains("13.0") and not cu13[name].specifier.contains("12.9"), name
        assert cu12[name].extras == base[name].extras == cu13[name].extras


_HIDE_NVRTC = """
import cuda.pathfinder as pf
def hidden(name, *args, **kwargs):
    raise pf.DynamicLibNotFoundError(f"Failure finding {name}: hidden by the test")
pf.load_nvidia_dynamic_lib = hidden
import pycudagraph as pcg
try:
    pcg.Program('extern "C" __global__ void k() {}').compile(arch="sm_90")
except pcg.CudaNotAvailableError as exc:
    print("ERR", exc)
"""


def test_missing_nvrtc_names_the_package_to_install():
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYCUDAGRAPH_CACHE_DIR="off")
    out = subprocess.run([sys.executable, "-c", _HIDE_NVRTC], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    major = pcg._cuda.BINDINGS_MAJOR
    package = "nvidia-cuda-nvrtc-cu12" if major == 12 else "nvidia-cuda-nvrtc"
    assert out.stdout.startswith("ERR"), out.stdout + out.stderr
    assert "NVRTC library" in out.stdout and f"pip install {package}" in out.stdout


def test_fp16_and_bf16_headers_compile():
    if headers.cuda_include_dir(program.nvrtc_version()[0]) is None:
        pytest.skip("no CUDA runtime headers installed (pip install 'cuda-toolkit[cudart]')")
    src = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void hb(__half* x, __nv_bfloat16* y, __half a, int n) {
    int i = threadIdx.x;
    if (i < n) { x[i] = __hadd(x[i], a); y[i] = __float2bfloat16(__half2float(x[i])); }
}
'''
    mod = pcg.Program(src, name="hb.cu").compile(arch="sm_90")
    assert [(p.name, p.kind, p.size) for p in mod["hb"].params] == [
        ("x", "pointer", 8), ("y", "pointer", 8), ("a", "half", 2), ("n", "int", 4)]


def _fake_headers(base: Path, sub: str, cudart: int) -> Path:
    folder = base.joinpath(*sub.split("/"))
    folder.mkdir(parents=True)
    (folder / "cuda_fp16.h").write_text("")
    (folder / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {cudart}\n")
    return folder


@pytest.mark.parametrize("major, sub", [(13, "nvidia/cu13/include"), (12, "nvidia/cuda_runtime/include")])
def test_header_folder_of_each_major_found_on_sys_path(tmp_path, monkeypatch, major, sub):
    folder = _fake_headers(tmp_path, sub, major * 1000 + 90)
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    monkeypatch.setattr(headers, "_header_dirs", {})
    assert headers.cuda_include_dir(major) == str(folder)


def test_header_folder_of_another_major_is_refused(tmp_path, monkeypatch):
    folder = _fake_headers(tmp_path, "cuda/include", 12090)
    pathfinder = pytest.importorskip("cuda.pathfinder")
    monkeypatch.setattr(headers, "_site_dirs", lambda: [])
    monkeypatch.setattr(headers, "_header_dirs", {})
    monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", lambda name: str(folder))
    assert headers.cuda_include_dir(13) is None
    monkeypatch.setattr(headers, "_header_dirs", {})
    assert headers.cuda_include_dir(12) == str(folder)


def test_arch_given_as_int_is_a_clear_error():
    with pytest.raises(pcg.ArgumentError, match="arch must be a str.*90"):
        pcg.Program('extern "C" __global__ void k() {}').compile(arch=90)
