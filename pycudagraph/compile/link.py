"""Linking relocatable device code into one CUBIN with nvJitLink.

``pcg.Program(src, options=("-rdc=true",)).compile(arch)`` gives relocatable device code
(kernels may call ``extern __device__`` functions of other programs, or device-runtime
functions defined in ``libcudadevrt.a``). :func:`link` joins such modules, and by default
the device runtime library, into one loadable :class:`~pycudagraph.Module`::

    a = pcg.Program(src_a, options=("-rdc=true",)).compile()
    b = pcg.Program(src_b, options=("-rdc=true",)).compile()
    mod = pcg.link.link(a, b)              # nvJitLink + libcudadevrt.a

The device graph API (``cudaGraphSetConditional``, device ``cudaGraphLaunch``, ...) does
not need this: the driver defines those functions (see :mod:`pycudagraph.compile.device_api`).

Pieces and where they come from, with no CUDA toolkit installed:

================== ============================================ ==========================
piece              pip package (CUDA 13 / CUDA 12)              found by
================== ============================================ ==========================
nvJitLink          ``nvidia-nvjitlink`` / ``nvidia-nvjitlink-cu12`` ``cuda.bindings.nvjitlink``
``libcudadevrt.a`` ``nvidia-cuda-runtime`` /                    ``cuda.pathfinder``, then
                   ``nvidia-cuda-runtime-cu12``                 ``$CUDA_HOME/lib64``
================== ============================================ ==========================
"""

from __future__ import annotations

import os
from pathlib import Path

from .._cuda import check, versions
from ..errors import ArgumentError, PyCudaGraphError
from ..runtime.values import bool_arg
from .program import Module, device_arch

__all__ = ["LinkError", "link", "find_device_runtime"]

_PIP_SUFFIX = "" if versions.BINDINGS_MAJOR >= 13 else "-cu12"


class LinkError(PyCudaGraphError):
    """Linking failed, or a piece it needs (nvJitLink, ``libcudadevrt.a``) is missing.

    ``log`` holds nvJitLink's error log when there is one.
    """

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(message + (f"\n{log}" if log else ""))


def find_device_runtime() -> str:
    """The path of ``libcudadevrt.a`` (``cuda.pathfinder.locate_static_lib``, then
    ``$CUDA_HOME``/``$CUDA_PATH``/``/usr/local/cuda``).

    Raises
    ------
    LinkError
        Naming the pip package that ships it.
    """
    tried = []
    try:
        from cuda import pathfinder
        return str(pathfinder.locate_static_lib("cudadevrt").abs_path)
    except (ImportError, AttributeError) as exc:
        tried.append(f"cuda.pathfinder: {exc}")
    except Exception as exc:  # StaticLibNotFoundError and friends
        tried.append(f"cuda.pathfinder: {exc}")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            tried.append(var)
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("lib64", "lib", "lib/x64"):
            p = Path(root) / sub / "libcudadevrt.a"
            if p.is_file():
                return str(p)
    raise LinkError(f"libcudadevrt.a (the CUDA device runtime library) was not found; "
                    f"install it with: pip install nvidia-cuda-runtime{_PIP_SUFFIX} "
                    f"(looked with {'; '.join(tried) or 'cuda.pathfinder'} and in {roots[-1]})")


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
    except ImportError as exc:
        raise LinkError(f"cuda.bindings has no nvjitlink module ({exc}); linking needs "
                        f"cuda-bindings >= 12.8 and pip install nvidia-nvjitlink{_PIP_SUFFIX}") from None
    try:
        nvjitlink.version()
    except Exception as exc:  # the shared library is not there
        raise LinkError(f"nvJitLink is not installed ({type(exc).__name__}: {exc}); install it "
                        f"with: pip install nvidia-nvjitlink{_PIP_SUFFIX}") from None
    return nvjitlink


def _trace(api: str, args: tuple) -> None:
    if check.tracer is not None:
        check.tracer(api, args, (0,))


def _log(nv, handle, which: str) -> str:
    try:
        size = getattr(nv, f"get_{which}_log_size")(handle)
        buf = bytearray(size)
        getattr(nv, f"get_{which}_log")(handle, buf)
        return buf.rstrip(b"\0").decode(errors="replace").strip()
    except Exception:
        return ""


def _image(item) -> tuple[bytes, str, str, str]:
    """(bytes, name, source, kind) of one input: a Module (CUBIN, PTX or fatbin) or CUBIN bytes."""
    if isinstance(item, Module):
        return item.cubin, item.name, item.source, item.kind
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item), "image.cubin", "", "cubin"
    raise TypeError(f"link takes Modules (compiled with -rdc=true) or CUBIN bytes, got {type(item).__name__}")


def link(*modules, arch: str | None = None, device_runtime: bool = True,
         name: str = "linked.cubin", options=()) -> Module:
    """Link relocatable modules (and ``libcudadevrt.a``) into one :class:`Module`.

    Parameters
    ----------
    *modules : Module or bytes
        Modules compiled with ``-rdc=true`` (their kernels are found by name in the
        result), modules of relocatable PTX or fatbin images (``Module.from_file``), or
        relocatable CUBIN bytes.
    arch : str, optional
        ``"sm_90"`` etc.; defaults to the first module's, else the current device's.
    device_runtime : bool
        Also link ``libcudadevrt.a`` (:func:`find_device_runtime`).
    options : sequence of str
        More nvJitLink options (``"-O3"``, ``"-lineinfo"``).

    Notes
    -----
    Calls ``nvJitLinkCreate``, ``nvJitLinkAddData`` (one per module),
    ``nvJitLinkAddFile`` (the library), ``nvJitLinkComplete``, ``nvJitLinkGetLinkedCubin``
    and ``nvJitLinkDestroy``.
    """
    if not modules:
        raise ArgumentError("link needs at least one module")
    device_runtime = bool_arg(device_runtime, "link: device_runtime")
    images = [_image(m) for m in modules]
    if arch is None:
        arch = next((m.arch for m in modules if isinstance(m, Module) and m.arch), None) or device_arch()
    library = find_device_runtime() if device_runtime else None
    nv = _nvjitlink()
    opts = [f"-arch={arch}", *[str(o) for o in options]]
    try:
        handle = nv.create(len(opts), opts)
    except Exception as exc:
        raise LinkError(f"nvJitLinkCreate failed with options {opts}: {exc}") from None
    _trace("nvJitLinkCreate", (len(opts), opts))
    try:
        try:
            for data, item_name, _, kind in images:
                nv.add_data(handle, getattr(nv.InputType, kind.upper()), data, len(data), item_name)
                _trace("nvJitLinkAddData", (handle, f"NVJITLINK_INPUT_{kind.upper()}", len(data),
                                            item_name))
            if library is not None:
                nv.add_file(handle, nv.InputType.LIBRARY, library)
                _trace("nvJitLinkAddFile", (handle, "NVJITLINK_INPUT_LIBRARY", library))
            nv.complete(handle)
            _trace("nvJitLinkComplete", (handle,))
        except nv.nvJitLinkError as exc:
            raise LinkError(f"nvJitLink could not link {[n for _, n, _, _ in images]} for {arch} "
                            f"({exc})", _log(nv, handle, "error")) from None
        size = nv.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nv.get_linked_cubin(handle, cubin)
        _trace("nvJitLinkGetLinkedCubin", (handle, size))
    finally:
        nv.destroy(handle)
    source = "\n".join(src for _, _, src, _ in images if src)
    return Module(bytes(cubin), source, name=name, arch=arch, options=tuple(opts))
