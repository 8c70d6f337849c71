"""A loaded kernel: its parameter layout, argument packing and eager launch.

A :class:`Kernel` comes from :meth:`Module.get_kernel <pycudagraph.compile.program.Module.get_kernel>`
(``cudaLibraryGetKernel``), or from a kernel made elsewhere with :meth:`Kernel.from_function`
(a raw ``CUfunction`` / ``CUkernel``, CuPy, Triton, Numba-CUDA: :mod:`.adopted`); its
signature is checked against the kernel image (``cuKernelGetParamInfo``) before the first pack.

A ``cudaKernel_t`` belongs to no device; what launches and kernel nodes name is its
``CUfunction`` in one device's context (``cuKernelGetFunction``), which a :class:`Kernel`
looks up once per device: a launch takes the function of its stream's device, a graph
node the function of the device current when the node is added.
"""

from __future__ import annotations

import weakref

from .. import _lifetime
from .._cuda import call, dr, fast
from .._cuda.context import current_device, ensure_device, seen, stream_device, thread_state
from .args import ArgPack, Layout
from ..runtime.device import Device, known_device, trusted_scope
from .kernel_checks import KernelChecks
from .limits import KERNEL_LIMITS
from .adopted import adopt, param_info
from .reconcile import check_image, params_from_image
from .param_block import KernelParamBlock
from .param_text import signature_text
from .signature import Param
from ..errors import ArgumentError
from ..runtime.values import seq_arg, str_arg
from ..runtime.stream import Stream, stream_handle

__all__ = ["Kernel", "kernel_for_function"]

_launch = fast.launch_kernel


#: CUfunction -> the Kernel that looked it up (a captured node of one of our kernels is
#: told by its function: kernel_for_function)
_BY_FUNCTION: "weakref.WeakValueDictionary[int, Kernel]" = weakref.WeakValueDictionary()


def kernel_for_function(func: int) -> "Kernel | None":
    """The live :class:`Kernel` whose ``CUfunction`` (on any device) ``func`` is, or ``None``.
    No CUDA call."""
    return _BY_FUNCTION.get(int(func))


def _forget_limits(funcs: dict) -> None:
    for func in list(funcs.values()):
        KERNEL_LIMITS.pop(func, None)


