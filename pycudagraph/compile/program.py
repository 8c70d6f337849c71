"""NVRTC compilation and module loading: :class:`Program` -> :class:`Module` (kernels in :mod:`.kernel`).

``Program.compile()`` asks NVRTC for a CUBIN (machine code for one architecture, not
PTX: PTX from a newer NVRTC does not load on an older driver) and keeps the PTX NVRTC
made on the way: its ``.entry`` lines are the compiled truth about which kernels exist
and what their parameters are (:mod:`.ptx`, :mod:`.reconcile`). Both are cached on
disk (:mod:`.compile_cache`). The folder of the pip-installed CUDA headers is added as
the last ``-I`` so ``#include <cuda_fp16.h>`` works (:mod:`.headers`). A
:class:`Module` is loaded onto the device at first use with ``cudaLibraryLoadData``;
kernels come from ``cudaLibraryGetKernel``.
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

from .. import _cuda

from . import cache as compile_cache
from .._cuda import call, nvrtc, rt
from .._lifetime import release
from ..errors import ArgumentError, CompileError, CudaError, CudaNotAvailableError
from .device_api import with_device_api
from .headers import cuda_include_dir
from .kernel import Kernel
from .ptx import CompiledParam, cubin_entries, is_elf, ptx_entries
from .reconcile import SignatureWarning, from_unreadable, reconcile
from .signature import KernelSignature, kernel_candidates, parse_params
from ..runtime.values import path_arg, seq_arg, short_repr, str_arg

__all__ = ["Program", "Module", "device_arch", "kernels_dir", "nvrtc_version"]


def kernels_dir() -> Path:
    """The folder of ``.cu`` files shipped with pycudagraph.

    Inside an installed wheel it is ``pycudagraph/kernels``; in a source checkout
    (editable install or ``PYTHONPATH``) the repository's ``kernels/``.
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "kernels", package.parent / "kernels"):
        if candidate.is_dir():
            return candidate
    return package / "kernels"


def device_arch(device: int | None = None) -> str:
    """``"sm_XY"`` of a device (``cudaDeviceGetAttribute`` for the compute capability)."""
    dev = _cuda.ensure_device() if device is None else device
    major = call(rt.cudaDeviceGetAttribute, rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, dev)
    minor = call(rt.cudaDeviceGetAttribute, rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, dev)
    return f"sm_{major}{minor}"


_NVRTC_PACKAGES = {12: 'nvidia-cuda-nvrtc-cu12 (or: pip install "pycudagraph[cu12]")',
                   13: 'nvidia-cuda-nvrtc (or: pip install "cuda-toolkit[nvrtc]==13.*")'}


