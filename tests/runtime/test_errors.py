"""Error formatting, pickling, version gating, and no CUDA work at import (CPU)."""

import pickle
import subprocess
import sys

import pytest

import pycudagraph as pcg
from pycudagraph import _cuda
from pycudagraph._cuda import nvrtc, rt


def test_runtime_error_text():
    err = _cuda.error_for("cudaGraphInstantiate", rt.cudaError_t.cudaErrorInvalidValue)
    assert str(err) == "cudaGraphInstantiate failed: cudaErrorInvalidValue (invalid argument)"
    assert (err.api, err.code, err.name) == ("cudaGraphInstantiate", 1, "cudaErrorInvalidValue")


def test_driver_error_name_without_driver():
    err = _cuda.error_for("cuGraphLaunch", 400)
    assert err.name == "CUDA_ERROR_INVALID_HANDLE" and "cuGraphLaunch failed" in str(err)


def test_nvrtc_error_text():
    err = _cuda.error_for("nvrtcCompileProgram", nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_OPTION)
    assert err.name == "NVRTC_ERROR_INVALID_OPTION"


def test_call_raises_and_returns():
    assert _cuda.call(lambda: (rt.cudaError_t.cudaSuccess, 5)) == 5
    assert _cuda.call(lambda: (rt.cudaError_t.cudaSuccess,)) is None
    assert _cuda.call(lambda: (rt.cudaError_t.cudaSuccess, 1, 2)) == (1, 2)

    def cudaFake():
        return (rt.cudaError_t.cudaErrorMemoryAllocation, None)

    with pytest.raises(pcg.CudaError, match=r"cudaFake failed: cudaErrorMemoryAllocation"):
        _cuda.call(cudaFake)


def test_not_available_class():
    err = _cuda.error_for("cudaGetDeviceCount", rt.cudaError_t.cudaErrorInsufficientDriver)
    assert isinstance(err, pcg.CudaNotAvailableError)


@pytest.mark.parametrize("exc", [
    pcg.CudaError("cudaX", 1, "cudaErrorInvalidValue", "invalid argument", "hint"),
    pcg.CompileError("k.cu", "k.cu(1): error", ("-O3",)),
    pcg.CaptureError("broken", "cudaMemcpy"),
    pcg.NotSupportedError("conditional nodes", "12.3", "12.0"),
    pcg.GraphExecUpdateError("cudaGraphExecUpdate", 910, "cudaErrorGraphExecUpdateFailure", "x", "", "topology changed"),
])
def test_exceptions_pickle(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc)


def test_version_gating_message(monkeypatch):
    monkeypatch.setattr(_cuda.versions, "driver_version", lambda: 12020)
    with pytest.raises(pcg.NotSupportedError, match=r"if-else nodes needs CUDA 12.8 or newer; this system has a CUDA 12.2 driver"):
        _cuda.require("if-else nodes", 12080)


def test_bindings_version_parsed():
    assert _cuda.BINDINGS_MAJOR in (12, 13) and _cuda.BINDINGS_VERSION >= (12, 4)


def test_import_makes_no_cuda_call():
    code = ("import sys; import pycudagraph; from pycudagraph import _cuda; "
            "assert not _cuda.context._process['checked']; assert _cuda.fast._f.launch is None; print('clean')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and "clean" in out.stdout, out.stderr


def test_legacy_stream_refused_for_capture():
    s = pcg.Stream.wrap(0)
    with pytest.raises(pcg.ArgumentError, match="legacy default stream"):
        s.require_capturable()


def test_stream_wrap_protocols():
    class CuPyLike:
        ptr = 0x1234

    class TorchLike:
        cuda_stream = 0x5678

    class CoreLike:
        def __cuda_stream__(self):
            return (0, 0x9abc)

    assert pcg.Stream.wrap(CuPyLike()).ptr == 0x1234
    assert pcg.Stream.wrap(TorchLike()).ptr == 0x5678
    assert pcg.Stream.wrap(CoreLike()).ptr == 0x9abc
    assert pcg.Stream.wrap(77).ptr == 77
    with pytest.raises(TypeError, match="cannot use str as a CUDA stream"):
        pcg.Stream.wrap("stream")


def test_device_pointer_forms():
    class CAI:
        __cuda_array_interface__ = {"data": (0xABC, False), "shape": (2,), "typestr": "<f4", "version": 3}

    assert pcg.device_pointer(5) == 5
    assert pcg.device_pointer(CAI()) == 0xABC
    with pytest.raises(TypeError, match="host memory"):
        import numpy as np
        pcg.device_pointer(np.zeros(2))


def test_finalizers_do_nothing_without_cuda():
    from pycudagraph._lifetime import release

    class Owner:
        pass

    calls = []
    o = Owner()
    fin = release(o, lambda h: calls.append(h) or 1 / 0, 42)
    fin()  # the destroy function raised; release swallowed it
    assert calls == [42] and not fin.alive


def test_render_without_graphviz_names_the_package(monkeypatch, tmp_path):
    from pycudagraph.inspect import dot
    monkeypatch.setattr(dot.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="install the graphviz package"):
        dot.render("digraph g {}", tmp_path / "g.svg")
    assert dot.svg_or_none("digraph g {}") is None
    with pytest.raises(ValueError, match="svg, png and pdf"):
        dot.render("digraph g {}", tmp_path / "g.gif")
