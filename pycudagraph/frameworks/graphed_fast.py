"""The per-call fast path of a graphed callable: a repeat of a call structure it has seen.

A graphed call normally builds its input key (:func:`.arrays.flatten`: an
:class:`~.arrays.ArrayInfo` per array, a hashable key of every argument) and looks the key
up. Where the graph's GPU work is small, that Python costs more than the launch. A
:class:`FastPath` remembers, for the last few keys it served, the structure of the call
(each positional argument's type; for an array its shape, strides, dtype and device; for a
number or string its value) and answers a call that matches one in a single pass over the
arguments, reading only each array's layout and data address:

- the same addresses as the exec points at: launch on the caller's current stream
  (PyTorch's raw current stream, read without making a stream object);
- new addresses: the same checks the key makes (alignment class, how the arrays alias
  each other) plus the overlap with the graph's outputs, then the entry's rebind plan
  (:meth:`~.rebind_plan.RebindPlan.apply`: one set-params call per node) and the launch.

Everything else goes to the graphed callable's own path (the slow path), unchanged:
keyword arguments, containers, buffers and other array kinds, ``copy_outputs=True``,
``check``, several frameworks in one call, a refused key, a key whose launches hand off
through an event (output copies, a shared pool), an input that overlaps the outputs, and
any structure not seen before (the first call of a structure whose key has a graph is
learned: one :func:`.arrays.flatten`).

The fast path keeps the slow path's rules: it runs under the callable's lock, keeps the
latest inputs in ``entry.bound``, counts calls, replays and rebinds in the same stats, and
launches with ``GraphExec.launch`` (a blocked exec refuses). Its memory is a few entries;
:meth:`FastPath.forget` drops them, and the callable calls it whenever its table of keys
changes other than by a new key (clear, eviction, a key refused or replaced).
"""

from __future__ import annotations

from .arrays import ALIGN_CAP, aliasing, flatten
from ..runtime.stream import stream_handle
from .ops import current_stream
from . import loaded

__all__ = ["FastPath", "SLOW"]

#: What :meth:`FastPath.call` returns when the call must take the slow path.
SLOW = object()
#: How many call structures a fast path remembers (most recently used first).
KEEP = 8
#: How many input addresses a one-input structure remembers as checked (alternating
#: buffers, a small ring of them).
_PASSED = 16

_TORCH, _CUPY, _VALUE = 0, 1, 2
_KINDS = {"torch": _TORCH, "cupy": _CUPY}
#: Argument types matched by value (the key holds them as ``(type, value)``).
_VALUES = frozenset((int, float, bool, complex, str, bytes, type(None)))


class _Known:
    """One learned call structure: the entry it reaches, each argument's spec
    ``(kind, type, shape, strides, dtype, device)`` or ``(_VALUE, type, value)``, each
    array's alignment class and byte span offsets, the key's aliasing, the stream getter."""

    __slots__ = ("entry", "n", "specs", "aligns", "offs", "aliasing", "raw_stream", "device",
                 "passed")

    def __init__(self, entry, args, infos, key_aliasing):
        self.entry = entry
        self.n = len(args)
        self.aliasing = key_aliasing
        self.device = entry.device
        specs, aligns, offs = [], [], []
        arrays = iter(infos)
        for a in args:
            if type(a) in _VALUES:
                specs.append((_VALUE, type(a), a))
                continue
            info = next(arrays)
            _, shape, strides, dtype, dev, align = info.key
            specs.append((_KINDS[info.framework], type(a), shape, strides, dtype, dev))
            aligns.append(align)
            offs.append((info.lo - info.ptr, info.hi - info.ptr))
        self.specs, self.aligns, self.offs = tuple(specs), tuple(aligns), tuple(offs)
        self.passed: set = set()  # one-input calls: addresses :func:`_moved` let through
        self.raw_stream = None
        if "torch" in entry.frameworks:
            self.raw_stream = loaded.torch_private("_cuda_getCurrentRawStream")


def _match(specs, args):
    """The data addresses of ``args`` when each matches its spec, else None. No CUDA call:
    the frameworks' own attributes (``data_ptr``, ``shape``, ``stride`` ...)."""
    ptrs = []
    for a, spec in zip(args, specs):
        if type(a) is not spec[1]:
            return None
        kind = spec[0]
        if kind == _TORCH:
            if (a.shape != spec[2] or a.stride() != spec[3] or a.dtype != spec[4]
                    or a.get_device() != spec[5]):
                return None
            ptrs.append(a.data_ptr())
        elif kind == _CUPY:
            d = a.data
            if (a.shape != spec[2] or a.strides != spec[3] or a.dtype != spec[4]
                    or d.device_id != spec[5]):
                return None
            ptrs.append(d.ptr)
        elif a is not spec[2] and a != spec[2]:  # as the key compares (identity, then ==)
            return None
    return ptrs


