"""A loaded kernel: its parameter layout, argument packing and eager launch.

A :class:`Kernel` comes from :meth:`Module.get_kernel <pycudagraph.compile.program.Module.get_kernel>`
(``cudaLibraryGetKernel``); its signature is checked against the kernel image
(``cuKernelGetParamInfo``) before the first pack.

A ``cudaKernel_t`` belongs to no device; what launches and kernel nodes name is its
``CUfunction`` in one device's context (``cuKernelGetFunction``), which a :class:`Kernel`
looks up once per device: a launch takes the function of its stream's device, a graph
node the function of the device current when the node is added.
"""

from __future__ import annotations

import weakref

from .. import _cuda, _lifetime
from .._cuda import call, dr, fast, rt
from .._cuda.context import current_device, ensure_device, seen, stream_device, thread_state
from .args import ArgPack, Layout
from ..runtime.device import Device, check_access, device
from .limits import KERNEL_LIMITS, kernel_limits, launch_config
from ..errors import ArgumentError, CudaError
from ..runtime.memory import DeviceBuffer
from .param_block import param_block
from .reconcile import check_declared, check_image
from .signature import Param, signature_text
from ..runtime.values import seq_arg, str_arg
from ..runtime.stream import Stream, stream_handle

__all__ = ["Kernel"]

_launch = fast.launch_kernel
_native_launch = fast.native.launch_kernel if fast.native is not None else None


