"""How a graphed callable captures one key: warm up on copies of the inputs, capture on a
side stream into the key's pool, instantiate, find where the inputs sit.

The same steps run in the calling thread (``capture="inline"``) or in the callable's
capture thread (``capture="background"``, :mod:`.graphed_background`). The capture is made
in ``"thread_local"`` mode on a side stream of this :class:`Capturer`: CUDA work other
threads queue meanwhile (eager calls, replays of other keys) is not captured, and the pool
routing (:mod:`.pools`) is the capturing thread's own, so their allocations stay out of the
graph's pool.

With a shared pool the graph ends by copying its outputs into arrays of the outputs pool,
allocated before the capture begins (no capture allocates from that pool, so no other
key's scratch can lie there).
"""

from __future__ import annotations

import threading

from ..errors import ArgumentError, PyCudaGraphError
from ..capture.capture import capture
from ..runtime.device import device as device_scope
from ..runtime.stream import Stream
from .arrays import array_info, overlaps, substitute
from .graphed_keys import GraphedEntry
from .ops import framework_streams, twin
from .rebind_plan import RebindPlan
from . import loaded

__all__ = ["Capturer", "check_outputs", "place"]

_END = object()


def place(infos) -> tuple:
    """(frameworks, device or None) of a call's arrays; one device only."""
    frameworks = frozenset(info.framework for info in infos)
    devices = {info.device for info in infos if info.device >= 0}
    if len(devices) > 1:
        raise ArgumentError(f"graphed: the arrays of one call live on devices "
                            f"{sorted(devices)}; one graph runs on one device")
    return frameworks, (devices.pop() if devices else None)


class Capturer:
    """Captures keys of ``fn`` for a :class:`~.graphed_keys.KeyTable`: ``warmup`` eager
    runs on copies of the inputs, then ``cudaStreamBeginCapture`` (thread-local mode) /
    ``cudaStreamEndCapture`` on a side stream per device, ``cudaGraphInstantiate``."""

    def __init__(self, fn, warmup: int, table):
        self.fn = fn
        self.warmup = warmup
        self.table = table
        self._sides: dict = {}  # device -> the side stream captures run on
        self._lock = threading.Lock()

    def side(self, device: int) -> Stream:
        """The side stream of ``device`` (made on first use: ``cudaStreamCreateWithFlags``)."""
        with self._lock:
            side = self._sides.get(device)
            if side is None:
                with device_scope(device):
                    side = self._sides[device] = Stream(non_blocking=True)
            return side

    def capture(self, key, args, kwargs, infos, device: int, ready, warm=None) -> tuple:
        """Warm up on ``warm`` (copies of the inputs; made here on the side stream when
        None) after the event ``ready``, capture ``fn(*args, **kwargs)`` and instantiate.
        Call with ``device`` current. Returns (entry, the warm-up's outputs)."""
        frameworks = frozenset(info.framework for info in infos)
        side = self.side(device)
        side.wait(ready)  # the inputs (and copies) are made on the caller's stream
        try:
            with framework_streams(side.ptr, device):
                warm_args, warm_kwargs = warm if warm is not None else substitute((args, kwargs), twin)
                for _ in range(self.warmup):
                    reference = self.fn(*warm_args, **warm_kwargs)
        finally:  # the copies may go once this returns: nothing may still use them
            side.synchronize()
        del warm, warm_args, warm_kwargs
        table = self.table
        before = table.shared_bytes() if table.shared else 0
        pool, outputs_pool = table.pools_for_capture()
        holders = _holders(reference, outputs_pool, device, side) if outputs_pool else None
        with framework_streams(side.ptr, device):
            with capture(side, mode="thread_local", pool=pool) as cap:
                if outputs_pool is not None:
                    cap.keep(outputs_pool)
                raw = self.fn(*args, **kwargs)
                outputs = _copy_out(raw, holders) if holders is not None else raw
        check_outputs(raw, infos)
        del raw
        exe = cap.graph.instantiate()
        plan = RebindPlan(exe, cap.graph, infos)
        entry = GraphedEntry(key, cap.graph, exe, pool, outputs, plan, frameworks, device,
                             outputs_pool=outputs_pool)
        entry.nbytes = table.shared_bytes() - before if table.shared else 0
        return entry, reference


def check_outputs(outputs, infos) -> None:
    """An output that is an input object is fine only as that very object; one that
    shares an input's bytes otherwise cannot follow the input: refused."""
    ids = {id(info.obj) for info in infos}
    outs = []
    substitute(outputs, lambda a: outs.append(a) or a)
    for n, out in enumerate(outs):
        if id(out) in ids:
            raise ArgumentError(f"graphed: output {n} is one of the inputs; a graph's "
                                "outputs are its own static arrays (return a new array, "
                                "e.g. x.clone(), or nothing for an in-place function)")
        o = array_info(out)
        for i, info in enumerate(infos):
            if overlaps((o.lo, o.hi), (info.lo, info.hi)):
                raise ArgumentError(f"graphed: output {n} shares memory with input {i} "
                                    "(a view of it); it could not follow a new input: "
                                    "return a copy (x[...].clone()) instead")


def _holders(reference, pool, device: int, side) -> list:
    """An empty array like each framework output of the warm-up, allocated from ``pool``
    (outside any capture) on the side stream; None for other outputs (kept as they are)."""
    outs = []
    substitute(reference, lambda a: outs.append(a) or a)
    act = pool.activate(device, side.ptr)
    try:
        with framework_streams(side.ptr, device):
            return [_empty_like(a) for a in outs]
    finally:
        act.close()


def _copy_out(raw, holders):
    """``raw`` with each framework array copied into its holder (``Tensor.copy_``,
    ``cupy.copyto``: captured as the graph's last work)."""
    it = iter(holders)

    def put(a):
        h = next(it, _END)
        if h is _END:
            raise PyCudaGraphError("graphed: the capture returned more arrays than the warm-up")
        if h is None:  # not a PyTorch or CuPy array: kept as it is
            return a
        if tuple(h.shape) != tuple(a.shape) or h.dtype != a.dtype:
            raise PyCudaGraphError(f"graphed: an output of the capture ({tuple(a.shape)}, "
                                   f"{a.dtype}) differs from the warm-up's "
                                   f"({tuple(h.shape)}, {h.dtype})")
        _copy_into(h, a)
        return h

    out = substitute(raw, put)
    if next(it, _END) is not _END:
        raise PyCudaGraphError("graphed: the capture returned fewer arrays than the warm-up")
    return out


def _empty_like(a):
    torch = loaded.torch()
    if torch is not None and isinstance(a, torch.Tensor):
        return torch.empty_like(a, memory_format=torch.preserve_format)
    cupy = loaded.cupy()
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy.empty_like(a)
    return None


def _copy_into(dst, src) -> None:
    torch = loaded.torch()
    if torch is not None and isinstance(dst, torch.Tensor):
        dst.copy_(src)
    else:
        loaded.cupy().copyto(dst, src)
