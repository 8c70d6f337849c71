"""One :func:`~.graphed_load.load_graphed`'s keys made: the probe captures that find
library kernels, the memory its keys bind (one allocation per saved pool, zeroed library
workspaces, scratch inputs), each key's graph loaded, instantiated and planned for
rebinding, and the memory budget checked before a key's pools are made.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..capture.capture import capture
from ..errors import GraphFileError
from ..files.load import load_with_sites
from ..runtime.device import device as device_scope
from ..runtime.stream import Stream
from .arrays import array_info, flatten
from .graphed_bind import Span
from .graphed_index import slot_kind
from .graphed_keys import beyond_budget
from .graphed_make import ByteBase, Maker
from .kernel_probe import KernelFinder
from .ops import framework_streams
from .pools import CapturePool
from .rebind_plan import RebindPlan
from . import loaded

__all__ = ["KeyLoader", "OverBudget", "variants"]


class OverBudget(Exception):
    """A key whose pools would go beyond the memory budget: it runs eagerly (``key``, ``why``)."""

    def __init__(self, key, why: str):
        super().__init__(why)
        self.key, self.why = key, why


class KeyLoader:
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
        why = self.over_budget(rec)
        if why:  # before its pools are made
            raise OverBudget(key, why)
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
        graph, sites = load_with_sites(file, bind, finder.resolver(variants(rec)), inputs,
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

    def over_budget(self, rec: dict) -> str:
        """Why the pools key ``rec`` would make (those not made yet for an earlier key) do
        not fit the callable's ``memory_budget``, or ""."""
        budget = self.f.memory_budget
        if budget is None:
            return ""
        new = sum(sum(self.ix["pools"][p]["segments"]) for p in {rec["pool"], rec["outputs_pool"]}
                  if p is not None and p not in self.pools)
        if not new:
            return ""
        if new > budget:
            return beyond_budget(budget, new)
        if self.f.over_budget == "evict":
            return ""  # the budget's evictions decide, once it is made (f.adopt)
        total = self.f.memory()["total"] + new
        return beyond_budget(budget, new, total) if total > budget else ""

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


def variants(rec: dict) -> dict:
    """``{kernel name: variant}`` of a key record (see :mod:`.kernel_probe`)."""
    return dict(rec.get("variants", ()))
