"""``pcg.graphed(fn)``: a graphed callable that captures once per input key and rebinds.

The first call for an input key (shapes, strides, dtypes, devices, address alignment, how
the inputs alias each other, and every argument that is not a device array, by value)
warms ``fn`` up on copies of the inputs and captures it on a side stream, memory-safe
(:mod:`.pools`: its temporaries and outputs live in a pool only this graph uses). Every
later call with that key moves the exec to the new inputs' addresses, exact or interior
(a slice of a bigger tensor), with the sites found at capture (:mod:`.rebind_plan`), and
launches it on the caller's current stream: no copy of the inputs, no recapture.

Rules:

- **Outputs are the graph's static outputs**: the same objects every call, overwritten by
  the next call with the same key (``copy_outputs=True`` returns copies instead).
- **Threads**: calls may come from several threads, each launching on its own current
  stream. A call rebinds, launches and (``copy_outputs=True``) copies the outputs on the
  launch stream under one lock; the next launch from another stream waits for that copy
  (an event), so every thread gets its own result. With ``copy_outputs=False`` a thread
  may rely on this only: the static outputs hold its call's result until the next call
  of the same key from any thread (CUDA orders each replay after the previous one, not
  after work a thread queues later on its own stream); read them before another thread
  may call (your own lock around the call and the use, waiting for the use, e.g.
  ``y.cpu()``) or pass ``copy_outputs=True``.
- **Inputs** are not kept beyond the next call: the graph holds the arrays of the latest
  call of each key (it points at them) until the next call of that key or :meth:`clear`.
- ``fn`` must be capturable: no host synchronization, no random numbers from a framework
  generator, no allocation outside the frameworks' allocators; it runs under
  ``torch.no_grad()`` (use ``torch.cuda.make_graphed_callables`` for training).
- A number, string or other non-array argument is part of the key: a new value captures
  a new graph (pass values that change as 0-d device arrays).
- Rebinding rewrites every 8-byte aligned pointer slot whose value lies inside an input's
  bytes; it cannot see addresses a kernel reads from device memory (a table of pointers
  uploaded by a host-to-device copy), and a number that equals an address inside an input
  would be rewritten too. ``check=True`` compares the first replay of each key, and the
  first call that rebinds it, with ``fn`` run eagerly, and refuses the key (raises
  :class:`~pycudagraph.errors.PyCudaGraphError` saying why) when they differ;
  ``check="eager"`` runs such keys eagerly with a warning instead.
- An input that overlaps this graph's own outputs (``y = f(x); f(y)``) is copied first.
"""

from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import dataclass

from .._cuda import ensure_device
from ..errors import ArgumentError, PyCudaGraphError
from ..capture.capture import capture
from ..runtime.device import device as device_scope
from ..runtime.stream import Event, Stream, stream_handle
from .arrays import array_info, flatten, overlaps, substitute
from .graphed_fast import SLOW, FastPath
from .ops import compare, copy_of, current_stream, framework_streams, twin
from .pools import CapturePool
from .rebind_plan import RebindPlan
from ..runtime.values import bool_arg, int_arg

__all__ = ["graphed", "GraphedCallable", "GraphedEntry", "GraphedStats"]

_CHECKS = (False, True, "raise", "eager")
_COPIERS = frozenset(("torch", "cupy"))  # frameworks that copy on their own current stream
_PER_THREAD = 2  # cudaStreamPerThread


@dataclass
class GraphedStats:
    """Counters of a graphed callable: calls, captures, replays (graph launches),
    ``set_params`` calls made to rebind, inputs rebound, inputs copied (they overlapped
    an output), checks run against eager, calls run eagerly (refused keys)."""

    calls: int = 0
    captures: int = 0
    replays: int = 0
    set_params: int = 0
    rebound_inputs: int = 0
    copied_inputs: int = 0
    checks: int = 0
    eager_calls: int = 0


