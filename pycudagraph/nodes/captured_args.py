"""Arguments of kernel nodes pycudagraph did not build (captured from PyTorch, CuPy,
cuBLAS), as bytes: :class:`CapturedArgs`.

A captured kernel node carries no signature; its arguments are read as bytes: the sizes
and offsets come from the function (``cuFuncGetParamInfo``, or ``cuKernelGetParamInfo``
for a library kernel), the values from the node's ``kernelParams`` array
(``cuGraphKernelNodeGetParams``). Arguments are addressed by index; a new value is encoded
to exactly the argument's size (a pointer, a device array, a number or bytes) and written
with ``cuGraphExecKernelNodeSetParams`` (in an exec) or ``cuGraphKernelNodeSetParams`` (in
the graph). Each exec keeps its own copy of the bytes in its record of the node
(:class:`~pycudagraph.nodes.exec_node.ExecNode`), so later updates start from what the exec
holds, not from the graph.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from .._cuda import call, context, dr
from ..compile import library
from ..compile.dims import dims3, shared_mem_arg
from ..errors import ArgumentError, PyCudaGraphError
from ..runtime.pointers import device_pointer
from .exec_node import ExecNode

__all__ = ["param_info", "encode", "CapturedArgs", "function_params", "function_offsets"]

_VP = ctypes.c_void_p
_U64 = struct.Struct("<Q")
_INFO: dict[int, list[tuple[int, int]]] = {}  # function/kernel handle -> (offset, size) list
_INFO_UNLOADS = [0]  # library.unloads when _INFO was last emptied


def param_info(p) -> list[tuple[int, int]]:
    """(offset, size) of every parameter of the function a kernel node launches.

    ``p`` is the node's ``CUDA_KERNEL_NODE_PARAMS`` (``cuGraphKernelNodeGetParams``).
    Asks ``cuFuncGetParamInfo`` (or ``cuKernelGetParamInfo`` when the node names a
    ``CUkernel``) for index 0, 1, ... until the driver answers ``CUDA_ERROR_INVALID_VALUE``.
    The answers are kept by handle until a library of this package is unloaded (a handle
    may then name another function).
    """
    return _info(int(p.func), int(p.kern))


def _info(func: int, kern: int) -> list[tuple[int, int]]:
    """:func:`param_info` of the ``CUfunction`` ``func``, or (0) of the ``CUkernel`` ``kern``."""
    key = func or kern
    if _INFO_UNLOADS[0] != library.unloads:
        _INFO.clear()
        _INFO_UNLOADS[0] = library.unloads
    info = _INFO.get(key)
    if info is not None:
        return info
    if func:
        fn, name, h = dr.cuFuncGetParamInfo, "cuFuncGetParamInfo", dr.CUfunction(func)
    elif kern:
        fn, name, h = dr.cuKernelGetParamInfo, "cuKernelGetParamInfo", dr.CUkernel(kern)
    else:
        raise PyCudaGraphError("the kernel node names neither a CUfunction nor a CUkernel")
    info = []
    while True:
        err, offset, size = fn(h, len(info))
        if err == dr.CUresult.CUDA_ERROR_INVALID_VALUE:
            break
        if err:
            from .._cuda import error_for
            raise error_for(name, err, "reading the sizes of a captured kernel's parameters "
                                       "needs a CUDA 12.4 driver or newer")
        info.append((int(offset), int(size)))
    _INFO[key] = info
    return info


def encode(value, size: int, where: str) -> bytes:
    """``value`` as exactly ``size`` bytes for a kernel argument, or :class:`ArgumentError`.

    bytes-like: taken as they are (their length must be ``size``); ``float``: IEEE single
    (4 bytes) or double (8); ``int``/``bool``: little-endian two's complement (1, 2, 4 or
    8 bytes); numpy scalars: their bytes; anything with a device address (a
    :class:`~pycudagraph.DeviceBuffer`, a CuPy array, a PyTorch tensor): an 8-byte pointer.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if len(data) != size:
            raise ArgumentError(f"{where}: {len(data)} bytes given for a {size}-byte argument")
        return data
    if isinstance(value, np.generic):
        data = value.tobytes()
        if len(data) != size:
            raise ArgumentError(f"{where}: a {value.dtype} ({len(data)} bytes) for a "
                                f"{size}-byte argument")
        return data
    if isinstance(value, float):
        if size not in (4, 8):
            raise ArgumentError(f"{where}: a float fits a 4- or 8-byte argument, not {size} bytes")
        return struct.pack("<f" if size == 4 else "<d", value)
    if isinstance(value, (bool, int)):
        v = int(value)
        if size not in (1, 2, 4, 8):
            raise ArgumentError(f"{where}: an int fits a 1-, 2-, 4- or 8-byte argument, "
                                f"not {size} bytes")
        try:
            return v.to_bytes(size, "little", signed=v < 0)
        except OverflowError:
            raise ArgumentError(f"{where}: {v} does not fit {size} bytes") from None
    try:
        ptr = device_pointer(value)
    except TypeError as exc:
        raise ArgumentError(f"{where}: {exc}") from None
    if size != 8:
        raise ArgumentError(f"{where}: a device address is 8 bytes; the argument has {size}")
    return _U64.pack(ptr)


