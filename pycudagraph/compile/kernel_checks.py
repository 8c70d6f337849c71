"""What a :class:`~pycudagraph.Kernel` checks before a launch or a node: the launch
configuration against the device's and the kernel's limits, and (while several devices are
in use) each :class:`~pycudagraph.DeviceBuffer` argument's device against the function's.

Mixed into :class:`~pycudagraph.Kernel`; the limits themselves are read and cached by
:mod:`pycudagraph.compile.limits`.
"""

from __future__ import annotations

from .._cuda.context import ensure_device, thread_state
from ..runtime.device import check_access
from ..errors import ArgumentError
from ..runtime.memory import DeviceBuffer
from ..runtime.values import short_repr
from .args import ArgPack
from .limits import KERNEL_LIMITS, kernel_limits, launch_config

__all__ = ["KernelChecks"]


class KernelChecks:
    """Launch-configuration and device checks of :class:`~pycudagraph.Kernel`."""

    __slots__ = ()

    def _check_args(self, args, dev: int, what: str):
        """Every DeviceBuffer argument usable from ``dev`` (same device or peer access);
        returns ``args`` (an iterator read into a tuple, to be packed next)."""
        if not isinstance(args, (tuple, list)):
            if isinstance(args, (str, bytes, dict)) or not hasattr(args, "__iter__"):
                return args  # the packing names what is wrong with it
            args = tuple(args)
        for i, a in enumerate(args):
            if type(a) is DeviceBuffer and a.ordinal != dev:
                name = self.params[i].name if i < len(self.params) else "?"
                check_access(f"{self.name}() ({what})", dev, a.ordinal,
                             f"argument {i} '{name}' (a DeviceBuffer)")
        return args

    def check_node_args(self, pack, args, what: str):
        """Check a node's new arguments against the node's device before they are written.

        Every :class:`~pycudagraph.DeviceBuffer` of ``args`` must be usable from the device
        of the function ``pack`` names (the node's device, or a peer with access). Kernel
        nodes call it while several devices are in use. No CUDA call.

        Parameters
        ----------
        pack : ArgPack
            The node's arguments as packed now (its header names the node's function).
        args : sequence or dict
            The new arguments: all of them, or ``{index or name: value}``.
        what : str
            The call that asks, for the error (``"set_params"``).

        Returns
        -------
        sequence or dict
            ``args`` (an iterator read into a tuple, to be packed next).

        Raises
        ------
        ArgumentError
            A DeviceBuffer of another device that the node's device cannot reach, naming
            the argument and both devices; ``pack`` not an :class:`ArgPack` of this kernel.
        """
        self._own_pack(pack, "check_node_args")
        dev = self._device_of(pack.func)
        if dev < 0:  # not one of this kernel's functions: nothing to judge it by
            return args
        if not isinstance(args, dict):
            return self._check_args(args, dev, what)
        layout = pack.layout
        for key, a in args.items():
            if type(a) is DeviceBuffer and a.ordinal != dev:
                i = layout.slot_index(key)
                check_access(f"{self.name}() ({what})", dev, a.ordinal,
                             f"argument {i} '{layout.params[i].name}' (a DeviceBuffer)")
        return args

    def _own_pack(self, pack, what: str) -> None:
        """Raise :class:`ArgumentError` unless ``pack`` is an :class:`ArgPack` of this kernel."""
        if type(pack) is not ArgPack or pack.kernel is not self:
            raise ArgumentError(f"{self.name}.{what}: pack must be an ArgPack of this kernel "
                                f"(a node's arguments), got {short_repr(pack)}")

    def _config(self, grid, block, shared_mem, func: int = 0, dev: int = -1,
                strict: bool = False) -> tuple:
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
        if self.origin is not None and not self.origin.free_launch:  # Triton: its block, its smem
            block, shared_mem = self.origin.launch_dims(self.name, block, shared_mem, strict)
        if self._fits(grid, block, shared_mem, func):
            return (grid, 1, 1), (block, 1, 1), shared_mem
        lim = KERNEL_LIMITS.get(func) or kernel_limits(self, func, dev)
        config = launch_config(lim, grid, block, shared_mem)
        self._refresh_hot()  # limits loaded, or the shared memory ceiling raised, just now
        return config

    def check_node_config(self, pack, grid, block, shared_mem) -> tuple:
        """:meth:`check_config` for the function ``pack``'s header names, on that function's
        device (a node's own, whichever device this kernel was looked up on last).

        Reads ``cuFuncGetAttribute`` once per function; may call ``cuFuncSetAttribute`` as
        :meth:`check_config` does.

        Parameters
        ----------
        pack : ArgPack
            The node's arguments (its header names the node's function).
        grid, block : int or tuple of up to 3 ints
        shared_mem : int

        Returns
        -------
        tuple
            ``(grid, block, shared_mem)``, grid and block as 3-tuples.

        Raises
        ------
        ArgumentError
            A configuration beyond a limit (as :meth:`check_config`); ``pack`` not an
            :class:`ArgPack` of this kernel.
        """
        self._own_pack(pack, "check_node_config")
        func = pack.func
        return self._config(grid, block, shared_mem, func, self._device_of(func), strict=True)

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