def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor) (``nvrtcVersion``).

    Raises
    ------
    CudaNotAvailableError
        When the NVRTC library cannot be loaded; the message names the pip package
        that provides it for the installed cuda-bindings.
    """
    try:
        return _cuda.nvrtc_version()
    except CudaError:
        raise
    except Exception as exc:  # cuda-bindings could not load libnvrtc
        major = _cuda.BINDINGS_MAJOR
        package = _NVRTC_PACKAGES.get(major, f"the NVRTC {major}.x package")
        raise CudaNotAvailableError(
            "nvrtcVersion", 0, "NVRTC_LIBRARY_NOT_FOUND",
            f"cuda-bindings {major}.x could not load the NVRTC library ({exc})",
            f"install NVRTC {major}.x: pip install {package}") from exc


def _check_arch(arch) -> str:
    if arch is None:
        try:
            return device_arch()
        except CudaNotAvailableError as exc:
            raise exc.set_hint("compile() with no arch= asks the GPU for its architecture; "
                               "compile(arch=\"sm_90\") works without one (the module loads "
                               "on a GPU at first use)") from None
    if not isinstance(arch, str):
        raise ArgumentError(f"arch must be a str such as 'sm_90', got {arch!r} ({type(arch).__name__})")
    if arch.startswith("compute_"):
        raise ArgumentError(f"arch {arch!r}: pycudagraph compiles CUBIN; give a real "
                            "architecture such as 'sm_90'")
    digits = arch[3:].rstrip("afAF")
    if not arch.startswith("sm_") or not digits.isdigit() or len(digits) < 2:
        raise ArgumentError(f"arch must look like 'sm_90' (or 'sm_90a'), got {arch!r}")
    return arch


class Program:
    """CUDA C++ source to be compiled by NVRTC.

    Parameters
    ----------
    source : str
        The CUDA C++ source. Kernels meant to be found by name are ``extern "C"``.
    name : str
        File name NVRTC reports in its log; quoted includes resolve from its folder.
    options : sequence of str
        NVRTC options, e.g. ``("-std=c++17", "--use_fast_math", "-Iinclude")``. The
        architecture is added by :meth:`compile`, and the folder of the pip-installed
        CUDA headers (``cuda_fp16.h``, ``cuda_bf16.h``) as the last ``-I``.

    Notes
    -----
    No CUDA call until :meth:`compile` (``nvrtcCompileProgram``).
    """

    def __init__(self, source: str, name: str = "kernel.cu", options=()):
        if not isinstance(source, str):
            raise ArgumentError(f"Program source must be a str, got {type(source).__name__}")
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"Program name must be a non-empty str, got {name!r}")
        if isinstance(options, str):
            options = (options,)
        options = seq_arg(options, "Program options")
        for o in options:
            if not isinstance(o, str):
                raise ArgumentError(f"Program options must be str, got {short_repr(o)} "
                                    f"({type(o).__name__}) in {short_repr(options)}")
        self.source = source
        self.name = name
        self.options = options

    def compile(self, arch: str | None = None) -> "Module":
        """Compile to a CUBIN and return the :class:`Module`.

        Parameters
        ----------
        arch : str, optional
            ``"sm_90"`` etc. Defaults to the current device's architecture; an explicit
            value works with no GPU (the module loads on a device at first use).

        Notes
        -----
        Calls ``nvrtcCreateProgram``, ``nvrtcCompileProgram``, ``nvrtcGetCUBIN``,
        ``nvrtcGetPTX`` and ``nvrtcDestroyProgram`` (nothing on a cache hit);
        :class:`CompileError` carries the NVRTC log.
        """
        arch = _check_arch(arch)
        version = nvrtc_version()
        options = self.options + (f"--gpu-architecture={arch}",)
        headers = cuda_include_dir(version[0])
        added = (f"-I{headers}",) if headers else ()
        options += added
        # declares cudaGraphSetConditional & co. when the source calls them (device_api)
        source = with_device_api(self.source, self.name, options)
        try:
            entry = _cached_compile(source, self.name, options, version)
        except CompileError as exc:  # the message shows the options given, not our -I
            if not added:
                raise
            raise CompileError(exc.name, exc.log, options, added=added) from None
        return Module(entry.cubin, self.source, name=self.name, arch=arch, options=options,
                      ptx=entry.ptx)


def _cached_compile(source: str, name: str, options: tuple, version) -> compile_cache.CacheEntry:
    folder = compile_cache.cache_dir()
    path = None
    key = compile_cache.cache_key(source, name, options, version) if folder is not None else None
    if key is not None:
        path = folder / (key + ".cubin")
        hit = compile_cache.load(path)
        if hit is not None:
            return hit
    entry = _nvrtc_compile(source, name, options)
    if path is not None:
        compile_cache.store(path, entry)
    return entry


def _nvrtc_compile(source: str, name: str, options: tuple) -> compile_cache.CacheEntry:
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
        cubin = b" " * size
        call(nvrtc.nvrtcGetCUBIN, prog, cubin)
        ptx = ""
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        if not err and size > 1:  # some option sets (-dlto) leave no PTX: the CUBIN is read instead
            data = b" " * size
            call(nvrtc.nvrtcGetPTX, prog, data)
            ptx = data.rstrip(b"\0").decode(errors="replace")
        return compile_cache.CacheEntry(cubin, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _program_log(prog) -> str:
    size = call(nvrtc.nvrtcGetProgramLogSize, prog)
    log = b" " * size
    call(nvrtc.nvrtcGetProgramLog, prog, log)
    return log.rstrip(b"\0 ").decode(errors="replace")


class Module:
    """Compiled device code: a CUBIN, the kernels it holds and their signatures.

    The kernel list and the parameter sizes come from what NVRTC compiled (the PTX
    ``.entry`` lines, or the CUBIN's parameter records); the source gives parameter
    names and pointer-or-integer intent where it agrees with them.
    The CUBIN is loaded with ``cudaLibraryLoadData`` at first use (:attr:`handle`)
    and unloaded with ``cudaLibraryUnload`` when the module and all its kernels are gone.

    Attributes
    ----------
    entries : dict
        Compiled kernel name (mangled for non-``extern "C"`` kernels) -> its
        :class:`~pycudagraph.compile.ptx.CompiledParam` tuple; empty when unknown.
    signatures : dict
        What the source parse read, by kernel name.
    """

    def __init__(self, cubin: bytes, source: str = "", name: str = "kernel.cu",
                 arch: str = "", options: tuple = (), ptx: str = ""):
        if not isinstance(cubin, (bytes, bytearray, memoryview)):
            raise ArgumentError(f"Module: cubin must be bytes (a CUBIN, PTX or fatbin image), "
                                f"got {short_repr(cubin)} ({type(cubin).__name__})")
        for what, value in (("source", source), ("name", name), ("arch", arch), ("ptx", ptx)):
            str_arg(value, f"Module: {what}")
        self.cubin = bytes(cubin)
        self.source = source
        self.name = name
        self.arch = arch
        self.options = seq_arg(options, "Module: options")
        self._candidates = kernel_candidates(source) if source else {}
        self.signatures: dict[str, KernelSignature] = {n: c[-1] for n, c in self._candidates.items()}
        self.entries: dict[str, tuple[CompiledParam, ...]] = (
            ptx_entries(ptx) if ptx else cubin_entries(self.cubin) if is_elf(self.cubin) else {})
        self._library = None
        self._kernels: dict[str, Kernel] = {}
        self._lock = threading.Lock()
        self._fin = None

    @classmethod
    def from_file(cls, path, options=(), arch: str | None = None) -> "Module":
        """Compile a ``.cu`` file; a bare name is looked up in the package's ``kernels/``.

        The file's path is the program name, so quoted includes resolve next to it.
        Compiles as :meth:`Program.compile` does (``nvrtcCompileProgram``, unless the
        compile cache has the result).
        """
        p = Path(path_arg(path, "Module.from_file: path"))
        if not p.exists():
            shipped = kernels_dir() / p.name
            if p.parent in (Path("."), Path("kernels")) and shipped.exists():
                p = shipped
            else:
                raise FileNotFoundError(f"no CUDA source at {path!s} (nor {p.name} in {kernels_dir()})")
        return Program(p.read_text(), name=str(p), options=options).compile(arch)

    @property
    def handle(self):
        """The raw ``cudaLibrary_t``, loading the CUBIN on first use (``cudaLibraryLoadData``)."""
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
        """Names of the ``extern "C"`` kernels NVRTC compiled (the source's when unknown).
        No CUDA call."""
        if self.entries:
            return [n for n in self.entries if not n.startswith("_Z")]
        return [n for n, s in self.signatures.items() if s.extern_c]

    def get_kernel(self, name: str, signature: str | None = None) -> Kernel:
        """The kernel called ``name`` (``cudaLibraryGetKernel``).

        Parameters
        ----------
        name : str
            An ``extern "C"`` kernel name.
        signature : str, optional
            Its parameter list (``"float*, float, int"``) when the source does not give
            it (a module from a CUBIN alone, a kernel made by a macro) or to override
            the parsed one; checked against the compiled parameters by
            :attr:`Kernel.layout <pycudagraph.compile.kernel.Kernel.layout>` (no GPU needed).

        Raises
        ------
        ArgumentError
            No such compiled kernel, a C++-mangled one, or a source parameter list that
            cannot be read.

        Warns
        -----
        SignatureWarning
            When the source parse disagrees with the compiled kernel (the compiled
            types are used).
        """
        if not isinstance(name, str):
            raise ArgumentError(f"kernel name must be a str, got {type(name).__name__}")
        if signature is not None and not isinstance(signature, str):
            raise ArgumentError(f"{name}: signature= must be a str such as \"float* y, int n\", "
                                f"got {short_repr(signature)} ({type(signature).__name__})")
        key = (name, signature)
        kern = self._kernels.get(key)
        if kern is None:
            kern = Kernel(self, name, self._params(name, signature))
            self._kernels[key] = kern
        return kern

    def _params(self, name: str, signature: str | None):
        compiled = self.entries.get(name)
        known = signature is not None or name in self.signatures
        if compiled is None and (self.entries or not known):
            self._no_such_kernel(name, signature)
        if signature is not None:
            try:
                params = parse_params(signature)
            except ValueError as exc:
                raise ArgumentError(f"{name}: signature={signature!r}: {exc}") from None
            return params  # checked against the compiled kernel by Kernel.layout
        sig = self.signatures.get(name)
        if compiled is None:  # no compiled facts (a CUBIN we cannot read): the source alone
            if not sig.extern_c:
                self._no_such_kernel(name)
            if sig.error:
                raise ArgumentError(f"{name}: cannot read its parameters from the source: "
                                    f"{sig.error}; pass signature=")
            return sig.params
        candidates = self._candidates.get(name, [])
        if candidates and all(c.error for c in candidates):  # sizes from the compiled kernel
            params, notes = from_unreadable(name, candidates[-1], compiled)
        else:
            params, notes = reconcile(name, candidates, compiled)
        for note in notes:
            warnings.warn(note, SignatureWarning, stacklevel=4)
        return params

    def _no_such_kernel(self, name: str, signature: str | None = None):
        known = ", ".join(self.kernel_names()) or "none"
        mangled = [n for n in self.entries if n.startswith("_Z") and f"{len(name)}{name}" in n]
        sig = self.signatures.get(name)
        if mangled or (sig is not None and not sig.extern_c):
            raise ArgumentError(f"kernel {name!r} is not extern \"C\": its compiled name is "
                                f"mangled ({', '.join(mangled) or 'C++'}); declare it extern \"C\" "
                                "to get it by name")
        if sig is not None:
            raise ArgumentError(f"kernel {name!r} appears in the source of {self.name} but NVRTC "
                                "did not compile it (an #if branch that is off?); compiled "
                                f"extern \"C\" kernels: {known}")
        if signature is not None or self.entries:
            raise ArgumentError(f"no kernel named {name!r} in {self.name}: the compiled image "
                                f"has none (extern \"C\" kernels: {known})")
        raise ArgumentError(f"no kernel named {name!r} in {self.name} (extern \"C\" kernels: "
                            f"{known}); give signature= for kernels not in the source")

    __getitem__ = get_kernel

    def __repr__(self) -> str:
        return f"<pycudagraph.Module {self.name} arch={self.arch} kernels={self.kernel_names()}>"
