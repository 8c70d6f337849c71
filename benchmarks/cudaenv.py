"""The CUDA state every peer shares, made with ``cuda.bindings`` only (so a bug in one
library cannot spoil another's numbers): the GPU probe, device facts, the helper kernels
of ``kernels/helpers.cu`` (compiled with NVRTC, nvcc as a fallback) and the ``spin``
kernel that keeps the GPU busy while launches are timed."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from pathlib import Path

from .common import HELPERS_CU, CudaCallError


def c_function(lib, name: str, argtypes: list):
    """``lib.name`` as a ctypes function returning an int (a ``CUresult`` / ``cudaError_t``);
    the profiles call driver and runtime entry points through it (``lib``: a ``ctypes.CDLL``)."""
    f = getattr(lib, name)
    f.restype, f.argtypes = ctypes.c_int, argtypes
    return f


def probe_gpu() -> str | None:
    """``None`` when a CUDA device is usable, else one sentence saying why not."""
    lead = "No benchmark was run: there is no usable NVIDIA GPU on this machine"
    try:
        from cuda.bindings import runtime as rt
    except Exception as exc:  # noqa: BLE001 - any import failure means the same here
        return f"{lead} (cuda.bindings cannot be imported: {exc})."
    try:
        err, count = rt.cudaGetDeviceCount()
    except Exception as exc:  # noqa: BLE001
        return f"{lead} (cudaGetDeviceCount failed: {exc})."
    if int(err) != 0 or not count:
        name = getattr(err, "name", str(err)) if int(err) != 0 else "0 devices"
        return f"{lead} (cudaGetDeviceCount returned {name})."
    return None


def check(res, api: str = ""):
    """Check a ``cuda.bindings`` result tuple; return its value(s)."""
    err = res[0]
    if int(err) != 0:
        raise CudaCallError(f"{api or 'CUDA call'} failed: {getattr(err, 'name', err)}")
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


def compile_cubin(source: str, name: str, arch: str) -> bytes:
    """CUBIN for ``arch`` from NVRTC (``cuda.bindings.nvrtc``), or nvcc as a fallback."""
    try:
        from cuda.bindings import nvrtc
        prog = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                     "nvrtcCreateProgram")
        try:
            opts = [f"--gpu-architecture={arch}".encode()]
            err = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
            if int(err) != 0:
                size = check(nvrtc.nvrtcGetProgramLogSize(prog))
                log = b" " * size
                nvrtc.nvrtcGetProgramLog(prog, log)
                raise CudaCallError(f"NVRTC could not compile {name}: {log.decode(errors='replace')}")
            size = check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            data = b" " * size
            check(nvrtc.nvrtcGetCUBIN(prog, data), "nvrtcGetCUBIN")
            return data
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
    except Exception as first:  # noqa: BLE001 - try nvcc before giving up
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / name, Path(tmp) / "out.cubin"
            src.write_text(source)
            run = subprocess.run([nvcc, "-cubin", f"-arch={arch}", str(src), "-o", str(out)],
                                 capture_output=True, text=True, timeout=300)
            if run.returncode != 0:
                raise CudaCallError(f"NVRTC failed ({first}) and so did nvcc: {run.stderr[-400:]}") from first
            return out.read_bytes()


class RawEnv:
    """Device facts, helper kernels and the spin kernel, through ``cuda.bindings`` only."""

    def __init__(self):
        from cuda.bindings import driver as dr
        from cuda.bindings import runtime as rt
        self.rt, self.dr = rt, dr
        check(rt.cudaSetDevice(0), "cudaSetDevice")
        check(rt.cudaFree(0), "cudaFree")
        props = check(rt.cudaGetDeviceProperties(0), "cudaGetDeviceProperties")
        name = props.name
        name = name.decode(errors="replace") if isinstance(name, (bytes, bytearray)) else str(name)
        self.gpu_name = name.split("\0")[0].strip()
        self.cc = (int(props.major), int(props.minor))
        self.arch = f"sm_{self.cc[0]}{self.cc[1]}"
        self.driver_cuda = check(rt.cudaDriverGetVersion(), "cudaDriverGetVersion")
        self.runtime_cuda = check(rt.cudaRuntimeGetVersion(), "cudaRuntimeGetVersion")
        self.cubin = compile_cubin(HELPERS_CU.read_text(), "helpers.cu", self.arch)
        self.library = check(rt.cudaLibraryLoadData(self.cubin, None, None, 0, None, None, 0),
                             "cudaLibraryLoadData")
        self.kernels = {n: check(rt.cudaLibraryGetKernel(self.library, n.encode()), "cudaLibraryGetKernel")
                        for n in ("empty", "empty3", "args10", "args30", "spin")}
        self._spin_f = dr.CUfunction(int(self.kernels["spin"]))  # a CUkernel works as a CUfunction
        self._ev_spin = check(rt.cudaEventCreateWithFlags(rt.cudaEventDisableTiming))
        self.ev_a = check(rt.cudaEventCreate(), "cudaEventCreate")
        self.ev_b = check(rt.cudaEventCreate(), "cudaEventCreate")
        self.cycles_per_ms = self._calibrate()
        self.expired = 0  # held rounds whose spin kernel ended before the timed calls did

    def _calibrate(self) -> float:
        rt = self.rt
        s = int(check(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking)))
        try:
            cycles = 20_000_000
            self._launch_spin(s, 1000)
            rate = 0.0
            for _ in range(2):
                check(rt.cudaEventRecord(self.ev_a, s))
                self._launch_spin(s, cycles)
                check(rt.cudaEventRecord(self.ev_b, s))
                check(rt.cudaEventSynchronize(self.ev_b))
                ms = check(rt.cudaEventElapsedTime(self.ev_a, self.ev_b))
                rate = cycles / max(ms, 1e-3)
            return rate
        finally:
            rt.cudaStreamDestroy(s)

    def _launch_spin(self, stream: int, cycles: int) -> None:
        res = self.dr.cuLaunchKernel(self._spin_f, 1, 1, 1, 1, 1, 1, 0, stream,
                                     ((int(cycles),), (ctypes.c_ulonglong,)), 0)
        check(res, "cuLaunchKernel(spin)")

    def queue_spin(self, stream: int, ms: float) -> None:
        """Queue a spin kernel of about ``ms`` milliseconds, then an event after it."""
        self._launch_spin(stream, int(self.cycles_per_ms * ms))
        check(self.rt.cudaEventRecord(self._ev_spin, stream), "cudaEventRecord")

    def spin_finished(self) -> bool:
        """True when the last queued spin has already ended (the hold was lost)."""
        return int(self.rt.cudaEventQuery(self._ev_spin)[0]) == 0

    def sync(self, stream: int) -> None:
        check(self.rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def driver_string(self) -> str:
        """The NVIDIA driver release from nvidia-smi, or '' when it cannot be read."""
        smi = shutil.which("nvidia-smi")
        if not smi:
            return ""
        try:
            run = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            return run.stdout.strip().splitlines()[0] if run.returncode == 0 and run.stdout.strip() else ""
        except Exception:  # noqa: BLE001
            return ""