class Kernel(fast.KernelBase, KernelChecks, KernelParamBlock):
    """One kernel of a :class:`Module` (``cudaKernel_t``), with its parameter layout.

    Attributes
    ----------
    name : str
        As asked for (an ``extern "C"`` name, a C++ name expression, a mangled name).
    symbol : str
        Its name in the image (mangled for C++ kernels).
    params : list of Param
        C type, size and (our packing) offsets of each parameter.
    origin : Origin or None
        For a kernel made elsewhere (:meth:`from_function`): what it came from
        (``origin.obj``, kept alive as long as this kernel) and what its maker fixed.
    block : tuple or None
        The block its maker fixed (a Triton kernel: ``32 * num_warps`` threads); pass
        it, or None, as ``block``. None for other kernels.
    shared_mem : int
        Dynamic shared memory its maker fixed (a Triton kernel's ``shared``): every
        launch and node gets at least this much. 0 for other kernels.
    """

    # ``_hot`` is the base's (fast.KernelBase: a C type where the extension is built), with
    # ``launch``: the compiled launch and node add (``fast.add_node``) read it there.
    __slots__ = ("__dict__", "__weakref__")

    def __init__(self, module, name: str, params: tuple[Param, ...] | None,
                 symbol: str | None = None, origin=None):
        self.module = module
        self.name = str_arg(name, "Kernel: name", empty=False)
        if params is not None:
            params = seq_arg(params, "Kernel: params")
            if not all(isinstance(p, Param) for p in params):
                raise ArgumentError("Kernel: params must be Param objects (Module.get_kernel "
                                    "makes them from the source or signature=)")
        if symbol is not None:
            str_arg(symbol, "Kernel: symbol")
        if origin is not None and not hasattr(origin, "hidden"):
            raise ArgumentError(f"Kernel: origin must be an Origin (Kernel.from_function makes "
                                f"it), got {type(origin).__name__}")
        self.symbol = symbol or name
        self.origin = origin
        self.block = origin.block if origin is not None else None
        self.shared_mem = origin.shared_mem if origin is not None else 0
        self._declared = None if params is None else tuple(params)  # None: from the image
        self._handle = None
        self._handle_int = 0
        self._funcs: dict[int, int] = {}  # device ordinal -> CUfunction
        # The function looked up last and its device: the fast path. One tuple, written
        # and read in one step, so a thread never pairs one device's function with another's.
        self._func: tuple[int, int] = (0, -1)
        self._dev = -1  # the device it was first loaded on
        self._layout = None
        self._image_params: list[tuple[int, int]] | None = None
        self._hot = self._hot_for = None  # the compiled route's view (Layout.kernel_hot), its key
        # Its limits go with it: a module loaded later may get the same CUfunction addresses.
        weakref.finalize(self, _forget_limits, self._funcs).atexit = False

    @classmethod
    def from_function(cls, obj, signature: str | None = None) -> "Kernel":
        """A kernel made elsewhere as a :class:`Kernel` (recipes: ``docs/own_kernels.md``).

        ``obj``: a ``CUfunction`` / ``CUkernel`` / ``cudaKernel_t`` (an int is taken as a
        ``CUfunction``), a CuPy ``RawKernel``, a Triton compiled kernel, or a Numba-CUDA
        kernel compiled for one set of types; ``signature`` (``"float* y, int n"``) names
        and types what ``obj`` does not tell, checked against the image. The kernel keeps
        ``obj`` alive (``kernel.origin.obj``). Calls ``cuFuncGetName`` / ``cuKernelGetName``
        for a raw handle's name; a Triton CUBIN loads at first use (``cudaLibraryLoadData``).
        Raises :class:`ArgumentError` for an unknown object or a launch this cannot make.
        """
        return adopt(cls, obj, signature)

    # Loading -----------------------------------------------------------------------

    @property
    def handle(self):
        """The raw ``cudaKernel_t`` (``cudaLibraryGetKernel``), or for a kernel made
        elsewhere the handle it came with (a ``CUfunction`` or ``CUkernel``)."""
        if self._handle is None:
            origin = self.origin
            handle = origin.load() if origin is not None else self.module.kernel_handle(self.symbol)
            self._handle_int = int(handle)
            self._handle = handle
            bound = origin is not None and origin.device >= 0
            self._function(origin.device if bound else ensure_device())
        return self._handle

    @property
    def device(self) -> Device:
        """The device the kernel was first loaded on; it runs on any device
        (:meth:`function`). Loads it first if needed (``cudaLibraryGetKernel``)."""
        if self._handle is None:
            self.handle  # noqa: B018 - load on the current device
        return known_device(self._dev)

    def function(self, dev=None) -> int:
        """The kernel's ``CUfunction`` on device ``dev`` (default: the current one).

        Calls ``cuKernelGetFunction`` with that device's primary context current, once
        per device. Launches and kernel nodes name this function directly, so the driver
        does no kernel -> function lookup per launch.

        Parameters
        ----------
        dev : int or Device, optional

        Returns
        -------
        int
            The ``CUfunction`` handle.
        """
        ordinal = current_device() if dev is None else Device(dev).ordinal
        return self._function(ordinal)

    def current_function(self) -> int:
        """The kernel's ``CUfunction`` on the device pycudagraph made current in this thread
        (what :meth:`pack` and a launch name): unlike :meth:`function`, no ``cudaGetDevice``
        when that device is known; ``cuKernelGetFunction`` once per device."""
        dev = thread_state.device
        if dev is None:
            dev = ensure_device()
        func, fdev = self._func
        return func if fdev == dev else self._function(dev)

    def _function(self, ordinal: int) -> int:
        func = self._funcs.get(ordinal)
        if func is None:
            if self._handle is None:
                self.handle  # noqa: B018 - the cudaKernel_t first
                return self._function(ordinal)
            if self.origin is not None and self.origin.device >= 0:  # a CUfunction: its context's
                func = self.origin.function_on(ordinal, self.name)
            elif thread_state.device == ordinal:
                func = int(call(dr.cuKernelGetFunction, dr.CUkernel(self._handle_int)))
            else:
                with trusted_scope(ordinal):
                    func = int(call(dr.cuKernelGetFunction, dr.CUkernel(self._handle_int)))
            self._funcs[ordinal] = func
            _BY_FUNCTION[func] = self
            if self._dev < 0:
                self._dev = ordinal
        self._func = (func, ordinal)
        return func

    @property
    def last_function(self) -> tuple[int, int]:
        """``(CUfunction, device ordinal)`` of the function looked up last, read as one
        pair (``(0, -1)`` before the first lookup). No CUDA call."""
        return self._func

    def _device_of(self, func: int) -> int:
        """The device whose ``CUfunction`` ``func`` is (-1 if not this kernel's). No CUDA call."""
        for dev, f in list(self._funcs.items()):
            if f == func:
                return dev
        return -1

    @property
    def image_params(self) -> list[tuple[int, int]] | None:
        """(offset, size) of each parameter in the kernel image (``cuKernelGetParamInfo``;
        ``cuFuncGetParamInfo`` for a ``CUfunction`` made elsewhere), or ``None`` when the
        driver cannot tell (older than CUDA 12.4)."""
        if self._image_params is None:
            self.handle  # noqa: B018 - loaded first
            origin = self.origin
            info = (origin.param_info() if origin is not None and origin.device >= 0
                    else param_info(dr.cuKernelGetParamInfo, dr.CUkernel(self._handle_int)))
            if info is None:
                return None
            self._image_params = info
        return self._image_params

    @property
    def layout(self) -> Layout:
        """Packing layout; on first use checks the signature against the compiled kernel
        (the module's PTX/CUBIN facts: no GPU needed), then against the loaded image
        (``cuKernelGetParamInfo``), which alone gives the parameters of a kernel known by
        its image only."""
        if self._layout is None:
            hidden = self.origin.hidden if self.origin is not None else ()
            params = self._declared
            if params is None:
                params = params_from_image(self.name, self.image_params, hidden)
            params = self._compiled_params(params, hidden)
            image = self.image_params
            if image is not None:
                params = check_image(self.name, params, image, hidden)
            self._layout = Layout(self.name, params, hidden)
            if self._func[0]:
                self._refresh_hot()
        return self._layout

    def _refresh_hot(self) -> None:
        """The compiled route's view of the function looked up last and its limits, made
        again when they changed (layout made, limits loaded, shared memory raised). None for
        a kernel whose maker fixes its launch (a Triton block and shared memory)."""
        func = self._func[0]
        lim = KERNEL_LIMITS.get(func)
        key = (func, lim, lim.smem if lim is not None else 0)
        if (key != self._hot_for and not seen.multi and self._layout is not None and func
                and (self.origin is None or self.origin.free_launch)):
            self._hot, self._hot_for = self._layout.kernel_hot(func, lim), key

    @property
    def params(self) -> tuple[Param, ...]:
        """The parameters: name, C type, kind, size, alignment. No CUDA call, except for
        a kernel known by its image only (its layout, from ``cuKernelGetParamInfo``)."""
        if self._layout is not None:
            return self._layout.params
        return self._declared if self._declared is not None else self.layout.params

    def pack(self, args, grid=1, block=1, shared_mem: int = 0) -> ArgPack:
        """Pack arguments and launch dimensions into a stable :class:`ArgPack`.

        The header names the kernel's ``CUfunction`` on the current device
        (``cuKernelGetFunction``): a kernel node built from the pack runs there.

        Parameters
        ----------
        args : sequence
            One value per kernel parameter.
        grid, block : int or tuple of up to 3 ints
        shared_mem : int
            Dynamic shared memory in bytes.

        Returns
        -------
        ArgPack

        Raises
        ------
        DeviceMismatchError
            When a :class:`DeviceBuffer` argument lives on another device and peer
            access to it is not enabled.
        """
        dev = thread_state.device
        if dev is None:
            dev = ensure_device()
        if seen.multi:
            args = self._check_args(args, dev, "graph node")
        func, fdev = self._func
        if fdev != dev:
            func = self._function(dev)
        g, b, smem = self._config(grid, block, shared_mem, func, dev)
        return ArgPack(self._layout or self.layout, self, args, g, b, smem, func=func)

    # Launch ------------------------------------------------------------------------

    def _launch_checked(self, grid, block, args=(), stream=None, shared_mem: int = 0) -> None:
        """:meth:`launch` (``cuLaunchKernel``) for what the base's method hands on: a call it
        does not parse, a launch while a capture is open (which keeps the arguments).

        Parameters
        ----------
        grid, block : int or tuple of up to 3 ints
        args : sequence
            One value per parameter: Python/numpy scalars, device arrays
            (``__cuda_array_interface__`` / DLPack), :class:`DeviceBuffer`, int pointers.
        stream : Stream or stream-like, optional
            Defaults to the legacy default stream.
        shared_mem : int
            Dynamic shared memory in bytes. Above 48 KiB the kernel's
            ``cudaFuncAttributeMaxDynamicSharedMemorySize`` is raised for you, up to the
            device's opt-in maximum.

        Raises
        ------
        ArgumentError
            Grid, block or shared memory outside the device's or the kernel's limits,
            or arguments that do not match the signature; nothing is launched.
        DeviceMismatchError
            When a :class:`DeviceBuffer` argument lives on another device than the
            stream and peer access to it is not enabled.

        Notes
        -----
        Calls ``cuLaunchKernel`` (the driver twin of ``cudaLaunchKernel``) with the
        kernel's ``CUfunction`` on the stream's device (for a stream made elsewhere, in a
        process that uses several devices, ``cuStreamGetDevice`` tells which). CUDA launches
        only on streams of the current device: a stream of another device is launched on
        with that device made current for the call (``cudaSetDevice`` there and back);
        inside ``with pcg.device(...)`` of the stream's device no switch is made.
        """
        _launch(self._hot, grid, block, args, stream, shared_mem, self, _prepare_launch)
        if _lifetime.capture_keeps:
            _lifetime.keep_launched(self, args)

    def _prepare_launch(self, grid, block, args, stream, shared_mem) -> tuple:
        """The checked packing of :meth:`launch` (``fast.launch_kernel``'s ctypes route runs it):
        ``(func, grid3, block3, shared_mem, stream_h, device, pack)`` for the stream's device."""
        if type(stream) is Stream:
            s, dev = stream._h, stream._dev
            if s is None:  # a closed Stream
                stream_handle(stream)  # raises its ClosedError
            if dev < 0:
                dev = stream._ordinal()
        else:
            s, dev = stream_handle(stream), thread_state.device
            if dev is None:
                dev = ensure_device()
            elif seen.multi:
                dev = current_device() if s in (0, 1, 2) else stream_device(s)
        if seen.multi:
            args = self._check_args(args, dev, "launch")
        func, fdev = self._func
        if fdev != dev:
            func = self._function(dev)
        g, b, smem = self._config(grid, block, shared_mem, func, dev)
        pack = ArgPack(self._layout or self.layout, self, args, g, b, smem, func=func)
        if _lifetime.capture_keeps:  # captured: the graph keeps the arguments alive
            _lifetime.keep_in_captures(pack)
        return func, g, b, smem, s, dev, pack

    def __call__(self, grid, block, args=(), stream=None, shared_mem: int = 0) -> None:
        """The same as :meth:`launch` (``cuLaunchKernel``)."""
        self.launch(grid, block, args, stream, shared_mem)

    def __repr__(self) -> str:
        params = self._layout.params if self._layout is not None else self._declared
        sig = "..." if params is None else signature_text(params)
        return f"<pycudagraph.Kernel {self.name}({sig})>"


_prepare_launch = Kernel._prepare_launch
