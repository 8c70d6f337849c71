"""NVRTC compilation, the CUBIN cache and kernel lookup (CPU: an explicit arch needs no GPU)."""

import pytest

import pycudagraph as pcg
from pycudagraph.compile.program import kernels_dir

GOOD = 'extern "C" __global__ void scale(float* y, float a, int n) { int i = threadIdx.x; if (i < n) y[i] *= a; }'


def test_compile_cubin_without_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(tmp_path))
    mod = pcg.Program(GOOD, name="scale.cu").compile(arch="sm_90")
    assert mod.cubin[:4] == b"\x7fELF"
    assert mod.kernel_names() == ["scale"]
    assert [p.name for p in mod["scale"].params] == ["y", "a", "n"]
    assert len(list(tmp_path.glob("*.cubin"))) == 1
    again = pcg.Program(GOOD, name="scale.cu").compile(arch="sm_90")
    assert again.cubin == mod.cubin


def test_cache_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", "off")
    pcg.Program(GOOD, name="x.cu").compile(arch="sm_80")
    assert not list(tmp_path.glob("*"))


def test_compile_error_carries_log_and_options():
    src = 'extern "C" __global__ void broken(int* x) { x[0] = ; }'
    with pytest.raises(pcg.CompileError) as info:
        pcg.Program(src, name="broken.cu", options=("-std=c++17",)).compile(arch="sm_90")
    err = info.value
    assert "broken.cu(1): error: expected an expression" in err.log
    assert "expected an expression" in str(err)
    assert "-std=c++17" in err.options and "--gpu-architecture=sm_90" in err.options
    assert err.name == "broken.cu"


def test_bad_option_is_reported():
    with pytest.raises((pcg.CompileError, pcg.CudaError)):
        pcg.Program(GOOD, options=("--no-such-option",)).compile(arch="sm_90")


@pytest.mark.parametrize("arch", ["compute_90", "90", "sm_x"])
def test_bad_arch(arch):
    with pytest.raises(ValueError, match="arch"):
        pcg.Program(GOOD).compile(arch=arch)


def test_unknown_kernel_name():
    mod = pcg.Program(GOOD).compile(arch="sm_90")
    with pytest.raises(pcg.ArgumentError, match="no kernel named 'nope'.*scale"):
        mod.get_kernel("nope")


def test_mangled_kernel_refused():
    mod = pcg.Program("__global__ void cpp(int x) {}").compile(arch="sm_90")
    with pytest.raises(pcg.ArgumentError, match='not extern "C"'):
        mod.get_kernel("cpp")


def test_signature_override():
    mod = pcg.Program(GOOD).compile(arch="sm_90")
    k = mod.get_kernel("scale", signature="float*, float, int")
    assert [p.ctype for p in k.params] == ["float*", "float", "int"]


def test_shipped_kernels_compile():
    names = sorted(p.name for p in kernels_dir().glob("*.cu"))
    assert {"helpers.cu", "mlp.cu", "jacobi.cu"} <= set(names)
    for name in names:
        mod = pcg.Module.from_file(name, arch="sm_90")
        assert mod.kernel_names(), name


def test_from_file_missing():
    with pytest.raises(FileNotFoundError, match="no CUDA source"):
        pcg.Module.from_file("does_not_exist.cu", arch="sm_90")
