"""Launch configurations checked against the device's and the kernel's limits, before CUDA.

==================== ==============================================================
check                used by
==================== ==============================================================
:func:`kernel_limits` :meth:`Kernel.launch`, ``Graph.add_kernel``, kernel ``set_params``
:func:`launch_config` the same: block, grid and dynamic shared memory vs the device
                     (grid and block normalised by :func:`pycudagraph.compile.dims.dims3`)
==================== ==============================================================

Device limits are read once per device (``cudaDeviceGetAttribute``) and a kernel's own
limits once per ``CUfunction`` (``cuFuncGetAttribute``); both are cached in plain dicts
(:data:`DEVICE_LIMITS`, :data:`KERNEL_LIMITS`), which tests may fill with mock values.

Dynamic shared memory above the default 48 KiB: CUDA refuses a launch asking for more
than the kernel's ``cudaFuncAttributeMaxDynamicSharedMemorySize`` (48 KiB minus the
kernel's static shared memory by default). pycudagraph raises that attribute itself
(``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)``, the driver twin of
``cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)``) up to the amount
asked, when that amount fits the device's opt-in maximum
(``cudaDevAttrMaxSharedMemoryPerBlockOptin``) less the static shared memory; more than
that raises :class:`~pycudagraph.errors.ArgumentError`.
"""

from __future__ import annotations

from .._cuda import call, dr, ensure_device, rt
from ..errors import ArgumentError
from ..runtime.values import short_repr
from .dims import dims3, shared_mem_arg

__all__ = ["DeviceLimits", "KernelLimits", "DEVICE_LIMITS", "KERNEL_LIMITS", "device_limits",
           "kernel_limits", "launch_config", "require_kernel"]


# ----------------------------------------------------------------------------------
# Launch configuration against the device

class DeviceLimits:
    """One device's launch limits (``cudaDeviceGetAttribute``), read once."""

    __slots__ = ("device", "threads", "block", "grid", "smem", "smem_optin")

    def __init__(self, device, threads, block, grid, smem, smem_optin):
        self.device, self.threads, self.block, self.grid = device, threads, tuple(block), tuple(grid)
        self.smem, self.smem_optin = smem, smem_optin


class KernelLimits:
    """One kernel's limits on one device: the device's, narrowed by the kernel's own.

    ``threads`` is the smaller of ``cudaDevAttrMaxThreadsPerBlock`` and the kernel's
    ``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` (registers, ``__launch_bounds__``);
    ``smem`` is the dynamic shared memory the kernel takes now, ``smem_optin`` what it can
    take once its attribute is raised. ``block1`` / ``grid1`` serve the 1-D fast check.
    """

    __slots__ = ("name", "func", "device", "threads", "block", "grid", "smem", "smem_optin",
                 "static_smem", "block1", "grid1")

    def __init__(self, name, func, dev: DeviceLimits, threads, smem, static_smem):
        self.name, self.func, self.device = name, func, dev
        self.threads = min(dev.threads, threads)
        self.block, self.grid = dev.block, dev.grid
        self.smem = smem
        self.static_smem = static_smem
        self.smem_optin = max(dev.smem_optin - static_smem, smem)
        self.block1 = min(self.threads, self.block[0])
        self.grid1 = self.grid[0]


#: device ordinal -> DeviceLimits
DEVICE_LIMITS: dict[int, DeviceLimits] = {}
#: CUfunction (int) -> KernelLimits
KERNEL_LIMITS: dict[int, KernelLimits] = {}

_A = rt.cudaDeviceAttr
_F = dr.CUfunction_attribute


def device_limits(device: int) -> DeviceLimits:
    """The launch limits of ``device`` (``cudaDeviceGetAttribute``, once per device)."""
    lim = DEVICE_LIMITS.get(device)
    if lim is None:
        def attr(a):
            return int(call(rt.cudaDeviceGetAttribute, a, device))
        lim = DeviceLimits(
            device, attr(_A.cudaDevAttrMaxThreadsPerBlock),
            (attr(_A.cudaDevAttrMaxBlockDimX), attr(_A.cudaDevAttrMaxBlockDimY),
             attr(_A.cudaDevAttrMaxBlockDimZ)),
            (attr(_A.cudaDevAttrMaxGridDimX), attr(_A.cudaDevAttrMaxGridDimY),
             attr(_A.cudaDevAttrMaxGridDimZ)),
            attr(_A.cudaDevAttrMaxSharedMemoryPerBlock),
            attr(_A.cudaDevAttrMaxSharedMemoryPerBlockOptin))
        DEVICE_LIMITS[device] = lim
    return lim


