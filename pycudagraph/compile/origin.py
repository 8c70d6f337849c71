"""Where a kernel made elsewhere comes from: :class:`Origin`, and raw handles.

A :class:`~pycudagraph.compile.kernel.Kernel` made with ``Kernel.from_function`` holds an
:class:`Origin`: the object it came from (kept alive with the kernel, so by every graph
whose nodes use it), how to get its handle, and what its maker fixed about the launch
(a Triton kernel's block, dynamic shared memory and hidden trailing parameters).

Two kinds of handle exist. A ``CUkernel`` / ``cudaKernel_t`` belongs to no context: the
kernel's usual per-device lookup applies (``cuKernelGetFunction``). A ``CUfunction`` is
one context's function: the origin records that device (the current one when it was
adopted) and refuses to run it on another.
"""

from __future__ import annotations

import numpy as np

from .. import _cuda
from .._cuda import call, dr
from .._cuda.context import current_device, thread_state
from ..errors import ArgumentError, CudaError
from ..runtime.device import device
from .dims import dims3
from .signature import Param, parse_params

__all__ = ["Origin", "param_info", "raw_handle", "handle_name", "adopt_handle", "parse_signature",
           "merge_signature"]


def param_info(query, handle) -> list[tuple[int, int]] | None:
    """(offset, size) of each parameter of a loaded kernel through ``query``
    (``cuKernelGetParamInfo`` or ``cuFuncGetParamInfo``), or None when the driver cannot
    tell (older than CUDA 12.4)."""
    info = []
    while True:
        try:
            err, offset, size = query(handle, len(info))
        except (AttributeError, RuntimeError):
            return None
        if err == dr.CUresult.CUDA_ERROR_INVALID_VALUE:
            return info
        if err == dr.CUresult.CUDA_ERROR_NOT_SUPPORTED:
            return None
        if err:
            raise _cuda.error_for(query.__name__, err)
        info.append((int(offset), int(size)))


class Origin:
    """What a kernel adopted by ``Kernel.from_function`` came from.

    Attributes
    ----------
    obj : object
        The object given (a Triton ``CompiledKernel``, a CuPy ``RawKernel``, a Numba
        kernel, a raw handle), kept alive with the kernel.
    what : str
        What it is, for messages (``"Triton kernel"``).
    device : int
        For a ``CUfunction``: the device whose context it belongs to; -1 for a
        context-free ``CUkernel`` (or an image loaded here).
    block : tuple or None
        The block the maker fixed, else None.
    shared_mem : int
        The dynamic shared memory the maker fixed (a minimum), else 0.
    hidden : tuple of int
        Sizes of trailing parameters no argument fills; passed as zeros.
    entries : dict
        Compiled facts (:func:`~pycudagraph.compile.ptx.ptx_entries`) by symbol, when known.
    """

    def __init__(self, obj, what: str, *, handle=None, device: int = -1, library=None,
                 symbol: str = "", block=None, shared_mem: int = 0, hidden=(), entries=None,
                 keep=()):
        self.obj = obj
        self.what = what
        self.device = device
        self.block = block
        self.shared_mem = int(shared_mem)
        self.hidden = tuple(hidden)
        self.entries = dict(entries or {})
        self.keep = tuple(keep)  # more objects the handle needs alive (CuPy's Function)
        self._handle = handle
        self._library = library
        self._symbol = symbol

    @property
    def free_launch(self) -> bool:
        """True when the maker fixed nothing about the launch (any block, any shared memory)."""
        return self.block is None and not self.shared_mem

    def load(self):
        """The raw handle (for an image loaded here: ``cudaLibraryGetKernel``)."""
        if self._library is not None:
            return self._library.kernel(self._symbol)
        return self._handle

    def function_on(self, ordinal: int, name: str) -> int:
        """The ``CUfunction`` to launch on device ``ordinal``: this origin's own, which
        runs on its device only. No CUDA call."""
        if ordinal != self.device:
            raise ArgumentError(
                f"{name}: this {self.what} is a CUfunction of device {self.device}'s context "
                f"and cannot run on device {ordinal}; adopt the kernel once per device (with "
                f"that device current), or adopt a CUkernel, which runs on any device")
        return int(self._handle)

    def param_info(self) -> list[tuple[int, int]] | None:
        """``cuFuncGetParamInfo`` of this origin's ``CUfunction``, in its device's context."""
        func = dr.CUfunction(int(self._handle))
        if thread_state.device == self.device:
            return param_info(dr.cuFuncGetParamInfo, func)
        with device(self.device):
            return param_info(dr.cuFuncGetParamInfo, func)

    def launch_dims(self, name: str, block, shared_mem, strict: bool = False) -> tuple:
        """The block and dynamic shared memory a launch of this kernel takes.

        ``block`` may be None (the fixed block) or equal to it; ``shared_mem`` below the
        fixed amount is raised to it, unless ``strict`` (a change of an existing node's
        parameters, which must be written as given). No CUDA call.
        """
        if self.block is not None:
            if block is None:
                block = self.block
            elif dims3(block, f"{name}: block") != self.block:
                raise ArgumentError(
                    f"{name}: this {self.what} was compiled for blocks of {self.block} threads "
                    f"(num_warps); got block={block!r}: pass kernel.block (or None)")
        if type(shared_mem) is int and shared_mem < self.shared_mem:
            if strict:
                raise ArgumentError(
                    f"{name}: this {self.what} needs {self.shared_mem} bytes of dynamic shared "
                    f"memory; got shared_mem={shared_mem}")
            shared_mem = self.shared_mem
        return block, shared_mem


