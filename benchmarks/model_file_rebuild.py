"""The rebuild of a model's graph file on the CPU, through the driver stub (no GPU; not
part of the suite)::

    python benchmarks/model_file_rebuild.py [--layers 12] [--repeat 20]

``pcg.load_graphed`` loads one graph file per key of a served model; after the file is
read and checked (``benchmarks/model_file_check.py``), the loader binds its slots and adds
its nodes. This times that second half for the same GPT-2-shaped decode step (per layer,
twice: a run of 12 kernels saved by name, then a memset), with ``libcuda`` replaced by the
driver stub (``tests/support/driver_stub.c``: ``cuGraphAddKernelNode`` counts calls and
returns a handle), so what it measures is the Python and numpy work around the driver
calls, median of ``--repeat``:

* bind: the loader made, every slot bound and checked (``bind_slots``), the records'
  view set up;
* kernel runs: every run added (its relocations written, one ``cuGraphAddKernelNode`` per
  record, a node object per record knowing its argument bytes), memsets stood in by a
  node with no driver call (the stub has no memset; on a GPU each is one
  ``cudaGraphAddMemsetNode``);
* within it, the file's function records checked and their params structs written
  (once per file).

The edge from each memset into the run after it (one ``cudaGraphAddDependencies`` per run
on a GPU) is skipped: the stub has no such call either.

The library kernels' ``CUfunction`` handles are stand-ins whose parameter offsets are
given to the loader's ``cuFuncGetParamInfo`` cache, as a real lookup would fill it.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pycudagraph._cuda import fast  # noqa: E402
from pycudagraph._cuda.context import thread_state  # noqa: E402
from pycudagraph.files import archive as files  # noqa: E402
from pycudagraph.files import load as file_load  # noqa: E402
from pycudagraph.files.bulk_format import RUN  # noqa: E402
from pycudagraph.nodes import captured_args  # noqa: E402

from benchmarks.model_file_check import host_line, model_file, print_rows  # noqa: E402

FUNC_BASE = 0x5100_0000  # stand-in CUfunction handles, one per kernel of the file


def offsets_of(sizes: list) -> list:
    """``(offset, size)`` of each parameter laid out as a kernel's parameter space is:
    each at a multiple of its size (of 8 for a struct)."""
    out, at = [], 0
    for n in sizes:
        align = min(n, 8)
        at = (at + align - 1) // align * align
        out.append((at, n))
        at += n
    return out


class StandIn:
    """A memset record's stand-in: a node registered with no driver call."""

    @classmethod
    def from_record(cls, g, deps, nd, loader):
        from tests.support.fakes import fake_node
        return fake_node(g)


def setup_stub():
    """The driver stub as libcuda for the compiled route (count calls only)."""
    from tests.support import driver_stub
    stub = driver_stub.Stub(driver_stub.build(tempfile.mkdtemp(prefix="pcg-stub-")))
    stub.quiet()
    fast.use_driver_library(stub.path)
    thread_state.device, thread_state.visited = 0, {0}
    fast._ensure()
    return stub


def no_edges(graph, frm, to) -> None:
    """A stand-in for ``versions.graph_add_dependencies`` that adds nothing."""


def rebuild_once(gf, bufs: dict, funcs: list) -> tuple:
    """One bind + rebuild of ``gf``: (graph, ms of the bind, ms of the rebuild, ms of its
    function records)."""
    from tests.support.fakes import fake_graph
    t0 = time.perf_counter()
    loader = file_load._Loader(gf, bufs, None, "benchmark")
    t1 = time.perf_counter()
    loader.use(list(funcs))
    loader.classes = dict(loader.classes, memset=StandIn)
    g = fake_graph()
    loader.function_records()  # what the first run would make: timed on its own too
    t2 = time.perf_counter()
    loader.fill(g, gf.manifest["root"])
    t3 = time.perf_counter()
    return g, (t1 - t0) * 1e3, (t3 - t1) * 1e3, (t2 - t1) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=20)
    opts = ap.parse_args(argv)
    from tests.support.fakes import fake_buffer
    stub = setup_stub()
    gf = files.decode(model_file(opts.layers))
    m = gf.manifest
    funcs = [FUNC_BASE + 0x100 * k for k in range(len(m["kernels"]))]
    for func, k in zip(funcs, m["kernels"]):
        captured_args._INFO[func] = offsets_of(k["sizes"])  # as cuFuncGetParamInfo fills it
    bufs = {name: fake_buffer(meta["nbytes"]) for name, meta in m["slots"].items()}
    real_edges = file_load.versions.graph_add_dependencies
    file_load.versions.graph_add_dependencies = no_edges
    try:
        return measure(gf, bufs, funcs, stub, opts)
    finally:
        file_load.versions.graph_add_dependencies = real_edges


def measure(gf, bufs: dict, funcs: list, stub, opts) -> int:
    m = gf.manifest
    records = len(gf.bulk[0])
    runs = sum(n["type"] == RUN for n in m["root"]["nodes"])
    binds, builds, splits = [], [], []
    for _ in range(max(opts.repeat, 1) + 1):  # the first round warms up, not counted
        gc.collect()
        gc.disable()
        before = stub.calls("cuGraphAddKernelNode")
        g, bind_ms, build_ms, records_ms = rebuild_once(gf, bufs, funcs)
        gc.enable()
        added = stub.calls("cuGraphAddKernelNode") - before
        if added != records:
            raise SystemExit(f"model_file_rebuild: {added} kernel nodes added, the file has "
                             f"{records} records")
        binds.append(bind_ms)
        builds.append(build_ms)
        splits.append(records_ms)
        del g
    rows = (("bind", binds[1:]), ("kernel runs", builds[1:]),
            ("  of which the function records", splits[1:]))
    print(f"a model's graph file rebuilt through the driver stub: {opts.layers} layers, "
          f"{runs} kernel runs, {records} kernel records, {len(m['slots'])} slots")
    print_rows(f"ms (median of {max(opts.repeat, 1)}):",
               [(name, statistics.median(values)) for name, values in rows], 32)
    per_node = statistics.median(builds[1:]) / records * 1e3
    print(f"  {'kernel runs, us per record':32s}{per_node:8.2f}")
    print(host_line(f"hot path {fast.native_status()}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
