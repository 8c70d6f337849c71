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
from ..runtime.device import Device, device as device_scope, device_count
from ..runtime.values import Progress, path_arg
from .graphed import GraphedEntry, graphed
from .graphed_bind import bindings, describe, versions
from .graphed_index import (check_arch, check_key_files, compare_bindings, read_index,
                            version_differences)
from .graphed_templates import describe_key
from .graphed_load_keys import KeyLoader, OverBudget, variants
from .kernel_probe import KernelFinder
from .weight_watch import watch_for
from . import loaded

__all__ = ["load_graphed", "LoadReport"]


@dataclass
class LoadReport:
    """What :func:`load_graphed` did: ``loaded`` keys (they replay with no capture),
    ``fallback`` (key index -> why that key will be captured on its first call instead),
    ``eager`` (key index -> why that key runs eagerly instead: its pools would go beyond
    the callable's ``memory_budget``; nothing was allocated for it when that was known
    before), ``probes`` (probe captures made to find library kernels, at most one per
    distinct set of kernels), ``kernel_sets`` (distinct sets among the keys), ``kernels``
    (names found), ``module_hits`` (names found in a module a probe had shown, with no
    probe of their own), ``seconds`` per step (``"check"``, ``"kernels"``, ``"graphs"``,
    and within ``"graphs"``: ``"graph files"`` (``pcg.load`` of each key's file),
    ``"instantiate"``, ``"rebind plans"``)."""

    path: str
    loaded: int = 0
    fallback: dict = field(default_factory=dict)
    eager: dict = field(default_factory=dict)
    probes: int = 0
    kernel_sets: int = 0
    kernels: int = 0
    module_hits: int = 0
    seconds: dict = field(default_factory=dict)


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
        call with eager execution). With ``memory_budget=``, a key whose saved pools would
        go beyond it is not loaded and nothing is allocated for it: it runs eagerly
        (``load_report.eager`` says why).

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
    loader = KeyLoader(f, ix, folder, named, data)
    t0 = time.perf_counter()
    finder = KernelFinder([set(rec["kernels"]) for rec in keys], loader.probe,
                          [variants(rec) for rec in keys])
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
        entry, why, eager = _load_key(f, loader, finder, rec, i)
        if eager:
            report.eager[i] = why
            tell(f"key {i + 1}/{len(keys)} runs eagerly: {describe_key(rec)}: {why}")
            continue
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


def _load_key(f, loader: KeyLoader, finder: KernelFinder, rec: dict, i: int) -> tuple:
    """``(entry, None, False)``: key ``i`` loaded and added to ``f``; ``(None, why,
    False)`` when it cannot be (its kernels not found, its file refused here, a
    framework's refusal); ``(None, why, True)`` when the memory budget leaves no room for
    it (it runs eagerly, with one warning at its first call, as a capture beyond the
    budget does)."""
    missing = finder.missing(rec["kernels"], variants(rec))
    if missing:
        why = (f"{len(missing)} kernel(s) not found in this process: "
               f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
        probe = [w for k, w in finder.failures.items() if finder.needs[k] == finder.needs[i]]
        return None, why + (f" (its probe capture failed: {probe[0]})" if probe else ""), False
    try:
        with device_scope(rec["device"]):
            entry = loader.entry(rec, finder, GraphedEntry)
            key, refused = entry.key, f.adopt(entry)  # refused: made, then counted beyond
    except OverBudget as exc:  # known beyond the budget before its pools were made
        entry, key, refused = None, exc.key, exc.why
    except (GraphFileError, ArgumentError, PyCudaGraphError) as exc:
        return None, str(exc), False
    except Exception as exc:  # noqa: BLE001 - a framework's refusal (memory ...): said
        return None, f"{type(exc).__name__}: {exc}", False
    if not refused:
        return entry, None, False
    f.run_eagerly(key, f"load_graphed({loader.folder}): {describe_key(rec)}: {refused}")
    return None, refused, True


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