class GraphedEntry:
    """One captured graph of a graphed callable: ``graph``, ``exec``, its ``pool``, the
    static ``outputs``, the rebinding ``plan`` (``plan.slots``: addresses of each input
    in the graph), ``calls``, and ``refused`` (why the key runs eagerly or raises, or "")."""

    def __init__(self, key, graph, exe, pool, outputs, plan, frameworks, device):
        self.key = key
        self.graph = graph
        self.exec = exe
        self.pool = pool
        self.outputs = outputs
        self.plan = plan
        self.frameworks = frameworks
        self.device = device
        self.calls = 0
        self.refused = ""
        self.rebind_checked = False
        self.warned = False
        self.bound = ()  # the arguments the exec points at now (kept alive)
        self.handoff = None  # Event after the last output copy (copy_outputs) ...
        self.handoff_on = None  # ... recorded on this stream handle
        outs = []
        substitute(outputs, lambda a: outs.append(array_info(a)) or a)
        self.output_ranges = [(o.lo, o.hi) for o in outs]

    def __repr__(self) -> str:
        return (f"<GraphedEntry {len(self.graph.nodes)} nodes, {self.calls} calls, "
                f"input slots {self.plan.slots}{', refused' if self.refused else ''}>")


class GraphedCallable:
    """``fn`` captured once per input key and replayed with its inputs rebound (see the
    module docstring for the rules). Made by :func:`graphed`.

    Calls ``cudaStreamBeginCapture`` / ``cudaStreamEndCapture`` and
    ``cudaGraphInstantiate`` on a new key; ``cuGraphExecKernelNodeSetParams`` per kernel
    node that holds a moved input (``cudaGraphExecMemcpyNodeSetParams1D``,
    ``cudaGraphExecMemsetNodeSetParams`` for copies and memsets) and ``cudaGraphLaunch``
    on every call; with ``copy_outputs=True`` ``cudaEventRecord`` after the copies, and
    ``cudaStreamWaitEvent`` before a launch on another stream than the last copy's.
    """

    def __init__(self, fn, copy_outputs: bool = False, check=False, warmup: int = 1,
                 stream=None):
        if not callable(fn):
            raise ArgumentError(f"graphed needs a callable, got {type(fn).__name__}")
        if not isinstance(check, (bool, str)) or check not in _CHECKS:
            raise ArgumentError(f"graphed: check must be one of {_CHECKS}, got {check!r}")
        warmup = int_arg(warmup, "graphed: warmup")
        if warmup < 1:
            raise ArgumentError(f"graphed: warmup must be >= 1 (CuPy compiles and PyTorch "
                                f"sets up cuBLAS on first use), got {warmup}")
        self.fn = fn
        self.copy_outputs = bool_arg(copy_outputs, "graphed: copy_outputs")
        self.check = "raise" if check is True else check
        self.warmup = warmup
        self.stream = Stream.wrap(stream) if stream is not None else None
        self._graphs: dict = {}
        self._stats = GraphedStats()
        self._sides: dict = {}  # device -> the side stream captures run on
        self._lock = threading.RLock()
        self._fast = FastPath(self._lock, self._stats)  # repeats of a known call
        functools.update_wrapper(self, fn, updated=())  # never fn.__dict__ over ours

    @property
    def graphs(self) -> dict:
        """Input key -> :class:`GraphedEntry`, one per captured graph. No CUDA call."""
        return dict(self._graphs)

    @property
    def stats(self) -> GraphedStats:
        """The :class:`GraphedStats` counters. No CUDA call."""
        return self._stats

    def clear(self) -> None:
        """Drop every graph (its pool goes when nothing else holds it). No CUDA call."""
        with self._lock:
            self._graphs.clear()
            self._fast.forget()

    def save(self, path, module=None, bind=None):
        """Save every captured key to the folder ``path`` for :func:`pycudagraph.load_graphed`
        (:func:`~pycudagraph.frameworks.graphed_save.save_graphed`): each key's graph file,
        weights and buffers bound by name, capture pools as sizes. ``cuGraphKernelNodeGetParams``
        and ``cuMemGetAddressRange`` per address, the calls of ``Graph.save``."""
        from .graphed_save import save_graphed
        return save_graphed(self, path, module=module, bind=bind)

    def adopt(self, entry) -> None:
        """Add ``entry``, a :class:`GraphedEntry` made elsewhere (a key loaded by
        :func:`pycudagraph.load_graphed`), as the graph of ``entry.key``. No CUDA call."""
        with self._lock:
            self._graphs[entry.key] = entry
            fast = getattr(self, "_fast", None)  # the fast path's cache, where there is one
            if fast is not None:
                fast.forget()

    def __call__(self, *args, **kwargs):
        out = self._fast.call(self, args, kwargs)  # a repeat of a known call: graphed_fast
        if out is not SLOW:
            return out
        key, infos = flatten(args, kwargs)
        with self._lock:
            st = self._stats
            st.calls += 1
            entry = self._graphs.get(key)
            reference = None  # eager outputs to compare with (check=)
            if entry is None:
                entry, reference = self._capture(key, args, kwargs, infos)
            elif entry.refused:
                return self._refused(entry, args, kwargs)
            entry.calls += 1
            launch_on = self._launch_stream(entry)
            ptrs = [info.ptr for info in infos]
            changed = [i for i, (p, b) in enumerate(zip(ptrs, entry.plan.bound)) if p != b]
            if changed:
                args, kwargs, ptrs = self._unalias(entry, args, kwargs, infos, ptrs, changed)
                if self.check and not entry.rebind_checked:
                    reference = self._eager_reference(entry, args, kwargs)
                    entry.rebind_checked = True
                st.set_params += entry.plan.apply(ptrs, changed)
                st.rebound_inputs += len(changed)
            entry.bound = (args, kwargs)
            if entry.handoff is not None:
                _after_copy(entry, launch_on)
            entry.exec.launch(launch_on)
            st.replays += 1
            if reference is not None:
                self._judge(entry, reference)
                if entry.refused:
                    return self._refused(entry, args, kwargs)
            if self.copy_outputs:  # under the lock: no other replay can come first
                return self._copies(entry, launch_on)
            return entry.outputs

    # Capture ------------------------------------------------------------------------

    def _side(self, device: int) -> Stream:
        side = self._sides.get(device)
        if side is None:
            with device_scope(device):
                side = self._sides[device] = Stream(non_blocking=True)
        return side

    def _capture(self, key, args, kwargs, infos):
        """Warm up on copies, capture on the side stream into a new pool, instantiate and
        plan. Returns the entry and the eager reference outputs (for ``check``) or None."""
        frameworks = frozenset(info.framework for info in infos)
        devices = {info.device for info in infos if info.device >= 0}
        if len(devices) > 1:
            raise ArgumentError(f"graphed: the arrays of one call live on devices "
                                f"{sorted(devices)}; one graph runs on one device")
        device = devices.pop() if devices else None
        with device_scope(device) if device is not None else _nothing():
            device = ensure_device() if device is None else device
            side = self._side(device)
            now = self.stream.ptr if self.stream is not None else current_stream(frameworks, device)
            ready = Event(timing=False)
            ready.record(now)
            side.wait(ready)  # the inputs are made on the caller's stream
            with framework_streams(side.ptr, device):
                warm_args, warm_kwargs = substitute((args, kwargs), twin)
                for _ in range(self.warmup):
                    reference = self.fn(*warm_args, **warm_kwargs)
            side.synchronize()
            del warm_args, warm_kwargs
            pool = CapturePool()
            with framework_streams(side.ptr, device):
                with capture(side, mode="thread_local", pool=pool) as cap:
                    outputs = self.fn(*args, **kwargs)
            self._check_outputs(outputs, args, kwargs, infos)
            exe = cap.graph.instantiate()
            plan = RebindPlan(exe, cap.graph, infos)
        entry = GraphedEntry(key, cap.graph, exe, pool, outputs, plan, frameworks, device)
        self._graphs[key] = entry
        self._stats.captures += 1
        if plan.unproven and not self.check:
            warnings.warn(f"graphed({_name(self.fn)}): rebinding cannot be proven right for "
                          f"this input key: {plan.unproven[0]}; pass check=True to compare "
                          "with eager execution", RuntimeWarning, stacklevel=3)
        return entry, (reference if self.check else None)

    @staticmethod
    def _check_outputs(outputs, args, kwargs, infos) -> None:
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

    # Calls ----------------------------------------------------------------------------

    def _launch_stream(self, entry):
        if self.stream is not None:
            return self.stream
        return current_stream(entry.frameworks, entry.device)

    def _copies(self, entry, launch_on):
        """Copies of the static outputs made on the launch stream, then an event there that
        the next launch from another stream waits for (``cudaEventRecord``)."""
        if self.stream is not None or len(entry.frameworks & _COPIERS) > 1:
            with framework_streams(stream_handle(launch_on), entry.device):
                out = substitute(entry.outputs, copy_of)
        else:  # the framework's current stream is the launch stream
            out = substitute(entry.outputs, copy_of)
        if self.stream is None:  # one fixed stream orders every launch and copy itself
            ev = entry.handoff
            if ev is None:
                with device_scope(entry.device):
                    ev = entry.handoff = Event(timing=False)
            ev.record(launch_on)
            entry.handoff_on = stream_handle(launch_on)
        return out

    def _unalias(self, entry, args, kwargs, infos, ptrs, changed):
        """Copy the moved inputs that overlap this graph's outputs (their bytes would be
        overwritten while the graph reads them)."""
        bad = [i for i in changed
               if any(overlaps((infos[i].lo, infos[i].hi), r) for r in entry.output_ranges)]
        if not bad:
            return args, kwargs, ptrs
        swap = {id(infos[i].obj): twin(infos[i].obj) for i in bad}
        args, kwargs = substitute((args, kwargs), lambda a: swap.get(id(a), a))
        self._stats.copied_inputs += len(bad)
        _, infos = flatten(args, kwargs)
        return args, kwargs, [info.ptr for info in infos]

    def _eager_reference(self, entry, args, kwargs):
        """``fn`` run eagerly on copies of the inputs, on the caller's current stream."""
        with framework_streams(None, entry.device):
            a, k = substitute((args, kwargs), twin)
            return self.fn(*a, **k)

    def _judge(self, entry, reference) -> None:
        self._stats.checks += 1
        got, want = [], []
        substitute(entry.outputs, lambda a: got.append(a) or a)
        substitute(reference, lambda a: want.append(a) or a)
        for n, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w)
            if why:
                entry.refused = (
                    f"graphed({_name(self.fn)}): the graph's output {n} differs from running "
                    f"the function eagerly ({why}). A kernel probably reads addresses from "
                    f"device memory (a pointer table), or a number equal to an input address "
                    f"was rebound, so rebinding cannot be trusted for this input key; keep "
                    f"the inputs at fixed addresses or call the function eagerly")
                return

    def _refused(self, entry, args, kwargs):
        if self.check != "eager":
            raise PyCudaGraphError(entry.refused)
        if not entry.warned:
            entry.warned = True
            warnings.warn(entry.refused + "; running it eagerly", RuntimeWarning, stacklevel=3)
        self._stats.eager_calls += 1
        return self.fn(*args, **kwargs)


