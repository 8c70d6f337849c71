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
- **Keys captured off the hot path** (``capture="background"``): a new key's calls run
  ``fn`` eagerly on the caller's stream while the callable's capture thread captures it
  (:mod:`.graphed_background`); later calls replay. No call waits for a capture.
- **Failures** (``fallback="eager"``): a key whose capture fails runs eagerly from then on,
  with one warning that carries the capture's error. ``memory_budget=``: a key whose graph
  would take the pools beyond it runs eagerly, or (``over_budget="evict"``) the least
  recently used keys are dropped (:mod:`.graphed_keys`).
- **Pools** (``pool="shared"``, the default): every key captures into one pool, so keys
  share scratch memory and are replayed one at a time (the lock, and a launch from another
  stream waits for the last launch); each graph ends by copying its outputs into arrays of
  their own, so a key's static outputs stay valid while other keys replay. A stream you
  launched on must stay alive until a call comes from another stream (the wait is
  recorded on it then). ``pool="private"``: one pool per key, no output copy.
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
- **Weights that move** (``watch_weights=True``, :mod:`.weight_watch`): the storages of the
  module's weights are kept while a graph reads them; a weight moved or replaced drops the
  graphs with one warning, and each key is captured again on its next call.
"""

from __future__ import annotations

import functools
import threading
import warnings

from ..errors import ArgumentError, PyCudaGraphError
from ..runtime.device import device as device_scope
from ..runtime.stream import PER_THREAD, Event, Stream, stream_handle
from ..runtime.values import bool_arg, choice_arg, int_arg, str_arg
from .arrays import flatten, overlaps, substitute
from .graphed_background import BackgroundCaptures
from .graphed_capture import Capturer
from .graphed_fast import SLOW, FastPath
from .graphed_keys import GraphedEntry, GraphedStats, KeyTable
from .graphed_new_keys import NewKeys, _name
from .ops import compare, copy_of, current_stream, framework_streams, twin
from .weight_watch import watch_for

__all__ = ["graphed", "GraphedCallable", "GraphedEntry", "GraphedStats"]

_CHECKS = (False, True, "raise", "eager")
_COPIERS = frozenset(("torch", "cupy"))  # frameworks that copy on their own current stream
_MODES = {"capture": ("inline", "background"), "fallback": ("raise", "eager"),
          "pool": ("shared", "private"), "over_budget": ("eager", "evict")}


class GraphedCallable(NewKeys):
    """``fn`` captured once per input key and replayed with its inputs rebound (see the
    module docstring for the rules). Made by :func:`graphed`.

    Calls ``cudaStreamBeginCapture`` / ``cudaStreamEndCapture`` and
    ``cudaGraphInstantiate`` on a new key; ``cuGraphExecKernelNodeSetParams`` per kernel
    node that holds a moved input (``cudaGraphExecMemcpyNodeSetParams1D``,
    ``cudaGraphExecMemsetNodeSetParams`` for copies and memsets) and ``cudaGraphLaunch``
    on every call; with ``copy_outputs=True`` ``cudaEventRecord`` after the copies, and
    ``cudaStreamWaitEvent`` before a launch on another stream than the last copy's (or,
    in a shared pool, than the last launch's).
    """

    def __init__(self, fn, copy_outputs: bool = False, check=False, warmup: int = 1,
                 stream=None, capture: str = "inline", fallback: str = "raise",
                 memory_budget=None, pool: str = "shared", over_budget: str = "eager",
                 watch_weights: bool = True):
        if not callable(fn):
            raise ArgumentError(f"graphed needs a callable, got {type(fn).__name__}")
        if not isinstance(check, (bool, str)) or check not in _CHECKS:
            raise ArgumentError(f"graphed: check must be one of {_CHECKS}, got {check!r}")
        warmup = int_arg(warmup, "graphed: warmup")
        if warmup < 1:
            raise ArgumentError(f"graphed: warmup must be >= 1 (CuPy compiles and PyTorch "
                                f"sets up cuBLAS on first use), got {warmup}")
        for name, value in (("capture", capture), ("fallback", fallback), ("pool", pool),
                            ("over_budget", over_budget)):
            choice_arg(value, _MODES[name], f"graphed: {name}")
        if memory_budget is not None:
            memory_budget = int_arg(memory_budget, "graphed: memory_budget (bytes)", lo=0)
        if over_budget == "evict" and pool == "shared":
            raise ArgumentError("graphed: over_budget='evict' needs pool='private' (the keys "
                                "of a shared pool share its memory: dropping one frees none)")
        self.fn = fn
        self.copy_outputs = bool_arg(copy_outputs, "graphed: copy_outputs")
        self.check = "raise" if check is True else check
        self.warmup = warmup
        self.stream = Stream.wrap(stream) if stream is not None else None
        self.capture, self.fallback, self.pool = capture, fallback, pool
        self.memory_budget, self.over_budget = memory_budget, over_budget
        self._stats = GraphedStats()
        self._lock = threading.RLock()
        self._fast = FastPath(self._lock, self._stats)  # repeats of a known call
        self._keys = KeyTable(pool, self.copy_outputs, memory_budget, over_budget)
        self._keys.on_change = self._fast.forget
        self._graphs = self._keys.graphs
        if bool_arg(watch_weights, "graphed: watch_weights"):
            self._keys.watch = watch_for(fn)
        self._capturer = Capturer(fn, warmup, self._keys)
        self._background = BackgroundCaptures(self._capture_job, self._finish_job)
        functools.update_wrapper(self, fn, updated=())  # never fn.__dict__ over ours

    @property
    def graphs(self) -> dict:
        """Input key -> :class:`GraphedEntry`, one per captured graph. No CUDA call."""
        return dict(self._graphs)

    @property
    def stats(self) -> GraphedStats:
        """The :class:`GraphedStats` counters. No CUDA call."""
        return self._stats

    @property
    def pending(self) -> tuple:
        """The keys a background capture is working on now. No CUDA call."""
        with self._lock:
            return tuple(self._keys.pending)

    @property
    def eager_keys(self) -> dict:
        """Key -> why it runs eagerly (its capture failed, or its graph went beyond the
        memory budget). No CUDA call."""
        with self._lock:
            return {k: why for k, (why, _) in self._keys.eager.items()}

    def memory(self) -> dict:
        """What the keys' pools hold: ``{"total": bytes, "shared": bytes, "pools": n,
        "keys": {key: bytes}}`` (see :meth:`.graphed_keys.KeyTable.memory`). No CUDA call:
        PyTorch's ``memory_snapshot``, CuPy's ``MemoryPool.total_bytes``."""
        with self._lock:
            return self._keys.memory()

    def wait_captures(self, timeout: float | None = None) -> bool:
        """Wait until no background capture is queued or running; False on timeout. No
        CUDA call of its own."""
        return self._background.wait(timeout)

    def clear(self) -> None:
        """Drop every graph (its pool goes when nothing else holds it) and every eager
        key; a background capture running now is thrown away when it ends. No CUDA call."""
        with self._lock:
            self._background.cancel()
            self._keys.clear()

    def save(self, path, module=None, bind=None, progress=None):
        """Save every captured key to the folder ``path`` for :func:`pycudagraph.load_graphed`
        (:func:`~pycudagraph.frameworks.graphed_save.save_graphed`): each key's graph file,
        weights and buffers bound by name, capture pools as sizes; ``progress`` (``print``, a
        logger's ``info``) gets a line after each key. ``cuGraphKernelNodeGetParams`` and
        ``cuMemGetAddressRange`` per address, the calls of ``Graph.save``.

        Returns a :class:`~pycudagraph.frameworks.graphed_save.SaveReport`. Keys with no
        graph are not saved, each kind with a ``RuntimeWarning``: those a background capture
        is still working on (call :meth:`wait_captures` first) and those in
        :attr:`eager_keys` (``SaveReport.eager``)."""
        from .graphed_save import save_graphed
        return save_graphed(self, path, module=module, bind=bind, progress=progress)

    def adopt(self, entry) -> str:
        """Add ``entry``, a :class:`GraphedEntry` made elsewhere (a key loaded by
        :func:`pycudagraph.load_graphed`), as the graph of ``entry.key``, as a capture is
        added (the memory budget, a shared pool's launch order). Returns "" or why the
        memory budget refused it (the key then runs eagerly). No CUDA call."""
        with self._lock:
            self._keys.eager.pop(entry.key, None)
            return self._keys.admit(entry, self._stats)  # (its change hook: the fast path forgets)

    def run_eagerly(self, key, why: str) -> None:
        """From now on the calls of input key ``key`` (a key of :attr:`graphs` or
        :attr:`eager_keys`) run ``fn`` eagerly, for the reason ``why``, which the key's next
        call gives in one warning; its graph, if any, is dropped. No CUDA call."""
        why = str_arg(why, "run_eagerly: why")
        with self._lock:
            self._keys.run_eagerly(key, why)

    @property
    def weight_watch(self):
        """The :class:`~.weight_watch.WeightWatch` of the module the graphs read, or None
        (``watch_weights=False``, no module found). No CUDA call."""
        return self._keys.watch

    @weight_watch.setter
    def weight_watch(self, watch) -> None:
        self._keys.watch = watch

    def _weights_moved(self, why: str) -> None:
        """Drop every graph: a weight they read moved (:mod:`.weight_watch`)."""
        with self._lock:
            if self.weight_watch.moved() is None:  # another thread dropped them first
                return
            n = len(self._graphs)
            self.clear()
        warnings.warn(f"graphed({_name(self.fn)}): {why}; its {n} graph(s) read the weights "
                      "they were captured with, so they are dropped and each key is captured "
                      "again on its next call", RuntimeWarning, stacklevel=3)

    def __call__(self, *args, **kwargs):
        watch = self._keys.watch
        if watch is not None:
            why = watch.moved()
            if why is not None:
                self._weights_moved(why)
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
                entry, reference = self._new_key(key, args, kwargs, infos)
            elif entry.refused:
                return self._refused(entry, args, kwargs)
            if entry is not None:
                return self._replay(entry, reference, args, kwargs, infos)
            st.eager_calls += 1
        return self._eager(args, kwargs, infos)  # outside the lock: other calls go on

    def _replay(self, entry, reference, args, kwargs, infos):
        st = self._stats
        entry.calls += 1
        entry.last_used = st.calls
        launch_on = self._launch_stream(entry)
        ptrs = [info.ptr for info in infos]
        changed = [i for i, (p, b) in enumerate(zip(ptrs, entry.plan.bound)) if p != b]
        if changed:
            args, kwargs, ptrs = self._unalias(entry, args, kwargs, infos, ptrs, changed)
            if self.check and not entry.rebind_checked:
                reference = self._eager_reference(entry, args, kwargs)
                entry.rebind_checked, entry.needs_check = True, False
            st.set_params += entry.plan.apply(ptrs, changed)
            st.rebound_inputs += len(changed)
        if self.check and entry.needs_check:  # a background capture's first replay
            reference = self._eager_reference(entry, args, kwargs)
        entry.needs_check = False
        entry.bound = (args, kwargs)
        order, h = entry.order, stream_handle(launch_on)
        if order.event is not None:
            _after_copy(order, h)
        elif order.shared:
            order.follow(h)
        entry.exec.launch(launch_on)
        st.replays += 1
        if reference is not None:
            self._judge(entry, reference)
            if entry.refused:
                return self._refused(entry, args, kwargs)
        if self.copy_outputs:  # under the lock: no other replay can come first
            return self._copies(entry, launch_on)
        order.after(h)
        return entry.outputs

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
            order = entry.order
            if order.event is None:
                with device_scope(entry.device):
                    order.event = Event(timing=False)
            order.event.record(launch_on)
            order.on = stream_handle(launch_on)
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
            stream=None, capture: str = "inline", fallback: str = "raise",
            memory_budget=None, pool: str = "shared", over_budget: str = "eager",
            watch_weights: bool = True):
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
    capture : {"inline", "background"}
        Capture a new key in the call that meets it, or in the callable's capture thread
        while the key's calls run ``fn`` eagerly (no call waits for a capture).
    fallback : {"raise", "eager"}
        A key whose capture fails raises the capture's error, or runs eagerly from then on
        with one warning that carries it.
    memory_budget : int, optional
        Bytes the keys' pools may hold (:meth:`GraphedCallable.memory`); a key whose graph
        would go beyond runs eagerly (with one warning).
    pool : {"shared", "private"}
        One pool for every key (scratch shared, keys replayed one at a time, outputs copied
        into arrays of their own at the end of each graph), or one pool per key.
    over_budget : {"eager", "evict"}
        Beyond ``memory_budget``: run the new key eagerly, or drop the least recently used
        keys until it fits (``pool="private"`` only).
    watch_weights : bool
        When ``fn`` is a ``torch.nn.Module`` (or its bound method, or closes over one):
        keep the storages of its CUDA weights and buffers while a graph reads them, and
        drop the graphs with one warning when a weight moved (``.data`` set, ``.to()``,
        ``.half()``, a new ``nn.Parameter``, ``load_state_dict(assign=True)``); the next
        call of each key captures again (:mod:`pycudagraph.frameworks.weight_watch`).
        Costs one ``data_ptr()`` per weight per call (about 0.1 us each); ``False``
        leaves moved weights to you.

    Notes
    -----
    Each new key: ``cudaStreamBeginCapture``, ``cudaStreamEndCapture``,
    ``cudaGraphInstantiate``; each call: ``cuGraphExecKernelNodeSetParams`` for the kernel
    nodes of moved inputs, ``cudaGraphLaunch``. See :mod:`pycudagraph.frameworks.graphed`.
    """
    options = dict(copy_outputs=copy_outputs, check=check, warmup=warmup, stream=stream,
                   capture=capture, fallback=fallback, memory_budget=memory_budget,
                   pool=pool, over_budget=over_budget, watch_weights=watch_weights)
    if fn is None:
        return lambda f: GraphedCallable(f, **options)
    return GraphedCallable(fn, **options)


def _after_copy(order, h: int) -> None:
    """Make a launch on stream ``h``, another than the last output copy's, wait for that
    copy (``cudaStreamWaitEvent``); ``cudaStreamPerThread`` names a different stream in
    each thread, so it always waits."""
    if h != order.on or h == PER_THREAD:
        Stream.wrap(h).wait(order.event)
