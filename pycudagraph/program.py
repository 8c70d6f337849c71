"""NVRTC compilation and module loading: :class:`Program` -> :class:`Module` (kernels in :mod:`.kernel`).

``Program.compile()`` asks NVRTC for a CUBIN (machine code for one architecture, not
PTX: PTX from a newer NVRTC does not load on an older driver). CUBINs are cached on
disk, keyed by source, options, architecture, name and NVRTC version, in
``$PYCUDAGRAPH_CACHE_DIR`` (default ``~/.cache/pycudagraph``; set it to ``off`` to
disable). A :class:`Module` is loaded onto the device at first use with
``cudaLibraryLoadData``; kernels come from ``cudaLibraryGetKernel``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from . import _cuda
from ._cuda import call, nvrtc, rt
from ._lifetime import release
from .errors import ArgumentError, CompileError, CudaError
from .device_api import with_device_api
from .kernel import Kernel
from .signature import KernelSignature, parse_kernels, parse_params

__all__ = ["Program", "Module", "device_arch", "kernels_dir"]

def kernels_dir() -> Path:
    """The folder of ``.cu`` files shipped with pycudagraph.

    Inside an installed wheel it is ``pycudagraph/kernels``; in a source checkout
    (editable install or ``PYTHONPATH``) the repository's ``kernels/``.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if candidate.is_dir():
            return candidate
    return here / "kernels"


def device_arch(device: int | None = None) -> str:
    """``"sm_XY"`` of a device (``cudaDeviceGetAttribute`` for the compute capability)."""
    dev = _cuda.ensure_device() if device is None else device
    major = call(rt.cudaDeviceGetAttribute, rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, dev)
    minor = call(rt.cudaDeviceGetAttribute, rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, dev)
    return f"sm_{major}{minor}"


def _cache_dir() -> Path | None:
    value = os.environ.get("PYCUDAGRAPH_CACHE_DIR", "")
    if value.lower() in ("off", "0", "none", "false"):
        return None
    return Path(value) if value else Path.home() / ".cache" / "pycudagraph"


class Program:
    """CUDA C++ source to be compiled by NVRTC.

    Parameters
    ----------
    source : str
        The CUDA C++ source. Kernels meant to be found by name are ``extern "C"``.
    name : str
        File name NVRTC reports in its log.
    options : sequence of str
        NVRTC options, e.g. ``("-std=c++17", "--use_fast_math")``. The architecture
        is added by :meth:`compile`.
    """

    def __init__(self, source: str, name: str = "kernel.cu", options=()):
        if not isinstance(source, str):
            raise TypeError(f"Program source must be a str, got {type(source).__name__}")
        if isinstance(options, str):
            options = (options,)
        self.source = source
        self.name = name
        self.options = tuple(str(o) for o in options)

    def compile(self, arch: str | None = None) -> "Module":
        """Compile to a CUBIN and return the :class:`Module`.

        Parameters
        ----------
        arch : str, optional
            ``"sm_90"`` etc. Defaults to the current device's architecture; an explicit
            value works with no GPU (the module loads on a device at first use).

        Notes
        -----
        Calls ``nvrtcCreateProgram``, ``nvrtcCompileProgram``, ``nvrtcGetCUBIN`` and
        ``nvrtcDestroyProgram``; :class:`CompileError` carries the NVRTC log.
        """
        arch = arch or device_arch()
        if not arch.startswith(("sm_", "compute_")) or not arch.split("_")[1][:2].isdigit():
            raise ValueError(f"arch must look like 'sm_90', got {arch!r}")
        if arch.startswith("compute_"):
            raise ValueError("pycudagraph compiles CUBIN; give a real architecture such as 'sm_90'")
        options = self.options + (f"--gpu-architecture={arch}",)
        # declares cudaGraphSetConditional & co. when the source calls them (device_api)
        source = with_device_api(self.source, self.name, options)
        cubin = _cached_cubin(source, self.name, options)
        return Module(cubin, self.source, name=self.name, arch=arch, options=options)


def _cache_key(source: str, name: str, options: tuple) -> str:
    ver = _cuda.nvrtc_version()
    h = hashlib.sha256()
    for part in (source, name, "\0".join(options), f"nvrtc{ver[0]}.{ver[1]}"):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


def _cached_cubin(source: str, name: str, options: tuple) -> bytes:
    folder = _cache_dir()
    path = None
    if folder is not None:
        path = folder / (_cache_key(source, name, options) + ".cubin")
        try:
            return path.read_bytes()
        except OSError:
            pass
    cubin = _nvrtc_compile(source, name, options)
    if path is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(cubin)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache folder only costs the next compile
    return cubin


