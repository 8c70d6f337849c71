"""The device's memory pool for graph allocations (``cudaGraphAddMemAllocNode`` nodes).

CUDA keeps the memory of graph allocations in a per-device pool: *used* is what is
mapped to graph execs' allocations (``cudaGraphMemAttrUsedMemCurrent``, "associated with
graphs"), *reserved* is what the pool has taken from the device. An exec keeps its
allocations' memory mapped between launches, even when the graph frees them itself
(measured on an H100, CUDA 13.0 driver: *used* stays at the allocation's size after a
launch whose graph allocates and frees); destroying the exec unmaps it, and
``graph_mem_trim`` then hands unused reserved memory back. The high watermarks can be
reset to zero.
"""

from __future__ import annotations

from .._cuda import call, dr, ensure_device, rt
from .device import _ordinal
from .values import bool_arg

__all__ = ["graph_mem_info", "graph_mem_trim", "graph_mem_reset_high"]

_A = rt.cudaGraphMemAttributeType
_ATTRS = {"used": _A.cudaGraphMemAttrUsedMemCurrent,
          "used_high": _A.cudaGraphMemAttrUsedMemHigh,
          "reserved": _A.cudaGraphMemAttrReservedMemCurrent,
          "reserved_high": _A.cudaGraphMemAttrReservedMemHigh}


def _device(device) -> int:
    return ensure_device() if device is None else _ordinal(device)


def graph_mem_info(device=None) -> dict[str, int]:
    """Bytes of the graph memory pool (``cudaDeviceGetGraphMemAttribute``).

    Parameters
    ----------
    device : Device or int, optional
        The device (default: the current one).

    Returns
    -------
    dict
        ``used`` (mapped to graph execs' allocations now, which live execs keep between
        launches), ``used_high`` (its high watermark),
        ``reserved`` (taken from the device by the pool now), ``reserved_high``.
    """
    dev = _device(device)
    return {name: int(call(rt.cudaDeviceGetGraphMemAttribute, dev, attr))
            for name, attr in _ATTRS.items()}


def graph_mem_trim(device=None) -> None:
    """Return the pool's unused reserved memory to the device (``cudaDeviceGraphMemTrim``).

    Memory backing allocations of graphs that are not freed, or of execs that may still
    run, stays reserved.

    Parameters
    ----------
    device : Device or int, optional
        The device (default: the current one).
    """
    call(rt.cudaDeviceGraphMemTrim, _device(device))


def graph_mem_reset_high(device=None, used: bool = True, reserved: bool = True) -> None:
    """Reset the high watermarks to zero (``cudaDeviceSetGraphMemAttribute``; zero is the
    only value CUDA accepts).

    Parameters
    ----------
    device : Device or int, optional
        The device (default: the current one).
    used, reserved : bool
        Which watermarks to reset.
    """
    flags = [(name, bool_arg(on, f"graph_mem_reset_high: {name.split('_')[0]}"))
             for name, on in (("used_high", used), ("reserved_high", reserved))]
    dev = _device(device)
    for name, on in flags:
        if on:
            call(rt.cudaDeviceSetGraphMemAttribute, dev, _ATTRS[name], dr.cuuint64_t(0))