class CapturedArgs:
    """The argument bytes of one captured kernel node, in buffers whose addresses form
    the ``kernelParams`` array handed to the set-params calls."""

    __slots__ = ("params", "info", "bufs", "ptrs")

    def __init__(self, p, info: list[tuple[int, int]]):
        self.params = p
        self.info = info
        kp = int(p.kernelParams)
        if info and not kp:
            raise PyCudaGraphError("the captured kernel node passes its arguments in 'extra' "
                                   "(a packed buffer), not kernelParams: not supported")
        src = (_VP * len(info)).from_address(kp) if info else ()
        self.bufs = [ctypes.create_string_buffer(ctypes.string_at(src[i], size), size)
                     for i, (_, size) in enumerate(info)]
        self.ptrs = (_VP * max(len(info), 1))(*[ctypes.addressof(b) for b in self.bufs])

    @classmethod
    def of(cls, node) -> "CapturedArgs":
        """The argument bytes ``node`` (a kernel node) holds in its graph, copied."""
        p = node.driver_params()
        return cls(p, param_info(p))

    def get(self, i: int) -> bytes:
        return self.bufs[i].raw

    def spans(self) -> list:
        """``(index, offset in the parameter buffer, bytes)`` of every argument, as
        :func:`~pycudagraph.nodes.arg_slots.arg_sites` reads them. No CUDA call."""
        return [(i, off, b.raw) for i, ((off, _), b) in enumerate(zip(self.info, self.bufs))]

    def put(self, i: int, data: bytes) -> None:
        ctypes.memmove(self.bufs[i], data, len(data))

    def index(self, index, where: str) -> int:
        if isinstance(index, str):
            raise ArgumentError(f"{where}: a captured kernel has no parameter names; give the "
                                f"argument's index (0..{len(self.info) - 1})")
        if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < len(self.info):
            raise ArgumentError(f"{where}: argument index {index!r} out of range: the kernel "
                                f"has {len(self.info)} arguments")
        return int(index)

    def struct_with(self, grid=None, block=None, shared_mem=None):
        """The node's ``CUDA_KERNEL_NODE_PARAMS`` with our buffers (and changed dims)."""
        p = self.params
        if grid is not None:
            p.gridDimX, p.gridDimY, p.gridDimZ = dims3(grid, "grid")
        if block is not None:
            p.blockDimX, p.blockDimY, p.blockDimZ = dims3(block, "block")
        if shared_mem is not None:
            p.sharedMemBytes = shared_mem_arg(shared_mem)
        p.kernelParams = ctypes.addressof(self.ptrs)
        return p

    def apply(self, args, where: str) -> list:
        """Encode ``args`` ({index: value} or a full sequence) into the buffers; all are
        checked before any is written. Returns the (index, value) pairs given (to keep
        alive)."""
        if args is None:
            return []
        if isinstance(args, dict):
            items = [(self.index(k, where), v) for k, v in args.items()]
        else:
            args = list(args)
            if len(args) != len(self.info):
                raise ArgumentError(f"{where}: {len(args)} arguments given; the kernel has "
                                    f"{len(self.info)}")
            items = list(enumerate(args))
        data = [(i, encode(v, self.info[i][1], f"{where} argument {i}")) for i, v in items]
        for i, d in data:
            self.put(i, d)
        return items

    def exec_set(self, rec: ExecNode, args=None, grid=None, block=None, shared_mem=None):
        """Change the node in ``rec``'s exec (``cuGraphExecKernelNodeSetParams``); on failure
        the exec's bytes are put back."""
        where = f"set_params(KernelNode 0x{rec.node_h:x})"
        before = [self.get(i) for i in range(len(self.info))]
        p = self.params
        dims = (p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ,
                p.sharedMemBytes)
        try:
            keep = self.apply(args, where)
            _exec_call(rec.exec_raw, rec.node_h, self.struct_with(grid, block, shared_mem))
        except Exception:  # a failed update changes nothing
            for i, b in enumerate(before):
                self.put(i, b)
            (p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ,
             p.sharedMemBytes) = dims
            raise
        for i, v in keep:  # one place per argument: what it held before is retired
            rec.hold(("arg", i), v)

    def exec_set_arg(self, rec: ExecNode, index, value) -> None:
        """One argument, by index, in ``rec``'s exec."""
        i = self.index(index, f"set_arg(KernelNode 0x{rec.node_h:x})")
        self.exec_set(rec, args={i: value})