def graphed(fn=None, *, copy_outputs: bool = False, check=False, warmup: int = 1,
            stream=None):
    """A :class:`GraphedCallable` of ``fn``; also a decorator (``@pcg.graphed`` or
    ``@pcg.graphed(check=True)``).

    Parameters
    ----------
    fn : callable
        Takes device arrays (PyTorch tensors, CuPy arrays, DeviceBuffers, Numba arrays),
        possibly in tuples, lists and dicts, and hashable values.
    copy_outputs : bool
        Return copies of the outputs (``Tensor.clone`` ...), made on the launch stream
        before the next call can replay, instead of the graph's static outputs, which the
        next call with the same key (from any thread) overwrites.
    check : bool or {"raise", "eager"}
        Compare the first replay of each key, and its first rebinding call, with ``fn``
        run eagerly; on a difference raise (``True`` / ``"raise"``) or run that key eagerly
        with a warning (``"eager"``).
    warmup : int
        Eager runs (on copies of the inputs) before each capture.
    stream : Stream, optional
        Launch here instead of the framework's current stream.

    Notes
    -----
    Each new key: ``cudaStreamBeginCapture``, ``cudaStreamEndCapture``,
    ``cudaGraphInstantiate``; each call: ``cuGraphExecKernelNodeSetParams`` for the kernel
    nodes of moved inputs, ``cudaGraphLaunch``. See :mod:`pycudagraph.frameworks.graphed`.
    """
    options = dict(copy_outputs=copy_outputs, check=check, warmup=warmup, stream=stream)
    if fn is None:
        return lambda f: GraphedCallable(f, **options)
    return GraphedCallable(fn, **options)


def _after_copy(entry, launch_on) -> None:
    """Make a launch on another stream than the last output copy's wait for that copy
    (``cudaStreamWaitEvent``); ``cudaStreamPerThread`` names a different stream in each
    thread, so it always waits."""
    h = stream_handle(launch_on)
    if h != entry.handoff_on or h == _PER_THREAD:
        Stream.wrap(h).wait(entry.handoff)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc) -> bool:
        return False


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