def _nvrtc_compile(source: str, name: str, options: tuple) -> bytes:
    prog = call(nvrtc.nvrtcCreateProgram, source.encode(), name.encode(), 0, [], [])
    try:
        err = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])[0]
        if _cuda.check.tracer is not None:
            _cuda.check.tracer("nvrtcCompileProgram", (prog, len(options), list(options)), (err,))
        if err:
            log = _program_log(prog)
            if err == nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION or log.strip():
                raise CompileError(name, log, options)
            raise _cuda.error_for("nvrtcCompileProgram", err)
        size = call(nvrtc.nvrtcGetCUBINSize, prog)
        data = b" " * size
        call(nvrtc.nvrtcGetCUBIN, prog, data)
        return data
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _program_log(prog) -> str:
    size = call(nvrtc.nvrtcGetProgramLogSize, prog)
    log = b" " * size
    call(nvrtc.nvrtcGetProgramLog, prog, log)
    return log.rstrip(b"\0 ").decode(errors="replace")


class Module:
    """Compiled device code: a CUBIN and the kernel signatures parsed from its source.

    The CUBIN is loaded with ``cudaLibraryLoadData`` at first use (:attr:`handle`)
    and unloaded with ``cudaLibraryUnload`` when the module and all its kernels are gone.
    """

    def __init__(self, cubin: bytes, source: str = "", name: str = "kernel.cu",
                 arch: str = "", options: tuple = ()):
        self.cubin = bytes(cubin)
        self.source = source
        self.name = name
        self.arch = arch
        self.options = tuple(options)
        self.signatures: dict[str, KernelSignature] = parse_kernels(source) if source else {}
        self._library = None
        self._kernels: dict[str, Kernel] = {}
        self._lock = threading.Lock()
        self._fin = None

    @classmethod
    def from_file(cls, path, options=(), arch: str | None = None) -> "Module":
        """Compile a ``.cu`` file; a bare name is looked up in the package's ``kernels/``."""
        p = Path(path)
        if not p.exists():
            shipped = kernels_dir() / p.name
            if p.parent in (Path("."), Path("kernels")) and shipped.exists():
                p = shipped
            else:
                raise FileNotFoundError(f"no CUDA source at {path!s} (nor {p.name} in {kernels_dir()})")
        return Program(p.read_text(), name=p.name, options=options).compile(arch)

    @property
    def handle(self):
        """The raw ``cudaLibrary_t``, loading the CUBIN on first use."""
        if self._library is None:
            with self._lock:
                if self._library is None:
                    _cuda.ensure_device()
                    try:
                        lib = call(rt.cudaLibraryLoadData, self.cubin, None, None, 0, None, None, 0)
                    except CudaError as exc:
                        raise self._with_arch_hint(exc)
                    self._fin = release(self, rt.cudaLibraryUnload, lib)
                    self._library = lib
        return self._library

    def _with_arch_hint(self, exc: CudaError) -> CudaError:
        """Say which architecture the CUBIN is for when the device cannot run it."""
        if exc.name in ("cudaErrorNoKernelImageForDevice", "cudaErrorInvalidSource",
                        "cudaErrorInvalidKernelImage"):
            exc.hint = (f"the module was compiled for {self.arch or 'an unknown arch'}; this "
                        f"device is {device_arch()}: compile with arch=None for the current device")
            exc.args = (exc._text(),)
        return exc

    def kernel_names(self) -> list[str]:
        """Names of the ``extern "C"`` kernels found in the source."""
        return [n for n, s in self.signatures.items() if s.extern_c]

    def get_kernel(self, name: str, signature: str | None = None) -> Kernel:
        """The kernel called ``name`` (``cudaLibraryGetKernel``).

        Parameters
        ----------
        name : str
            An ``extern "C"`` kernel name.
        signature : str, optional
            Its parameter list (``"float*, float, int"``) when the source does not give
            it (a module from a CUBIN alone) or to override the parsed one.
        """
        key = (name, signature)
        kern = self._kernels.get(key)
        if kern is None:
            if signature is not None:
                params = parse_params(signature)
            elif name in self.signatures:
                sig = self.signatures[name]
                if not sig.extern_c:
                    raise ArgumentError(f"kernel {name!r} is not extern \"C\": its compiled name is "
                                        "mangled; declare it extern \"C\" to get it by name")
                params = sig.params
            else:
                known = ", ".join(self.kernel_names()) or "none"
                raise ArgumentError(f"no kernel named {name!r} in {self.name} (extern \"C\" kernels: "
                                    f"{known}); give signature= for kernels not in the source")
            kern = Kernel(self, name, params)
            self._kernels[key] = kern
        return kern

    __getitem__ = get_kernel

    def __repr__(self) -> str:
        return f"<pycudagraph.Module {self.name} arch={self.arch} kernels={self.kernel_names()}>"
