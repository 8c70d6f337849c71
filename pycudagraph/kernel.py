"""A loaded kernel: its parameter layout, argument packing and eager launch.

A :class:`Kernel` comes from :meth:`Module.get_kernel <pycudagraph.program.Module.get_kernel>`
(``cudaLibraryGetKernel``); its signature is checked against the kernel image
(``cuKernelGetParamInfo``) before the first pack.
"""

from __future__ import annotations

from . import _cuda, _lifetime
from ._cuda import call, dr, fast, rt
from .args import ArgPack, Layout, dim3
from .errors import ArgumentError, CudaError
from .reconcile import check_declared
from .signature import Param
from .stream import Stream, stream_handle

__all__ = ["Kernel"]

_launch = fast.launch_kernel
_native_launch = fast.native.launch_kernel if fast.native is not None else None


class Kernel:
    """One kernel of a :class:`Module` (``cudaKernel_t``), with its parameter layout.

    Attributes
    ----------
    name : str
    params : list of Param
        C type, size and (our packing) offsets of each parameter.
    """

    def __init__(self, module, name: str, params: tuple[Param, ...]):
        self.module = module
        self.name = name
        self._declared = tuple(params)
        self._handle = None
        self._handle_int = 0
        self._func_int = 0
        self._layout = None
        self._image_params: list[tuple[int, int]] | None = None
        self._native = None  # the layout's compiled view, once the function is known

    # Loading -----------------------------------------------------------------------

    @property
    def handle(self):
        """The raw ``cudaKernel_t`` (``cudaLibraryGetKernel``)."""
        if self._handle is None:
            try:
                handle = call(rt.cudaLibraryGetKernel, self.module.handle, self.name.encode())
            except CudaError as exc:
                raise self.module._with_arch_hint(exc)
            self._handle_int = int(handle)
            # The kernel's function in pycudagraph's context: graph nodes and launches
            # name it directly, so the driver does no kernel -> function lookup per launch.
            self._func_int = int(call(dr.cuKernelGetFunction, dr.CUkernel(self._handle_int)))
            self._handle = handle
        return self._handle

    @property
    def image_params(self) -> list[tuple[int, int]] | None:
        """(offset, size) of each parameter in the kernel image (``cuKernelGetParamInfo``),
        or ``None`` when the driver cannot tell (older than CUDA 12.4)."""
        if self._image_params is None:
            kern = dr.CUkernel(int(self.handle))
            info = []
            while True:
                try:
                    err, offset, size = dr.cuKernelGetParamInfo(kern, len(info))
                except (AttributeError, RuntimeError):
                    return None
                if err == dr.CUresult.CUDA_ERROR_INVALID_VALUE:
                    break
                if err == dr.CUresult.CUDA_ERROR_NOT_SUPPORTED:
                    return None
                if err:
                    raise _cuda.error_for("cuKernelGetParamInfo", err)
                info.append((int(offset), int(size)))
            self._image_params = info
        return self._image_params

    @property
    def layout(self) -> Layout:
        """Packing layout; on first use checks the signature against the compiled kernel
        (the module's PTX/CUBIN facts: no GPU needed), then against the loaded image."""
        if self._layout is None:
            params = self._declared
            compiled = getattr(self.module, "entries", {}).get(self.name)
            if compiled is not None:
                params = check_declared(self.name, params, compiled)
            image = self.image_params
            if image is not None:
                params = self._check_against_image(params, image)
            self._layout = Layout(self.name, params)
            if self._func_int:
                self._native = self._layout.native
        return self._layout

    def _check_against_image(self, params, image) -> tuple[Param, ...]:
        if len(image) != len(params):
            raise ArgumentError(
                f"{self.name}: the signature has {len(params)} parameters but the compiled "
                f"kernel has {len(image)}; fix the source parse or pass signature=")
        out = []
        for p, (_, size) in zip(params, image):
            if p.size is None:
                p = p.with_size(size)
            elif p.size != size:
                raise ArgumentError(
                    f"{self.name}: parameter {p.index} '{p.name}' is {p.ctype} ({p.size} bytes) "
                    f"in the signature but {size} bytes in the compiled kernel")
            out.append(p)
        return tuple(out)

    @property
    def params(self) -> tuple[Param, ...]:
        """The parameters: name, C type, kind, size, alignment."""
        return self._layout.params if self._layout is not None else self._declared

    def pack(self, args, grid=1, block=1, shared_mem: int = 0) -> ArgPack:
        """Pack arguments and launch dimensions into a stable :class:`ArgPack`.

        The header names the kernel's ``CUfunction`` (``cuKernelGetFunction``).
        """
        if self._handle is None:
            self.handle  # noqa: B018 - load the module, get the function
        return ArgPack(self._layout or self.layout, self, args, grid, block, shared_mem,
                       func=self._func_int)

    # Launch ------------------------------------------------------------------------

    def launch(self, grid, block, args=(), stream=None, shared_mem: int = 0) -> None:
        """Launch the kernel now.

        Parameters
        ----------
        grid, block : int or tuple of up to 3 ints
        args : sequence
            One value per parameter: Python/numpy scalars, device arrays
            (``__cuda_array_interface__`` / DLPack), :class:`DeviceBuffer`, int pointers.
        stream : Stream or stream-like, optional
            Defaults to the legacy default stream.
        shared_mem : int
            Dynamic shared memory in bytes.

        Notes
        -----
        Calls ``cuLaunchKernel`` (the driver twin of ``cudaLaunchKernel``) with the
        kernel's ``CUfunction`` in the current context.
        """
        s = stream._h if type(stream) is Stream else stream_handle(stream)
        nl = self._native
        if nl is not None and not _native_launch(nl, self._func_int, grid, block, args, s,
                                                 shared_mem):  # launched by the compiled path
            if _lifetime.capture_keeps and args:  # captured: the graph keeps the arguments
                _lifetime.keep_in_captures(tuple(args))
            return
        # The checked path: first launches, values the compiled path does not convert, and
        # any failure (diagnosed here, with the error raised naming the call).
        g, b = dim3(grid, "grid"), dim3(block, "block")
        pack = self.pack(args, g, b, shared_mem)
        if s is None:  # a closed Stream
            stream_handle(stream)  # raises its ClosedError
        _launch(self._func_int, g, b, shared_mem, s, pack, self)
        if _lifetime.capture_keeps:  # captured: the graph keeps the arguments alive
            _lifetime.keep_in_captures(pack)

    def __call__(self, grid, block, args=(), stream=None, shared_mem: int = 0) -> None:
        self.launch(grid, block, args, stream, shared_mem)

    def __repr__(self) -> str:
        sig = ", ".join(p.describe() for p in self._declared)
        return f"<pycudagraph.Kernel {self.name}({sig})>"
