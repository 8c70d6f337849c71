"""Launch configurations checked against the device's and the kernel's limits, before CUDA.

==================== ==============================================================
check                used by
==================== ==============================================================
:func:`dims`         grid / block everywhere (through :func:`pycudagraph.compile.args.dim3`)
:func:`kernel_limits` :meth:`Kernel.launch`, ``Graph.add_kernel``, kernel ``set_params``
:func:`launch_config` the same: block, grid and dynamic shared memory vs the device
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
from ..runtime.values import int_arg, is_int, short_repr

__all__ = ["DeviceLimits", "KernelLimits", "DEVICE_LIMITS", "KERNEL_LIMITS", "device_limits",
           "kernel_limits", "launch_config", "dims", "shared_mem_arg", "require_kernel"]

_U32 = 1 << 32


def dims(value, what: str) -> tuple[int, int, int]:
    """A grid or block: an int, or a tuple/list of 1 to 3 ints, each in [1, 2**32).

    Strings, floats and bools are refused (``"12"`` is not (1, 2), 2.7 is not 2).
    """
    if is_int(value):
        items = (int(value),)
    elif isinstance(value, (tuple, list)):
        items = tuple(value)
        if not 1 <= len(items) <= 3:
            raise ArgumentError(f"{what} must have 1 to 3 dimensions, got {value!r}")
        for axis, v in zip("xyz", items):
            if not is_int(v):
                raise ArgumentError(f"{what} {axis} must be an int, got {short_repr(v)} "
                                    f"({type(v).__name__}) in {what}={short_repr(value)}")
        items = tuple(int(v) for v in items)
    else:
        raise ArgumentError(f"{what} must be an int or a tuple of up to 3 ints, got "
                            f"{short_repr(value)} ({type(value).__name__})")
    for axis, v in zip("xyz", items):
        if not 0 < v < _U32:
            raise ArgumentError(f"{what} {axis} must be a positive 32-bit int, got {v} "
                                f"in {what}={short_repr(value)}")
    return items + (1,) * (3 - len(items))


def shared_mem_arg(value, name: str = "") -> int:
    """Dynamic shared memory in bytes: an int in [0, 2**32)."""
    what = f"{name}: shared_mem" if name else "shared_mem"
    return int_arg(value, what, 0, _U32 - 1)


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
    the function looked up last, ``kernel._func``), cached until the kernel is collected.

    Calls ``cuFuncGetAttribute`` for the kernel's maximum threads per block, its static
    shared memory and its current dynamic shared memory ceiling.
    """
    if not func:
        func, dev = kernel._func  # one tuple: the function and its device together
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


def _quick_dims(v):
    """The common grid/block forms (an int, a tuple of 1 to 3 ints in range), or None."""
    t = type(v)
    if t is int:
        return (v, 1, 1) if 0 < v < _U32 else None
    if t is not tuple:
        return None
    n = len(v)
    if n == 3:
        x, y, z = v
    elif n == 2:
        (x, y), z = v, 1
    elif n == 1:
        x, y, z = v[0], 1, 1
    else:
        return None
    if (type(x) is int and type(y) is int and type(z) is int
            and 0 < x < _U32 and 0 < y < _U32 and 0 < z < _U32):
        return (x, y, z)
    return None


def launch_config(lim: KernelLimits, grid, block, shared_mem) -> tuple:
    """``(grid3, block3, shared_mem)`` checked against ``lim``; raises :class:`ArgumentError`
    naming the kernel, the field and the limit. Raises the kernel's dynamic shared memory
    attribute when the request needs it and the device allows it."""
    g = _quick_dims(grid) or dims(grid, f"{lim.name}: grid")
    b = _quick_dims(block) or dims(block, f"{lim.name}: block")
    smem = (shared_mem if type(shared_mem) is int and 0 <= shared_mem < _U32
            else shared_mem_arg(shared_mem, lim.name))
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

