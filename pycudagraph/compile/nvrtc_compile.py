"""NVRTC: its version, the device's architecture, and one compile of a program to CUBIN.

:func:`cached_compile` asks NVRTC for a CUBIN and the PTX it made on the way (and, for
C++ name expressions such as ``"ns::axpy<float>"``, the lowered name of each:
``nvrtcAddNameExpression`` before the compile, ``nvrtcGetLoweredName`` after it), through
the on-disk cache (:mod:`.cache`).
"""

from __future__ import annotations

from pathlib import Path

from .. import _cuda

from . import cache as compile_cache
from .._cuda import call, nvrtc, rt
from ..errors import ArgumentError, CompileError, CudaError, CudaNotAvailableError

__all__ = ["kernels_dir", "device_arch", "nvrtc_version", "check_arch", "cached_compile"]


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


def check_arch(arch) -> str:
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


def cached_compile(source: str, name: str, options: tuple, version,
                   name_expressions: tuple = (), added: tuple = ()) -> compile_cache.CacheEntry:
    """One NVRTC compile (or its cached result): CUBIN, PTX and lowered names. ``added``:
    the options pycudagraph added (a :class:`CompileError` leaves them out of its message).

    Calls ``nvrtcCreateProgram``, ``nvrtcAddNameExpression`` (one per name expression),
    ``nvrtcCompileProgram``, ``nvrtcGetCUBIN``, ``nvrtcGetPTX``, ``nvrtcGetLoweredName``
    and ``nvrtcDestroyProgram``; nothing on a cache hit.
    """
    folder = compile_cache.cache_dir()
    path = None
    key = (compile_cache.cache_key(source, name, options, version, name_expressions)
           if folder is not None else None)
    if key is not None:  # None: an #include the cache key cannot follow
        path = folder / (key + ".cubin")
        hit = compile_cache.load(path)
        if hit is not None and set(hit.lowered) >= set(name_expressions):
            return hit
    entry = _nvrtc_compile(source, name, options, name_expressions, added)
    if path is not None:
        compile_cache.store(path, entry)
    return entry


def _nvrtc_compile(source: str, name: str, options: tuple, name_expressions: tuple,
                   added: tuple = ()) -> compile_cache.CacheEntry:
    prog = call(nvrtc.nvrtcCreateProgram, source.encode(), name.encode(), 0, [], [])
    try:
        for expr in name_expressions:
            call(nvrtc.nvrtcAddNameExpression, prog, expr.encode())
        err = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])[0]
        if _cuda.check.tracer is not None:
            _cuda.check.tracer("nvrtcCompileProgram", (prog, len(options), list(options)), (err,))
        if err:
            log = _program_log(prog)
            if err == nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION or log.strip():
                raise CompileError(name, log, options, added=added)
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
        lowered = {}
        for expr in name_expressions:
            low = call(nvrtc.nvrtcGetLoweredName, prog, expr.encode())
            lowered[expr] = low.decode() if isinstance(low, bytes) else str(low)
        return compile_cache.CacheEntry(cubin, ptx, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _program_log(prog) -> str:
    size = call(nvrtc.nvrtcGetProgramLogSize, prog)
    log = b" " * size
    call(nvrtc.nvrtcGetProgramLog, prog, log)
    return log.rstrip(b"\0 ").decode(errors="replace")
