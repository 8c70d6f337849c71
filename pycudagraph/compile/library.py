"""One device code image loaded as a CUDA library (``cudaLibrary_t``).

A :class:`Library` holds an image (CUBIN, PTX or fatbin bytes), loads it with
``cudaLibraryLoadData`` at first use and unloads it with ``cudaLibraryUnload`` when it is
collected. A library belongs to no context: its kernels (``cudaLibraryGetKernel``) run on
any device the image has code for. :class:`~pycudagraph.compile.program.Module` loads
through one, and so does a Triton kernel adopted with ``Kernel.from_function``.
"""

from __future__ import annotations

import threading

from .. import _cuda
from .._cuda import call, rt
from .._lifetime import release
from ..errors import CudaError
from .nvrtc_compile import device_arch

__all__ = ["Library", "unloads"]

#: How many libraries this process has unloaded (``cudaLibraryUnload``). A cache keyed by a
#: function or kernel handle is stale once this changed: the driver may give a function
#: loaded later the address an unloaded one had.
unloads = 0

_NO_IMAGE = ("cudaErrorNoKernelImageForDevice", "cudaErrorInvalidSource",
             "cudaErrorInvalidKernelImage", "cudaErrorInvalidPtx", "cudaErrorUnsupportedPtxVersion")


class Library:
    """An image, loaded on first use (``cudaLibraryLoadData``).

    Parameters
    ----------
    image : bytes
        CUBIN, PTX text ending in a NUL, or fatbin.
    name : str
        What error messages call it.
    arch : str
        What the image was built for (``"sm_90"``), for the hint when a device cannot run it.
    advice : str
        What to do then.
    """

    def __init__(self, image: bytes, name: str = "image", arch: str = "",
                 advice: str = "build it for the current device"):
        self.image = bytes(image)
        self.name = name
        self.arch = arch
        self.advice = advice
        self._handle = None
        self._lock = threading.Lock()
        self._fin = None

    @property
    def handle(self):
        """The raw ``cudaLibrary_t``, loading the image on first use (``cudaLibraryLoadData``)."""
        if self._handle is None:
            with self._lock:
                if self._handle is None:
                    _cuda.ensure_device()
                    try:
                        lib = call(rt.cudaLibraryLoadData, self.image, None, None, 0, None, None, 0)
                    except CudaError as exc:
                        raise self.with_arch_hint(exc)
                    self._fin = release(self, _unload, lib)
                    self._handle = lib
        return self._handle

    def kernel(self, symbol: str):
        """The ``cudaKernel_t`` called ``symbol`` (``cudaLibraryGetKernel``)."""
        try:
            return call(rt.cudaLibraryGetKernel, self.handle, symbol.encode())
        except CudaError as exc:
            raise self.with_arch_hint(exc)

    def with_arch_hint(self, exc: CudaError) -> CudaError:
        """Say which architecture the image is for when the device cannot run it."""
        if exc.name in _NO_IMAGE:
            exc.set_hint(f"{self.name} was compiled for {self.arch or 'an unknown arch'}; "
                         f"this device is {device_arch()}: {self.advice}")
        return exc


def _unload(lib) -> None:
    """``cudaLibraryUnload(lib)``, counted in :data:`unloads` first."""
    global unloads
    unloads += 1
    rt.cudaLibraryUnload(lib)