def _exec_call(exec_raw, node_h: int, p) -> None:
    context.ensure_device()
    call(dr.cuGraphExecKernelNodeSetParams, dr.CUgraphExec(int(exec_raw)), dr.CUgraphNode(node_h), p)


def function_offsets(func: int, sizes) -> list[int]:
    """The offset of each argument of the ``CUfunction`` ``func``, once ``sizes`` (bytes per
    argument) are checked to be exactly its argument sizes (``cuFuncGetParamInfo``, kept by
    handle); :class:`ArgumentError` when not."""
    context.ensure_device()
    info = _info(int(func), 0)
    sizes = list(sizes)
    if len(info) != len(sizes) or any(size != n for (_, size), n in zip(info, sizes)):
        raise ArgumentError(f"the function takes arguments of {[size for _, size in info]} "
                            f"bytes; {sizes} were given")
    return [off for off, _ in info]


def function_params(func: int, grid, block, shared_mem: int, args) -> tuple:
    """``(params, keep, offsets)``: a ``CUDA_KERNEL_NODE_PARAMS`` launching the ``CUfunction``
    ``func`` with ``args`` (each exactly its argument's bytes, checked against
    ``cuFuncGetParamInfo``), the buffers its ``kernelParams`` points at (keep them until the
    add call returns) and each argument's offset."""
    offsets = function_offsets(func, [len(a) for a in args])  # the sizes checked
    p = dr.CUDA_KERNEL_NODE_PARAMS()
    p.func = dr.CUfunction(int(func))
    bufs = [ctypes.create_string_buffer(bytes(a), len(a)) for a in args]
    ptrs = (_VP * max(len(bufs), 1))(*[ctypes.addressof(b) for b in bufs])
    p.gridDimX, p.gridDimY, p.gridDimZ = dims3(grid, "grid")
    p.blockDimX, p.blockDimY, p.blockDimZ = dims3(block, "block")
    p.sharedMemBytes = shared_mem_arg(shared_mem)
    p.kernelParams = ctypes.addressof(ptrs)
    return p, (bufs, ptrs), offsets