def _moved(known, ptrs):
    """The indices of the inputs that moved from where the exec points, or None when they
    may not move with the same key (alignment class, aliasing) or a moved one overlaps the
    graph's outputs (the slow path copies those). ``ptrs`` differs from the plan's."""
    entry = known.entry
    aligns, offs = known.aligns, known.offs
    if len(ptrs) == 1:  # the common case, written out; its answer depends on p alone
        p = ptrs[0]
        passed = known.passed
        if p in passed:
            return [0]
        if (min(p & -p, ALIGN_CAP) if p else ALIGN_CAP) != aligns[0]:
            return None
        lo, hi = p + offs[0][0], p + offs[0][1]
        for olo, ohi in entry.output_ranges:
            if lo < ohi and olo < hi:
                return None
        if len(passed) >= _PASSED:
            passed.clear()
        passed.add(p)
        return [0]
    bound = entry.plan.bound
    changed = [i for i, p in enumerate(ptrs) if p != bound[i]]
    for i in changed:
        p = ptrs[i]
        if (min(p & -p, ALIGN_CAP) if p else ALIGN_CAP) != aligns[i]:
            return None
        lo, hi = p + offs[i][0], p + offs[i][1]
        for olo, ohi in entry.output_ranges:
            if lo < ohi and olo < hi:
                return None
    spans = [(p + o[0], p + o[1], p) for p, o in zip(ptrs, offs)]
    if aliasing(spans) != known.aliasing:
        return None
    return changed


def _fits(entry, n_arrays: int) -> bool:
    """Whether the fast path may serve ``entry`` (see the module docstring)."""
    return (len(entry.frameworks) == 1 and not entry.refused and entry.handoff is None
            and not getattr(entry, "needs_check", False) and len(entry.plan.bound) == n_arrays)


class FastPath:
    """The fast path of one graphed callable (see the module docstring).

    Parameters
    ----------
    lock : threading.RLock
        The callable's lock: every call, fast or slow, runs under it.
    stats : GraphedStats
        The callable's counters.

    Notes
    -----
    :meth:`call` makes ``cuGraphExecKernelNodeSetParams`` per kernel node of a moved input
    (``cudaGraphExecMemcpyNodeSetParams1D``, ``cudaGraphExecMemsetNodeSetParams`` for
    copies and memsets) and ``cuGraphLaunch``; nothing else.
    """

    __slots__ = ("_lock", "_stats", "_known")

    def __init__(self, lock, stats):
        self._lock = lock
        self._stats = stats
        self._known: list = []

    def forget(self) -> None:
        """Drop every learned call structure (the callable's keys changed). No CUDA call."""
        self._known = []

    @property
    def known(self) -> int:
        """How many call structures are learned now. No CUDA call."""
        return len(self._known)

    def call(self, owner, args: tuple, kwargs: dict):
        """Serve a call of ``owner`` (a :class:`~.graphed.GraphedCallable`) if it repeats a
        learned structure, or learn it when its key has a graph; else return :data:`SLOW`
        having changed nothing. Returns the entry's static outputs.

        Makes ``cuGraphExecKernelNodeSetParams`` (and the copy / memset node twins) for
        moved inputs, then ``cuGraphLaunch`` on ``owner.stream`` or the framework's current
        stream (PyTorch: ``torch._C._cuda_getCurrentRawStream``)."""
        if kwargs or owner.copy_outputs or owner.check:
            return SLOW
        with self._lock:
            knowns = self._known
            n = len(args)
            for known in knowns:
                if known.n == n:
                    ptrs = _match(known.specs, args)
                    if ptrs is not None:
                        if ptrs == known.entry.plan.bound:
                            changed = None
                            break
                        changed = _moved(known, ptrs)
                        if changed is not None:
                            break
            else:
                known, ptrs, changed = self._learn(owner, args)
                if known is None:
                    return SLOW
            entry = known.entry
            if entry.refused or entry.handoff is not None:
                return SLOW
            st = self._stats
            st.calls += 1
            entry.calls += 1
            entry.last_used = st.calls
            if known is not knowns[0]:
                knowns.remove(known)
                knowns.insert(0, known)
            if changed:
                st.set_params += entry.plan.apply(ptrs, changed)
                st.rebound_inputs += len(changed)
            entry.bound = (args, kwargs)
            stream = owner.stream
            if stream is None:
                get = known.raw_stream
                stream = (get(known.device) if get is not None
                          else current_stream(entry.frameworks, known.device))
            order = entry.order  # a shared pool's keys: ordered across streams (graphed_keys)
            if order.shared:
                order.launch(entry.exec, stream,
                             stream if type(stream) is int else stream_handle(stream))
            else:
                entry.exec.launch(stream)
            st.replays += 1
            return entry.outputs

    def _learn(self, owner, args):
        """(known, addresses, moved inputs) for a call whose key has a graph the fast path
        may serve, remembered first; (None, None, None) otherwise. One
        :func:`.arrays.flatten`."""
        nothing = None, None, None
        torch, cupy = loaded.torch(), loaded.cupy()
        kinds = set()
        for a in args:
            if type(a) in _VALUES:
                continue
            if torch is not None and isinstance(a, torch.Tensor):
                kinds.add(_TORCH)
            elif cupy is not None and isinstance(a, cupy.ndarray):
                kinds.add(_CUPY)
            else:
                return nothing
        if len(kinds) != 1:
            return nothing
        try:
            key, infos = flatten(args, {})
        except Exception:  # noqa: BLE001 - the slow path raises it with its own message
            return nothing
        entry = owner.graphs.get(key)
        if entry is None or not _fits(entry, len(infos)):
            return nothing
        known = _Known(entry, args, infos, key[-1])
        ptrs = [info.ptr for info in infos]
        changed = None
        if ptrs != entry.plan.bound:
            changed = _moved(known, ptrs)
            if changed is None:  # a moved input over the outputs: the slow path copies it
                return nothing
        knowns = self._known
        knowns.insert(0, known)
        del knowns[KEEP:]
        return known, ptrs, changed