_HANDLE_TYPES = {"CUfunction": "function", "cudaFunction_t": "function",
                 "CUkernel": "kernel", "cudaKernel_t": "kernel"}


def raw_handle(obj) -> tuple[str, object] | None:
    """``("function", CUfunction)`` or ``("kernel", CUkernel)`` for a raw handle (a
    ``cuda.bindings`` object, or an int taken as a ``CUfunction``), else None. No CUDA call."""
    kind = _HANDLE_TYPES.get(type(obj).__name__)
    if kind is None:
        if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, (int, np.integer)):
            return None
        kind = "function"
    value = int(obj)
    if not 0 <= value < 1 << 64:
        raise ArgumentError(f"Kernel.from_function: a handle is a 64-bit address, got {value}")
    if value == 0:
        raise ArgumentError(f"Kernel.from_function: a null {'CUfunction' if kind == 'function' else 'CUkernel'}")
    return kind, (dr.CUfunction(value) if kind == "function" else dr.CUkernel(value))


def handle_name(kind: str, handle) -> str:
    """The kernel's name in its image (``cuFuncGetName`` / ``cuKernelGetName``), or a
    placeholder when the driver cannot tell."""
    query = dr.cuFuncGetName if kind == "function" else getattr(dr, "cuKernelGetName", None)
    if query is None:
        return f"{kind} 0x{int(handle):x}"
    try:
        name = call(query, handle)
    except (CudaError, AttributeError, RuntimeError):
        return f"{kind} 0x{int(handle):x}"
    return name.decode(errors="replace") if isinstance(name, bytes) else str(name)


def adopt_handle(obj, signature: str | None) -> tuple[str, tuple[Param, ...] | None, Origin]:
    """(name, params or None, origin) of a raw handle, or of an object holding one as
    ``.handle`` (cuda.core's ``Kernel``); None params: read from the image."""
    kind, handle = raw_handle(obj) or raw_handle(obj.handle)
    dev = current_device() if kind == "function" else -1
    name = handle_name(kind, handle)
    what = "CUfunction" if kind == "function" else "CUkernel"
    params = parse_signature(name, signature) if signature is not None else None
    return name, params, Origin(obj, what, handle=handle, device=dev)


def parse_signature(name: str, signature: str) -> tuple[Param, ...]:
    """``signature=`` read as a C parameter list; :class:`ArgumentError` when it cannot be."""
    if not isinstance(signature, str):
        raise ArgumentError(f"{name}: signature= takes a C parameter list (str), got "
                            f"{type(signature).__name__}")
    try:
        return parse_params(signature)
    except ValueError as exc:
        raise ArgumentError(f"{name}: signature={signature!r}: {exc}") from None


def merge_signature(name: str, what: str, known: tuple[Param, ...],
                    signature: str | None) -> tuple[Param, ...]:
    """The parameters ``what`` told, renamed and retyped by ``signature=`` where it
    agrees with them (same count, same sizes); a parameter with its own packing (a
    Numba array, a checked Triton pointer) keeps it and takes the name only."""
    if signature is None:
        return known
    given = parse_signature(name, signature)
    if len(given) != len(known):
        raise ArgumentError(f"{name}: signature= has {len(given)} parameters but the {what} "
                            f"has {len(known)} ({', '.join(p.describe() for p in known)})")
    out = []
    for k, g in zip(known, given):
        if k.parts:  # one argument, several kernel parameters (a Numba array): its name only
            out.append(Param(k.index, g.name, k.ctype, k.kind, k.size, k.align, k.fmt,
                             k.parts, k.convert))
        elif g.size is not None and g.size != k.size:
            raise ArgumentError(f"{name}: parameter {k.index} '{g.name}' is {g.ctype} ({g.size} "
                                f"bytes) in signature= but {k.ctype} ({k.size} bytes) in the {what}")
        elif k.convert is not None:  # its own checks (a Triton value assumed aligned) stay
            out.append(Param(k.index, g.name, g.ctype, k.kind, k.size, k.align, k.fmt,
                             k.parts, k.convert))
        else:
            out.append(g if g.size is not None else g.with_size(k.size))
    return tuple(out)
