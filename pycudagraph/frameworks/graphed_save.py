"""``f.save(path)``: every key of a graphed callable as a graph file, in one folder with an
index (:mod:`.graphed_index`), to be loaded by :func:`~.graphed_load.load_graphed`.

Each key's captured graph is saved with :meth:`Graph.save <pycudagraph.Graph.save>`; every
address it bakes in travels as a slot and an offset, the slot named for what it lies in:

- ``input:I``: the key's I-th input (where it was at capture, :attr:`RebindPlan.captured
  <.rebind_plan.RebindPlan.captured>`); the loader binds scratch arrays of the key's layout;
- a binding (:mod:`.graphed_bind`): a weight or buffer by its ``named_parameters()`` /
  ``named_buffers()`` name, an array the function closes over, one given in ``bind=``;
- ``pool:P:S``: segment S of capture pool P (intermediates, outputs), the pools of every
  key listed once, so keys that shared a pool share it again at load;
- ``workspace:W``: memory that is none of those but a library's own (cuBLAS's workspace):
  a block PyTorch's allocator holds with no tensor in it, or an allocation no live array
  owns (the audit's owner lookup, :class:`~.owners.OwnerIndex`; ``cuMemGetAddressRange``);
  made anew, zeroed, at load.

Memory of a graph allocation node is saved by the graph file itself. A value that lies in
another live array is captured once more (:mod:`.graphed_witness`): where the second
capture holds other values at all its places it is a library's left-over, no address,
and is saved as a number (``SaveReport.left_overs`` lists its places). A key whose graph
reads another live array (not a weight, buffer or input: pass it in ``bind=``), whose
inputs alias each other, or whose inputs or outputs a file cannot describe is not saved:
one warning names each such key and why.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .._cuda import dr, ensure_device
from ..compile.nvrtc_compile import device_arch
from ..errors import ArgumentError, GraphFileError, GraphFileWarning, PyCudaGraphError
from ..files.save import save_graph
from ..runtime.device import Device, device as device_scope
from ..runtime.values import Progress, path_arg
from .arrays import array_info
from .graphed_bind import Span, bindings, describe, versions
from .graphed_index import FORMAT, INDEX, VERSION, write_index
from .graphed_make import loaded_workspace
from .graphed_templates import SCALARS, KeySkipped, describe_key, dtype_name, key_templates
from .graphed_witness import left_overs
from .kernel_probe import library_functions, mangled, mark_variants
from .owners import OwnerIndex
from . import loaded

__all__ = ["save_graphed", "SaveReport", "key_templates", "KeySkipped"]

class _Unexplained(KeySkipped):
    """A value in another live array: an address the graph reads, or a number a library
    left in a by-value argument (:mod:`.graphed_witness` tells them apart)."""


def _holder(node, place: str) -> str:
    """``"arg 3 +48 of kernel name"``: where in the graph a value sits, for a message (a
    kernel node's name: ``cuFuncGetName`` for one captured)."""
    try:
        name = getattr(node, "kernel_name", None)
    except Exception:  # noqa: BLE001 - a message never fails for the name
        name = None
    return f"{place} of {name or type(node).__name__}"


@dataclass
class SaveReport:
    """What :func:`save_graphed` wrote: the folder, the keys saved, and each key left out
    with why (``skipped``: key -> reason; ``eager``: key -> why it runs eagerly, with no
    graph to save)."""

    path: str
    keys: int = 0
    skipped: dict = field(default_factory=dict)
    #: key -> why it runs eagerly (its capture failed, the memory budget left it out,
    #: ``run_eagerly``): no graph, so not in the folder; a load captures it at its first call
    eager: dict = field(default_factory=dict)
    #: key -> the places of values that lie in another live array but that a second
    #: capture of the call holds other values at: left-overs of a library's by-value
    #: arguments, no address the graph reads (:mod:`.graphed_witness`), saved as numbers.
    left_overs: dict = field(default_factory=dict)


class _Segments:
    """The pools' segments (merged ranges), by address."""

    def __init__(self, pools: list):
        self.pools, self.items = [], []
        for p, pool in enumerate(pools):
            ranges = sorted((a, b, what) for a, b, what in pool.ranges() if b > a)
            merged: list = []
            for a, b, _ in ranges:
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            fw = "torch" if any(w.startswith("PyTorch") for _, _, w in ranges) else "cupy"
            self.pools.append({"framework": fw, "segments": [b - a for a, b in merged]})
            self.items += [(a, b, p, s) for s, (a, b) in enumerate(merged)]

    def find(self, lo: int, hi: int):
        """(pool, segment, start) of the segment holding ``[lo, hi)``, or None."""
        for a, b, p, s in self.items:
            if a <= lo and hi <= b:
                return p, s, a
        return None


# one key ---------------------------------------------------------------------------------

class _Saver:
    """The state of one save: bindings, pools, workspaces, owners (see the module docstring)."""

    def __init__(self, f, module, bind):
        self.fn = f.fn
        self.left_overs: list = []  # the last key's left-over values (their places)
        self.named = bindings(f.fn, module, bind)
        self.binds = sorted((array_info(v).lo, array_info(v).hi, n) for n, v in self.named.items())
        for (a0, a1, an), (b0, b1, bn) in zip(self.binds, self.binds[1:]):
            if b0 < a1:
                raise ArgumentError(f"save: {an} and {bn} share memory without one holding "
                                    "the other; bind each array once")
        self.pool_objs: list = []
        self.workspaces: list = []  # [start, end]
        self.used: set = set()  # binding names some key uses
        self._owners = None
        self._blocks = None
        self.segments = None
        self.entries: list = []  # the callable's entries, in save order (add_pools)
        self.functions: list = []  # per key saved: {kernel name: CUfunction}

    def add_pools(self, entries) -> None:
        """Take the callable's entries to save (in order) and the capture pools they use."""
        self.entries = entries
        seen = {}
        for e in entries:
            for p in _entry_pools(e):
                seen.setdefault(id(p), p)
        self.pool_objs = list(seen.values())
        self.segments = _Segments(self.pool_objs)

    def pool_index(self, pool):
        if pool is None:
            return None
        for i, p in enumerate(self.pool_objs):
            if p is pool and self.segments.pools[i]["segments"]:
                return i
        return None

    def other_input(self, v: int, e) -> str:
        """Words for a message when ``v`` lies in an input another key was captured with."""
        for n, other in enumerate(self.entries):
            if other is not e:
                for i, (_, lo, hi) in enumerate(other.plan.captured):
                    if lo <= v < hi:
                        return f" (input {i} of the callable's key {n + 1})"
        return ""

    def binding(self, lo: int, hi: int):
        for a, b, name in self.binds:
            if a <= lo and hi <= b:
                return name, a
        return None

    def place(self, v: int, inputs: list, allocs: list) -> tuple:
        """Where address ``v`` lies: ("input", i, start) / ("binding", name, start) /
        ("pool", p, s, start) / ("workspace", w, start), or () for graph memory and
        numbers that are no device address."""
        if any(a <= v < b for a, b in allocs):
            return ()
        for i, (_, lo, hi) in enumerate(inputs):
            if lo <= v < hi:
                return ("input", i, lo)
        found = self.binding(v, v + 1)
        if found is not None:
            return ("binding",) + found
        found = self.segments.find(v, v + 1)
        if found is not None:
            return ("pool",) + found
        err, base, size = dr.cuMemGetAddressRange(v)
        if err != dr.CUresult.CUDA_SUCCESS:
            return ()  # a number, not device memory
        return self.workspace(v, int(base), int(size))

    def workspace(self, v: int, base: int, size: int) -> tuple:
        if self._owners is None:
            self._owners = OwnerIndex(())
        made = loaded_workspace(v)  # a workspace a load made (a live array): one again
        owner = self._owners.find(v) if made is None else None
        if made is not None:
            base, end = made
        elif owner.status == "allocator":
            base, end = self._block(v)
        elif owner.status == "unknown":
            end = base + size
        else:
            raise _Unexplained(f"its graph reads 0x{v:x}, in {owner.what} ({owner.status}), "
                               "which is neither a weight, a buffer, an input, the capture "
                               "pool nor a library workspace: pass it in bind={name: array} "
                               "(or register it as a module buffer)")
        for w, (a, b) in enumerate(self.workspaces):
            if a <= base and end <= b:
                return ("workspace", w, a)
            if base < b and a < end:
                raise KeySkipped(f"a library workspace at 0x{base:x} overlaps another one "
                                 "saved before in a different extent")
        self.workspaces.append([base, end])
        return ("workspace", len(self.workspaces) - 1, base)

    def _block(self, v: int) -> tuple:
        """[start, end) of the PyTorch allocator block holding ``v``."""
        if self._blocks is None:
            self._blocks = []
            for seg in loaded.torch().cuda.memory_snapshot():
                addr = int(seg["address"])
                for block in seg.get("blocks", ()):
                    start = int(block.get("address", addr))
                    self._blocks.append((start, start + int(block["size"])))
                    addr = start + int(block["size"])
        for a, b in self._blocks:
            if a <= v < b:
                return a, b
        raise KeySkipped(f"0x{v:x} lies in no block of PyTorch's allocator")

    def outputs(self, v, depth: int = 0) -> dict:
        """The template of a call's outputs, each array placed in a pool or a binding."""
        info = array_info(v) if depth < 16 else None
        if info is not None:
            if info.framework not in ("torch", "cupy"):
                raise KeySkipped("an output is not a PyTorch tensor or CuPy array")
            _, shape, strides, dtype, _, align = info.key
            arr = {"framework": info.framework, "shape": list(shape), "strides": list(strides),
                   "dtype": dtype_name(info.framework, dtype), "align": int(align)}
            found = self.segments.find(info.lo, info.hi)
            if found is not None:
                arr["at"] = {"pool": found[0], "segment": found[1], "offset": info.ptr - found[2]}
            else:
                found = self.binding(info.lo, info.hi)
                if found is None:
                    raise KeySkipped("an output lies outside the capture pools and the bindings")
                arr["at"] = {"binding": found[0], "offset": info.ptr - found[1]}
                self.used.add(found[0])
            return {"array": arr}
        t = type(v)
        if t in (tuple, list) and depth < 16:
            return {t.__name__: [self.outputs(x, depth + 1) for x in v]}
        if t is dict and depth < 16 and all(type(k) is str for k in v):
            return {"dict": [[k, self.outputs(x, depth + 1)] for k, x in v.items()]}
        if t in SCALARS and not (t is float and not math.isfinite(v)):
            return {"value": v}
        raise KeySkipped(f"its outputs hold a {t.__name__}, which a file cannot make again: "
                         "return tensors or arrays, in tuples, lists or dicts (for a "
                         "transformers model, its .logits or return_dict=False)")

    def key(self, key, e, file: Path) -> dict:
        """Save one key's graph to ``file``; its index record."""
        args, kwargs = key_templates(key)
        inputs = list(e.plan.captured)
        allocs, places, nodes = [], {}, []  # places: address -> [(node index, place)]
        for i, (node, _, _) in enumerate(e.graph.table.walk()):
            nodes.append(node)
            for s in node.sites():
                if s.role == "alloc":
                    allocs.append((s.address, s.address + max(s.size_hint, 1)))
                elif s.address:
                    places.setdefault(s.address, []).append((i, s.place))

        def held_in(v: int) -> str:  # the first place holding v, for a message
            i, place = places[v][0]
            return _holder(nodes[i], place)

        slots, unexplained, numbers = {}, {}, frozenset()
        for v in sorted(places):
            try:
                where = self.place(v, inputs, allocs)
            except _Unexplained as exc:
                unexplained[v] = exc  # an address, or a left-over: a second capture says
                continue
            except KeySkipped as exc:
                raise KeySkipped(f"{exc}; the value sits in {held_in(v)}") from None
            if not where:
                continue
            kind = where[0]
            if kind == "input":
                i = where[1]
                slots[f"input:{i}"] = Span(inputs[i][1], inputs[i][2] - inputs[i][1])
            elif kind == "binding":
                info = array_info(self.named[where[1]])
                slots[where[1]] = Span(info.lo, info.hi - info.lo)
            elif kind == "pool":
                p, s, start = where[1:]
                slots[f"pool:{p}:{s}"] = Span(start, self.segments.pools[p]["segments"][s])
            else:
                a, b = self.workspaces[where[1]]
                slots[f"workspace:{where[1]}"] = Span(a, b - a)
        if unexplained:
            why: dict = {}
            stale = left_overs(self.fn, e, nodes, {v: places[v] for v in unexplained}, why)
            for v, exc in unexplained.items():
                if v not in stale:
                    second = why.get(v) or why.get(None) or \
                        "a second capture of the call holds it there too"
                    raise KeySkipped(f"{exc}{self.other_input(v, e)}; the value sits in "
                                     f"{held_in(v)}; {second}")
            self.left_overs = [held_in(v) for v in sorted(unexplained)]
            numbers = frozenset(unexplained)  # left-overs: numbers, though memory holds them
        outputs = self.outputs(e.outputs)
        functions = library_functions(e.graph)
        twice = sorted(n for n, fs in functions.items() if len(fs) > 1 and not mangled(n))
        if twice:  # a file names a library kernel once: one function per extern "C" name
            raise KeySkipped(f"its graph runs {len(functions[twice[0]])} different kernels "
                             f"named {twice[0]} (a dtype or shape variant of one name)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphFileWarning)  # the loader resolves them
            try:
                save_graph(e.graph, file, slots, numbers)
            except (GraphFileError, ArgumentError) as exc:
                raise KeySkipped(str(exc)) from None
        data = file.read_bytes()
        self.used.update(n for n in slots if not n.startswith(("input:", "pool:", "workspace:")))
        rec = {"file": file.name, "nbytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "device": int(e.device), "args": args, "kwargs": kwargs, "outputs": outputs,
                "slots": sorted(slots), "kernels": sorted(functions), "variants": [],
                "pool": self.pool_index(e.pool),
                "outputs_pool": self.pool_index(getattr(e, "outputs_pool", None))}
        self.functions.append({n: next(iter(fs)) for n, fs in functions.items()})
        return rec


def _entry_pools(e) -> tuple:
    pools = getattr(e, "pools", None)
    if callable(pools):
        return tuple(pools())
    return tuple(p for p in (e.pool,) if p is not None)


def _name(fn) -> str:
    text = getattr(fn, "__qualname__", None) or type(fn).__name__
    return text[:256] if text.isprintable() else type(fn).__name__


# the folder ------------------------------------------------------------------------------

def save_graphed(f, path, module=None, bind=None, progress=None) -> SaveReport:
    """Save every captured key of the graphed callable ``f`` to the folder ``path`` (see
    :meth:`GraphedCallable.save <pycudagraph.GraphedCallable.save>`); ``progress`` is
    called with a line after each key and at the end."""
    path = Path(path_arg(path, "save: path"))
    tell = Progress(progress, "save")
    start = time.perf_counter()
    if path.exists() and not (path / INDEX).is_file():
        raise ArgumentError(f"save: {path} exists and is not a saved graphed callable; "
                            "choose another path")
    entries = [(k, e) for k, e in f.graphs.items() if not e.refused]
    pending, eager = len(f.pending), f.eager_keys
    busy = (f"{pending} key(s) are being captured in the background now: call "
            "f.wait_captures() before f.save()")
    if not entries:
        raise ArgumentError("save: the graphed callable has no captured key yet: call it "
                            "with each input layout to serve first"
                            + (f"; {busy}" if pending else "")
                            + (f"; {_eager_note(eager)}" if eager else ""))
    if pending:
        warnings.warn(f"save({path}): {busy} to save them too; they are not in this save",
                      RuntimeWarning, stacklevel=3)
    if eager:
        warnings.warn(f"save({path}): {_eager_note(eager)}; they are not in this save (a load "
                      "captures them at their first call)", RuntimeWarning, stacklevel=3)
    saver = _Saver(f, module, bind)
    saver.add_pools([e for _, e in entries])
    tmp = path.parent / f".{path.name}.saving-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    report, keys, frameworks = SaveReport(str(path), eager=eager), [], set()
    try:
        dev = entries[0][1].device
        with device_scope(dev):
            ensure_device()
            arch, gpu = device_arch(dev), Device(dev).name
            for n, (key, e) in enumerate(entries, 1):
                t0 = time.perf_counter()
                with device_scope(e.device):
                    try:
                        saver.left_overs = []
                        keys.append(saver.key(key, e, tmp / f"key-{len(keys):03d}.pcgraph"))
                        frameworks |= set(e.frameworks)
                        if saver.left_overs:
                            report.left_overs[key] = saver.left_overs
                    except (KeySkipped, PyCudaGraphError) as exc:
                        report.skipped[key] = str(exc)
                    except Exception as exc:  # noqa: BLE001 - a framework's refusal: said
                        report.skipped[key] = f"{type(exc).__name__}: {exc}"
                if key in report.skipped:
                    tell(f"key {n}/{len(entries)} left out: {report.skipped[key]}")
                else:
                    tell(f"key {n}/{len(entries)} saved: {describe_key(keys[-1])}, "
                         f"{keys[-1]['nbytes']} bytes", time.perf_counter() - t0)
        if not keys:
            raise ArgumentError("save: no key could be saved: " + "; ".join(report.skipped.values()))
        mark_variants(keys, saver.functions)
        here = versions()
        ix = {"format": FORMAT, "version": list(VERSION), "writer": _writer(),
              "function": _name(f.fn), "arch": arch, "gpu": gpu[:256] or "unknown",
              "versions": {fw: here.get(fw) if fw in frameworks else None for fw in ("torch", "cupy")},
              "bindings": {n: describe(saver.named[n]) for n in sorted(saver.used)},
              "pools": saver.segments.pools, "workspaces": [b - a for a, b in saver.workspaces],
              "keys": keys}
        write_index(tmp, ix)
        _replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.keys = len(keys)
    tell(f"{len(keys)} of {len(entries)} key(s) saved to {path}", time.perf_counter() - start)
    for key, why in report.skipped.items():
        warnings.warn(f"save({path}): a key of {_name(f.fn)} was not saved (it will be "
                      f"captured at load): {why}", RuntimeWarning, stacklevel=3)
    return report


def _eager_note(eager: dict) -> str:
    """``"2 key(s) run eagerly, with no graph to save (the first because: ...)"``. No CUDA call."""
    return (f"{len(eager)} key(s) run eagerly, with no graph to save (the first because: "
            f"{next(iter(eager.values()))})")


def _writer() -> str:
    import pycudagraph
    return f"pycudagraph {pycudagraph.__version__}"


def _replace(tmp: Path, path: Path) -> None:
    """Put the folder ``tmp`` at ``path``, replacing an earlier save there."""
    if not path.exists():
        os.replace(tmp, path)
        return
    old = path.parent / f".{path.name}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)