def _forget_limits(funcs: dict) -> None:
    for func in list(funcs.values()):
        KERNEL_LIMITS.pop(func, None)


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
        self.name = str_arg(name, "Kernel: name", empty=False)
        self._declared = seq_arg(params, "Kernel: params")
        if not all(isinstance(p, Param) for p in self._declared):
            raise ArgumentError("Kernel: params must be Param objects (Module.get_kernel makes "
                                "them from the source or signature=)")
        self._handle = None
        self._handle_int = 0
        self._funcs: dict[int, int] = {}  # device ordinal -> CUfunction
        # The function looked up last and its device: the fast path. One tuple, written
        # and read in one step, so a thread never pairs one device's function with another's.
        self._func: tuple[int, int] = (0, -1)
        self._dev = -1  # the device it was first loaded on
        self._layout = None
        self._image_params: list[tuple[int, int]] | None = None
        self._native = None  # the layout's compiled view, once the function is known
        # Its limits go with it: a module loaded later may get the same CUfunction addresses.
        weakref.finalize(self, _forget_limits, self._funcs).atexit = False

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
            self._handle = handle
            self._function(ensure_device())
        return self._handle

    @property
    def device(self) -> Device:
        """The device the kernel was first loaded on; it runs on any device
        (:meth:`function`). Loads it first if needed (``cudaLibraryGetKernel``)."""
        if self._handle is None:
            self.handle  # noqa: B018 - load on the current device
        return Device._of(self._dev)

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

    def _function(self, ordinal: int) -> int:
        func = self._funcs.get(ordinal)
        if func is None:
            if self._handle is None:
                self.handle  # noqa: B018 - the cudaKernel_t first
                return self._function(ordinal)
            kern = dr.CUkernel(self._handle_int)
            if thread_state.device == ordinal:
                func = int(call(dr.cuKernelGetFunction, kern))
            else:
                with device._trusted(ordinal):
                    func = int(call(dr.cuKernelGetFunction, kern))
            self._funcs[ordinal] = func
            if self._dev < 0:
                self._dev = ordinal
        self._func = (func, ordinal)
        return func

    @property
    def _func_int(self) -> int:
        """The ``CUfunction`` looked up last (for a pair with its device read ``_func``).
        No CUDA call."""
        return self._func[0]

    def _device_of(self, func: int) -> int:
        """The device whose ``CUfunction`` ``func`` is (-1 if not this kernel's). No CUDA call."""
        for dev, f in list(self._funcs.items()):
            if f == func:
                return dev
        return -1

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
        (the module's PTX/CUBIN facts: no GPU needed), then against the loaded image
        (``cuKernelGetParamInfo``)."""
        if self._layout is None:
            params = self._compiled_params()
            image = self.image_params
            if image is not None:
                params = check_image(self.name, params, image)
            self._layout = Layout(self.name, params)
            if self._func[0]:
                self._native = self._layout.native
        return self._layout

    def _compiled_params(self) -> tuple[Param, ...]:
        """The declared parameters checked against the module's compiled facts. No CUDA call."""
        compiled = getattr(self.module, "entries", {}).get(self.name)
        return self._declared if compiled is None else check_declared(self.name, self._declared,
                                                                      compiled)

    def pack_args(self, args) -> bytes:
        """The parameter block a launch hands the kernel for ``args``: each value checked as
        :meth:`launch` checks it (:class:`ArgumentError` naming the parameter and the
        value) and written at its parameter's offset. No CUDA call, no GPU needed for a
        module compiled with ``arch=``: sizes and offsets come from its PTX or CUBIN."""
        layout = self._layout or Layout(self.name, self._compiled_params())
        return param_block(layout, args, getattr(self.module, "entries", {}).get(self.name))

    @property
    def params(self) -> tuple[Param, ...]:
        """The parameters: name, C type, kind, size, alignment. No CUDA call."""
        return self._layout.params if self._layout is not None else self._declared

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

    def _check_args(self, args, dev: int, what: str):
        """Every DeviceBuffer argument usable from ``dev`` (same device or peer access);
        returns ``args`` (an iterator read into a tuple, to be packed next)."""
        if not isinstance(args, (tuple, list)):
            if isinstance(args, (str, bytes, dict)) or not hasattr(args, "__iter__"):
                return args  # the packing names what is wrong with it
            args = tuple(args)
        for i, a in enumerate(args):
            if type(a) is DeviceBuffer and a._dev != dev:
                name = self._declared[i].name if i < len(self._declared) else "?"
                check_access(f"{self.name}() ({what})", dev, a._dev,
                             f"argument {i} '{name}' (a DeviceBuffer)")
        return args

    def _check_pack_args(self, pack, args, what: str):
        """Every DeviceBuffer of ``args`` (a sequence, or a dict ``{index or name: value}``)
        usable from the device of the function ``pack`` names (a node's device); returns
        ``args``. Called while several devices are in use (``seen.multi``). No CUDA call."""
        dev = self._device_of(pack.func)
        if dev < 0:  # not one of this kernel's functions: nothing to judge it by
            return args
        if not isinstance(args, dict):
            return self._check_args(args, dev, what)
        layout = pack.layout
        for key, a in args.items():
            if type(a) is DeviceBuffer and a._dev != dev:
                i = layout.slot_index(key)
                check_access(f"{self.name}() ({what})", dev, a._dev,
                             f"argument {i} '{layout.params[i].name}' (a DeviceBuffer)")
        return args

    def _config(self, grid, block, shared_mem, func: int = 0, dev: int = -1) -> tuple:
        """``(grid3, block3, shared_mem)`` checked against the device's and the kernel's
        limits (:func:`pycudagraph.compile.limits.launch_config`); loads the kernel first.

        ``func`` (on device ``dev``) is the ``CUfunction`` the launch or node names; by
        default the one looked up last. The common case (1-D int grid and block within
        the limits, shared memory within the kernel's current ceiling) costs a few compares.
        """
        if self._handle is None:
            self.handle  # noqa: B018 - load the module, get the function
        if not func:
            func, dev = self._func
        if self._fits(grid, block, shared_mem, func):
            return (grid, 1, 1), (block, 1, 1), shared_mem
        lim = KERNEL_LIMITS.get(func) or kernel_limits(self, func, dev)
        return launch_config(lim, grid, block, shared_mem)

    def _pack_config(self, pack, grid, block, shared_mem) -> tuple:
        """:meth:`check_config` for the function ``pack``'s header names, on that function's
        device (a node's own, whichever device this kernel was looked up on last).
        ``cuFuncGetAttribute`` / ``cuFuncSetAttribute`` as :meth:`check_config`."""
        func = pack.func
        return self._config(grid, block, shared_mem, func, self._device_of(func))

    def _fits(self, grid, block, shared_mem, func: int = 0) -> bool:
        """The common configuration (1-D int grid and block within the limits, shared memory
        within the kernel's current ceiling), judged with a few compares; False when unsure."""
        lim = KERNEL_LIMITS.get(func or self._func[0])
        return (lim is not None and type(block) is int and type(grid) is int
                and type(shared_mem) is int and 0 < block <= lim.block1
                and 0 < grid <= lim.grid1 and 0 <= shared_mem <= lim.smem)

    def check_config(self, grid, block, shared_mem: int = 0) -> tuple:
        """Check a launch configuration against the device's and this kernel's limits.

        Returns ``(grid, block, shared_mem)`` normalised to 3-tuples; raises
        :class:`ArgumentError` naming the field and the limit. Reads
        ``cudaDeviceGetAttribute`` and ``cuFuncGetAttribute`` once; may call
        ``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)`` when
        ``shared_mem`` needs more than 48 KiB (see :mod:`pycudagraph.compile.limits`).

        Parameters
        ----------
        grid, block : int or tuple of up to 3 ints
        shared_mem : int
            Dynamic shared memory in bytes.

        Notes
        -----
        The limits are those of this kernel's function on the current device.
        """
        dev = thread_state.device
        if dev is None:
            dev = ensure_device()
        func, fdev = self._func
        if fdev != dev or not func:
            func = self._function(dev)
        return self._config(grid, block, shared_mem, func, dev)

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
        s = stream._h if type(stream) is Stream else stream_handle(stream)
        nl = self._native  # the compiled path: one device in this process (its function)
        # The driver judges the configuration, except while a capture is open: a refused
        # launch there could invalidate the capture, so only a config known to fit goes.
        if (nl is not None and not seen.multi
                and (not _lifetime.capture_keeps or self._fits(grid, block, shared_mem))
                and not _native_launch(nl, self._func[0], grid, block, args, s, shared_mem)):
            if _lifetime.capture_keeps and args:  # captured: the graph keeps the arguments
                _lifetime.keep_in_captures(tuple(args))
            return  # launched by the compiled path
        # The checked path: first launches, several devices, values the compiled path does
        # not convert, and any failure (diagnosed here, with the error raised naming the call).
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
        if seen.multi and dev != thread_state.device:  # CUDA launches on the current device
            with device._trusted(dev):
                _launch(func, g, b, smem, s, pack, self)
        else:
            _launch(func, g, b, smem, s, pack, self)
        if _lifetime.capture_keeps:  # captured: the graph keeps the arguments alive
            _lifetime.keep_in_captures(pack)

    def __call__(self, grid, block, args=(), stream=None, shared_mem: int = 0) -> None:
        self.launch(grid, block, args, stream, shared_mem)

    def __repr__(self) -> str:
        sig = signature_text(self._declared)
        return f"<pycudagraph.Kernel {self.name}({sig})>"