def kernel_limits(kernel, func: int = 0, dev: int = -1) -> KernelLimits:
    """The limits of a loaded kernel's ``CUfunction`` ``func`` on device ``dev`` (default:
    the function looked up last, ``kernel.last_function``), cached until the kernel is collected.

    Calls ``cuFuncGetAttribute`` for the kernel's maximum threads per block, its static
    shared memory and its current dynamic shared memory ceiling.
    """
    if not func:
        func, dev = kernel.last_function  # one tuple: the function and its device together
    lim = KERNEL_LIMITS.get(func)
    if lim is None:
        f = dr.CUfunction(func)

        def attr(a):
            return int(call(dr.cuFuncGetAttribute, a, f))
        cur = ensure_device()  # a current context in this thread for the driver calls
        dev = dev if dev >= 0 else cur  # the function's device
        lim = KernelLimits(kernel.name, func, device_limits(dev),
                           attr(_F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                           attr(_F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
                           attr(_F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES))
        KERNEL_LIMITS[func] = lim
    return lim


def raise_dynamic_smem(lim: KernelLimits, nbytes: int) -> None:
    """Let the kernel take ``nbytes`` of dynamic shared memory
    (``cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)``)."""
    call(dr.cuFuncSetAttribute, dr.CUfunction(lim.func),
         _F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes))
    lim.smem = int(nbytes)


def launch_config(lim: KernelLimits, grid, block, shared_mem) -> tuple:
    """``(grid3, block3, shared_mem)`` checked against ``lim``; raises :class:`ArgumentError`
    naming the kernel, the field and the limit. Raises the kernel's dynamic shared memory
    attribute when the request needs it and the device allows it."""
    g = dims3(grid, f"{lim.name}: grid")
    b = dims3(block, f"{lim.name}: block")
    smem = shared_mem_arg(shared_mem, lim.name)
    bl, gl = lim.block, lim.grid
    if (b[0] * b[1] * b[2] <= lim.threads and b[0] <= bl[0] and b[1] <= bl[1]
            and b[2] <= bl[2] and g[0] <= gl[0] and g[1] <= gl[1] and g[2] <= gl[2]
            and smem <= lim.smem):
        return g, b, smem
    return _over_limit(lim, g, b, smem)


def _over_limit(lim: KernelLimits, g, b, smem) -> tuple:
    """Raise for the first limit exceeded, or raise the shared memory attribute."""
    name = lim.name
    dev = lim.device
    threads = b[0] * b[1] * b[2]
    if threads > lim.threads:
        why = ("the device's maximum (cudaDevAttrMaxThreadsPerBlock)" if lim.threads == dev.threads
               else "this kernel's maximum for its registers / __launch_bounds__ "
                    "(cuFuncGetAttribute CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)")
        raise ArgumentError(f"{name}: block {b} has {threads} threads per block; "
                            f"{why} is {lim.threads} threads per block")
    for axis, v, top in zip("xyz", b, lim.block):
        if v > top:
            raise ArgumentError(f"{name}: block {axis} = {v} exceeds the device's maximum "
                                f"block {axis} of {top} (cudaDevAttrMaxBlockDim{axis.upper()}, "
                                f"device {dev.device})")
    for axis, v, top in zip("xyz", g, lim.grid):
        if v > top:
            raise ArgumentError(f"{name}: grid {axis} = {v} exceeds the device's maximum "
                                f"grid {axis} of {top} (cudaDevAttrMaxGridDim{axis.upper()}, "
                                f"device {dev.device})")
    if smem > lim.smem:
        if smem > lim.smem_optin:
            raise ArgumentError(
                f"{name}: shared_mem = {smem} bytes of dynamic shared memory exceeds the "
                f"maximum of {lim.smem_optin} bytes for this kernel on device {dev.device} "
                f"(cudaDevAttrMaxSharedMemoryPerBlockOptin = {dev.smem_optin} less "
                f"{lim.static_smem} bytes of static shared memory)")
        raise_dynamic_smem(lim, smem)
    return g, b, smem



def require_kernel(kernel, where: str):
    """A :class:`pycudagraph.Kernel` (from ``Module.get_kernel``)."""
    if not (hasattr(kernel, "pack") and hasattr(kernel, "layout")):
        raise ArgumentError(f"{where}: kernel must be a pycudagraph.Kernel (module.get_kernel"
                            f"(name)), got {short_repr(kernel)} ({type(kernel).__name__})")
    return kernel

