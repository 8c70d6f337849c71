"""``pcg.load_graphed(path, fn_or_module)``: a graphed callable whose keys are the graphs a
``f.save(path)`` wrote, in a new process, with no capture of the model.

The steps, each refusing a bad file with a :class:`~pycudagraph.errors.GraphFileError`
that names what differs before anything is built:

1. the index is read and checked (:mod:`.graphed_index`); the model's bindings
   (:mod:`.graphed_bind`) must have every saved name with the same shape and dtype; the
   GPU the same architecture; each key file its saved size and SHA-256;
2. the library kernels of every key are found by name (:mod:`.kernel_probe`): probe
   captures on scratch inputs, at most one per distinct set of kernels, counted in
   :attr:`LoadReport.probes`, and lookups in the modules they come from;
3. per pool of the saving process, one allocation of its size made from a new
   :class:`~.pools.CapturePool` (shared by the keys that shared the pool); per library
   workspace a zeroed allocation; per key, scratch inputs of its layout;
4. each key's graph is loaded with :func:`pcg.load <pycudagraph.load>` with those bound to
   its slots, instantiated, planned for rebinding (:class:`~.rebind_plan.RebindPlan`) and
   added to the callable (``f.adopt``). Its first call rebinds the inputs as any call does.

A key that cannot be proven right falls back to capture, with one warning that says why:
its kernels were not found, the frameworks' versions differ from the saving process's,
its graph file cannot be loaded here. ``strict=True`` raises instead.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .._cuda import ensure_device
from ..compile.nvrtc_compile import device_arch
from ..errors import ArgumentError, GraphFileError, PyCudaGraphError
from ..capture.capture import capture
from ..files.load import load_with_sites
from ..runtime.device import Device, device as device_scope, device_count
from ..runtime.stream import Stream
from ..runtime.values import Progress, path_arg
from .arrays import array_info, flatten
from .graphed import GraphedEntry, graphed
from .graphed_bind import Span, bindings, describe, versions
from .graphed_index import (check_arch, check_key_files, compare_bindings, read_index,
                            slot_kind, version_differences)
from .graphed_make import ByteBase, Maker
from .graphed_templates import describe_key
from .kernel_probe import KernelFinder
from .ops import framework_streams
from .pools import CapturePool
from .weight_watch import watch_for
from .rebind_plan import RebindPlan
from . import loaded

__all__ = ["load_graphed", "LoadReport"]


@dataclass
class LoadReport:
    """What :func:`load_graphed` did: ``loaded`` keys (they replay with no capture),
    ``fallback`` (key index -> why that key will be captured on its first call instead),
    ``probes`` (probe captures made to find library kernels, at most one per distinct set
    of kernels), ``kernel_sets`` (distinct sets among the keys), ``kernels`` (names found),
    ``module_hits`` (names found in a module a probe had shown, with no probe of their own),
    ``seconds`` per step (``"check"``, ``"kernels"``, ``"graphs"``, and within ``"graphs"``:
    ``"graph files"`` (``pcg.load`` of each key's file), ``"instantiate"``, ``"rebind
    plans"``)."""

    path: str
    loaded: int = 0
    fallback: dict = field(default_factory=dict)
    probes: int = 0
    kernel_sets: int = 0
    kernels: int = 0
    module_hits: int = 0
    seconds: dict = field(default_factory=dict)


class _Loader:
    """The memory and kernels of one load (see the module docstring)."""

    def __init__(self, f, ix: dict, folder: Path, named: dict, data: dict):
        self.f, self.ix, self.folder, self.named = f, ix, folder, named
        self.data = data  # key file name -> its bytes, read and checked against the index
        self.pools: dict = {}  # pool index -> (CapturePool, ByteBase, segment starts)
        self.workspaces: dict = {}  # workspace index -> ByteBase
        self.orders: dict = {}  # pool index -> the Handoff its keys share
        self._sides: dict = {}
        self._warm: set = set()  # devices a probe ran the callable eagerly on
        self.named_spans: dict = {}  # binding name -> the Span every key binds it to
        self.seconds = {"graph files": 0.0, "instantiate": 0.0, "rebind plans": 0.0}

    def side(self, dev: int) -> Stream:
        side = self._sides.get(dev)
        if side is None:
            side = self._sides[dev] = Stream(non_blocking=True)
        return side

    def probe(self, i: int):
        """A capture of the callable on scratch inputs of key ``i`` (``cudaStreamBeginCapture``
        / ``cudaStreamEndCapture``; thrown away by the caller). The first probe on a device
        runs the callable eagerly once before (the framework makes its handles and
        workspaces there, not into the probe's pool); a later one captures at once (its
        kernels load as the capture launches them), and runs eagerly first only when that
        capture fails."""
        rec = self.ix["keys"][i]
        dev = rec["device"]
        with device_scope(dev):
            side = self.side(dev)
            maker = Maker(dev, str(self.folder))
            with framework_streams(side.ptr, dev):
                args, kwargs = maker.call(rec["args"], rec["kwargs"])
            if dev in self._warm:
                try:
                    return self._probe_capture(side, dev, args, kwargs)
                except Exception:  # noqa: BLE001 - tried again after an eager run, below
                    pass
            with framework_streams(side.ptr, dev):
                self.f.fn(*args, **kwargs)  # eager once: the framework loads its kernels
            side.synchronize()
            self._warm.add(dev)
            return self._probe_capture(side, dev, args, kwargs)

    def _probe_capture(self, side, dev: int, args, kwargs):
        with framework_streams(side.ptr, dev):
            with capture(side, mode="thread_local", pool=CapturePool()) as cap:
                self.f.fn(*args, **kwargs)
        return cap.graph

    def pool(self, p: int, dev: int):
        """The pool made for pool ``p`` of the file: one allocation of its size, from a new
        :class:`CapturePool` (so ``f.memory()`` counts it)."""
        made = self.pools.get(p)
        if made is None:
            info = self.ix["pools"][p]
            cp = CapturePool()
            side = self.side(dev)
            if info["framework"] == "torch":
                torch = loaded.torch()
                if torch is not None:
                    torch.cuda.init()  # its allocator routes to pools once initialized
            act = cp.activate(dev, side.ptr)
            try:
                with framework_streams(side.ptr, dev):
                    base = Maker(dev, str(self.folder)).bytes(info["framework"],
                                                              sum(info["segments"]), False)
            finally:
                act.close()
            starts, at = [], 0
            for n in info["segments"]:
                starts.append(at)
                at += n
            made = self.pools[p] = (cp, base, starts)
        return made

    def workspace(self, w: int, dev: int, framework: str) -> ByteBase:
        ws = self.workspaces.get(w)
        if ws is None:
            with framework_streams(self.side(dev).ptr, dev):
                ws = self.workspaces[w] = Maker(dev, str(self.folder)).workspace(
                    framework, self.ix["workspaces"][w])
        return ws

    def entry(self, rec: dict, finder: KernelFinder, entry_class):
        """One key's graph loaded, instantiated and planned: its GraphedEntry."""
        dev = rec["device"]
        file = self.folder / rec["file"]
        where = str(file)
        maker = Maker(dev, where)
        side = self.side(dev)
        with framework_streams(side.ptr, dev):
            args, kwargs = maker.call(rec["args"], rec["kwargs"])
        key, infos = flatten(args, kwargs)
        frameworks = frozenset(info.framework for info in infos)
        fw = "torch" if "torch" in frameworks else ("cupy" if "cupy" in frameworks else "")
        bind, named, inputs = {}, self.named_spans, []
        for name in rec["slots"]:
            kind = slot_kind(name)
            if kind[0] == "input":
                inputs.append(name)
                if kind[1] >= len(infos):
                    raise GraphFileError(f"{where}: slot {name!r}: the key has {len(infos)} inputs")
                info = infos[kind[1]]  # bound, not kept: every call rebinds the key's
                # inputs before it launches, so the scratch input goes when this load is
                # done (a capture's input goes as well) instead of living as long as the key
                bind[name] = Span(info.lo, info.hi - info.lo)
            elif kind[0] == "pool":
                cp, base, starts = self.pool(kind[1], dev)
                size = self.ix["pools"][kind[1]]["segments"][kind[2]]
                bind[name] = Span(base.ptr + starts[kind[2]], size, (base.array, cp))
            elif kind[0] == "workspace":
                ws = self.workspace(kind[1], dev, fw)
                bind[name] = Span(ws.ptr, ws.nbytes, ws.array)
            else:  # a weight or buffer: the same span for every key of this load
                span = named.get(name)
                if span is None:
                    obj = self.named[name]
                    info = array_info(obj)
                    span = named[name] = Span(info.lo, info.hi - info.lo, obj)
                bind[name] = span
        side.synchronize()  # the zeroed workspaces and scratch inputs are ready
        t0 = time.perf_counter()
        graph, sites = load_with_sites(file, bind, finder.resolver(_variants(rec)), inputs,
                                       self.data.pop(rec["file"], None))
        t1 = time.perf_counter()
        exe = graph.instantiate()
        t2 = time.perf_counter()
        plan = RebindPlan(exe, graph, infos, sites)
        steps = self.seconds
        steps["graph files"] += t1 - t0
        steps["instantiate"] += t2 - t1
        steps["rebind plans"] += time.perf_counter() - t2
        outputs = maker.outputs(rec["outputs"], lambda at: self._place(at, dev))
        pool = self.pools[rec["pool"]][0] if rec["pool"] is not None else None
        entry = entry_class(key, graph, exe, pool, outputs, plan, frameworks, dev)
        if rec["outputs_pool"] is not None and hasattr(entry, "outputs_pool"):
            entry.outputs_pool = self.pool(rec["outputs_pool"], dev)[0]
        if rec["pool"] is not None and hasattr(entry, "order"):  # keys sharing scratch take turns
            entry.order = self.orders.setdefault(rec["pool"], entry.order)
        if getattr(self.f, "check", False) and hasattr(entry, "needs_check"):
            entry.needs_check = True  # check=: its first replay is compared with eager
        return entry

    def _place(self, at: dict, dev: int) -> tuple:
        if "pool" in at:
            _, base, starts = self.pool(at["pool"], dev)
            return base, starts[at["segment"]] + at["offset"]
        obj = self.named[at["binding"]]
        info = array_info(obj)
        fw = info.framework
        return ByteBase(_bytes_of(obj, fw), info.lo, info.hi - info.lo, fw), at["offset"]


def _bytes_of(obj, framework: str):
    """A 1-D uint8 view of an array's bytes from its lowest address (PyTorch: of a
    contiguous tensor; CuPy: of its memory)."""
    if framework == "torch":
        return obj.reshape(-1).view(loaded.torch().uint8)
    cupy = loaded.cupy()
    return cupy.ndarray((obj.nbytes,), cupy.uint8, memptr=obj.data)


def _variants(rec: dict) -> dict:
    """``{kernel name: variant}`` of a key record (see :mod:`.kernel_probe`)."""
    return dict(rec.get("variants", ()))


def load_graphed(path, fn_or_module, *, module=None, bind=None, strict: bool = False,
                 progress=None, **options):
    """A :class:`~pycudagraph.GraphedCallable` of ``fn_or_module`` whose keys are the graphs
    ``f.save(path)`` wrote: they replay with no capture of the model.

    Parameters
    ----------
    path : str or Path
        The folder ``f.save`` wrote.
    fn_or_module : callable
        The same function (or ``torch.nn.Module``) as saved, built the same way: its
        weights and buffers are bound by name, not copied (an edit of a weight shows in
        the next replay).
    module : torch.nn.Module, optional
        The module whose weights the graphs use, when ``fn_or_module`` does not lead to
        exactly one.
    bind : dict, optional
        ``{name: array}``: the arrays given as ``bind=`` to ``f.save``.
    strict : bool
        Raise instead of capturing a key that cannot be loaded (a kernel not found, other
        framework versions, a graph file this process cannot load).
    progress : callable, optional
        Called with one line of text after the checks, after the library kernels are
        found and after each key (``print``, a logger's ``info``).
    **options
        Passed to :func:`~pycudagraph.graphed` (``check=True`` compares each key's first
        call with eager execution).

    Returns
    -------
    GraphedCallable
        With ``load_report`` (a :class:`LoadReport`): keys loaded, probe captures, what fell
        back to capture and why.

    Raises
    ------
    GraphFileError
        Not a saved callable, a truncated or damaged file, a model that differs from the
        saved one (a weight missing or of another shape, named), another GPU architecture
        (both named); with ``strict``, a key that cannot be loaded (a kernel not found is
        named).

    Notes
    -----
    Calls ``cudaStreamBeginCapture`` / ``cudaStreamEndCapture`` only for probe captures
    (counted in ``load_report.probes``), ``cuFuncGetName``, ``cuFuncGetModule`` and
    ``cuModuleGetFunction`` to find kernels, the calls of :func:`pcg.load
    <pycudagraph.load>` per key, ``cudaGraphInstantiate`` per key.
    """
    folder = Path(path_arg(path, "load_graphed: path"))
    if not callable(fn_or_module):
        raise ArgumentError(f"load_graphed needs the saved function or module, got "
                            f"{type(fn_or_module).__name__}")
    tell = Progress(progress, "load_graphed")
    t0 = start = time.perf_counter()
    ix = read_index(folder)
    f = graphed(fn_or_module, **options)
    if module is not None and options.get("watch_weights", True):
        f.weight_watch = watch_for(fn_or_module, module)  # the module= its graphs read
    report = f.load_report = LoadReport(str(folder))
    named = bindings(fn_or_module, module, bind)
    compare_bindings(ix["bindings"], {n: describe(v) for n, v in named.items()}, str(folder))
    count = device_count()
    for dev in sorted({rec["device"] for rec in ix["keys"]}):
        if dev >= count:
            raise GraphFileError(f"{folder}: saved on device {dev}; this process sees {count}")
        with device_scope(dev):
            ensure_device()
            check_arch(ix, device_arch(dev), Device(dev).name, str(folder))
    data = check_key_files(ix, folder)
    keys = ix["keys"]
    report.seconds["check"] = time.perf_counter() - t0
    tell(f"index, model and {len(keys)} key file(s) checked", report.seconds["check"])
    differ = version_differences(ix, versions())
    if differ:
        why = "the frameworks differ from the saving process's: " + "; ".join(differ)
        if strict:
            raise GraphFileError(f"{folder}: {why}")
        _fall_back(f, report, {i: why for i in range(len(keys))}, keys)
        tell(f"0 of {len(keys)} key(s) loaded: {why}", time.perf_counter() - start)
        return f
    torch = loaded.torch()
    if ix["versions"]["torch"] is not None and torch is not None:
        torch.cuda.init()  # PyTorch takes part in probes and pools once initialized
    loader = _Loader(f, ix, folder, named, data)
    t0 = time.perf_counter()
    finder = KernelFinder([set(rec["kernels"]) for rec in keys], loader.probe,
                          [_variants(rec) for rec in keys])
    report.kernel_sets = len({need for need in finder.needs if need})
    finder.run()
    report.probes, report.kernels = finder.probes, len(finder.table)
    report.module_hits = finder.module_hits
    report.seconds["kernels"] = time.perf_counter() - t0
    tell(f"{report.kernels} library kernel(s) found, {report.probes} probe capture(s) for "
         f"{report.kernel_sets} kernel set(s)", report.seconds["kernels"])
    t0 = time.perf_counter()
    failed = {}
    for i, rec in enumerate(keys):
        t1 = time.perf_counter()
        entry, why = _load_key(f, loader, finder, rec, i)
        if entry is None:
            failed[i] = why
            tell(f"key {i + 1}/{len(keys)} not loaded: {describe_key(rec)}: {why}")
            continue
        report.loaded += 1
        tell(f"key {i + 1}/{len(keys)} loaded: {describe_key(rec)}", time.perf_counter() - t1)
        if entry.plan.unproven and not getattr(f, "check", False):
            warnings.warn(f"load_graphed({folder}): rebinding cannot be proven right for "
                          f"{describe_key(rec)}: {entry.plan.unproven[0]}; pass check=True "
                          "to compare with eager execution", RuntimeWarning, stacklevel=2)
    loader.data.clear()  # (the bytes of keys that fell back)
    report.seconds["graphs"] = time.perf_counter() - t0
    tell(f"{report.loaded} of {len(keys)} key(s) loaded", time.perf_counter() - start)
    report.seconds.update(loader.seconds)
    if failed and strict:
        i, why = next(iter(failed.items()))
        raise GraphFileError(f"{folder}: {describe_key(keys[i])}: {why}")
    _fall_back(f, report, failed, keys)
    return f


def _load_key(f, loader: _Loader, finder: KernelFinder, rec: dict, i: int) -> tuple:
    """``(entry, None)``: key ``i`` loaded and added to ``f``; ``(None, why)`` when it
    cannot be (its kernels not found, its file refused here, a framework's refusal)."""
    missing = finder.missing(rec["kernels"], _variants(rec))
    if missing:
        why = (f"{len(missing)} kernel(s) not found in this process: "
               f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
        probe = [w for k, w in finder.failures.items() if finder.needs[k] == finder.needs[i]]
        return None, why + (f" (its probe capture failed: {probe[0]})" if probe else "")
    try:
        with device_scope(rec["device"]):
            entry = loader.entry(rec, finder, GraphedEntry)
            f.adopt(entry)
    except (GraphFileError, ArgumentError, PyCudaGraphError) as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a framework's refusal (memory ...): said
        return None, f"{type(exc).__name__}: {exc}"
    return entry, None


def _fall_back(f, report: LoadReport, failed: dict, keys: list) -> None:
    """Note the keys that will be captured instead, with one warning saying why."""
    if not failed:
        return
    report.fallback.update(failed)
    lines = "; ".join(f"{describe_key(keys[i])}: {why}" for i, why in list(failed.items())[:3])
    more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
    warnings.warn(f"load_graphed({report.path}): {len(failed)} of {len(keys)} key(s) will be "
                  f"captured on their first call instead of loaded: {lines}{more}",
                  RuntimeWarning, stacklevel=3)

