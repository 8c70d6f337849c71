"""Start-up from graph files (not part of the suite). Run from the repository root on a GPU::

    python benchmarks/graph_files_startup.py [--repeat 5] [--nodes 1000] [--buckets 20]

Two graph sets, each timed from "nothing built in this process" to "instantiated, ready
to launch", median of ``--repeat`` rounds after one warm-up round; a round runs every row
once, in turn, so a machine that speeds up or slows down during the run moves every row
alike. Exec reuse is paused while a row runs (an exec released by the round before is not
updated in place of an instantiate: a fresh process has none):

* a straight chain of 1,000 kernel nodes (four kernels in turn);
* 20 bucket graphs (50 kernel nodes each, the element count of each bucket its own), all
  sharing the same buffers and module, as an inference server keeps one graph per batch size.

Rows:

* ``load + instantiate``: ``pcg.load`` of the saved file(s) with the buffers bound, then
  ``instantiate``; no compile, no capture (modules from the stored CUBIN; files that share
  a module load it once);
* ``rebuild, compile cache cold``: ``Program.compile`` (NVRTC, an empty cache folder), the
  ``add_kernel`` calls, ``instantiate``;
* ``rebuild, compile cache warm``: the same with the CUBIN read from the on-disk cache;
* ``capture, compile cache warm``: the module from the cache, the launches captured with
  ``pcg.capture``, ``instantiate``.

Every row loads its module afresh (``cudaLibraryLoadData``). The results of the loaded and
the rebuilt 1,000-node graph are compared before timing. Prints one table (milliseconds),
then ``load + instantiate`` step by step: read + decode + check (``read_file``), bind +
module load (slots bound, modules loaded, kernels found), node rebuild, instantiate; beside
them the same ``add_kernel`` calls made from Python with the kernels at hand and what the
loader adds per node on top of them; how many ``cudaLibraryLoadData`` one load of each set
makes (1: its files share one module); then the file sizes and save times.

``--cpu`` needs no GPU: it times the Python work of a load for a 1,000- and a 10,000-node
chain manifest written by ``files.encode`` (the manifest ``Graph.save`` writes for the
chain), in format 1 (a JSON record per kernel node) and format 2 (binary records): the
container (header, checksum, table), the JSON parse, the schema check, and the loader's
rebuild of the nodes, added through the driver stub (``tests/support/driver_stub.c``, built
with the C compiler, as libcuda: the driver's own work is not in it); for format 2 also the
same adds with no node object made (handles only), what is left of the rebuild without the
objects pycudagraph keeps per node.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pycudagraph as pcg  # noqa: E402
from pycudagraph.files import load as file_load
from pycudagraph.files import modules as file_modules  # noqa: E402
from pycudagraph.files import archive as graph_files  # noqa: E402
from pycudagraph.graph.exec_reuse import paused  # noqa: E402

SRC = r'''
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
extern "C" __global__ void scale(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
extern "C" __global__ void add3(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
extern "C" __global__ void relu(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && y[i] < 0.0f) y[i] = 0.0f;
}
'''
NMAX = 1 << 16
BLOCK = 256


def kernels():
    mod = pcg.Program(SRC, name="startup.cu").compile()
    return [mod[k] for k in ("axpy", "scale", "add3", "relu")]


def launch_args(ks, bufs, i, n):
    x, y, z = bufs["x"], bufs["y"], bufs["z"]
    return [(ks[0], (y, x, 0.5, n)), (ks[1], (y, 0.99, n)), (ks[2], (z, y, x, n)),
            (ks[3], (z, n))][i % 4]


def build(ks, bufs, nodes, n):
    g = pcg.Graph()
    prev = ()
    grid = (n + BLOCK - 1) // BLOCK
    for i in range(nodes):
        k, args = launch_args(ks, bufs, i, n)
        prev = (g.add_kernel(k, grid, BLOCK, args, deps=prev),)
    return g


def capture(ks, bufs, nodes, n, stream):
    grid = (n + BLOCK - 1) // BLOCK
    with pcg.capture(stream) as cap:
        for i in range(nodes):
            k, args = launch_args(ks, bufs, i, n)
            k.launch(grid, BLOCK, args, stream=stream)
    return cap.graph


def sizes(nodes, buckets):
    """(graph name, nodes, element count) of every graph of each set."""
    return {"1000-node graph": [("chain", nodes, NMAX)],
            f"{buckets} bucket graphs": [(f"bucket{b}", 50, NMAX * (b + 1) // buckets)
                                         for b in range(buckets)]}


def timed_rows(fns: list, repeat: int) -> list:
    """Median milliseconds of each of ``fns`` over ``repeat`` rounds after one warm-up
    round, a round running each once in turn, with exec reuse paused; each returns what to
    drop after its clock stops (execs, graphs)."""
    times: list = [[] for _ in fns]
    for r in range(repeat + 1):
        for i, fn in enumerate(fns):
            gc.collect()
            gc.disable()
            with paused():
                t0 = time.perf_counter()
                keep = fn()
                t1 = time.perf_counter()
            gc.enable()
            for exe in keep:
                exe.close()
            del keep
            if r:
                times[i].append((t1 - t0) * 1e3)
    return [statistics.median(t) for t in times]


# --------------------------------------------------------------------------- --cpu

#: the chain's kernels: name, signature, which of its parameters are pointers to slots
CHAIN = [("axpy", "float* y, const float* x, float a, int n", "yx"),
         ("scale", "float* y, float a, int n", "y"),
         ("add3", "float* out, const float* a, const float* b, int n", "zyx"),
         ("relu", "float* y, int n", "z")]


def cpu_manifest(nodes: int) -> dict:
    """The manifest ``Graph.save`` writes for the chain (four kernels in turn), no GPU."""
    def args(name):
        slots = {"axpy": "yx", "scale": "y", "add3": "zyx", "relu": "z"}[name]
        out = [{"hex": (0x7F0000000000 + 0x100000 * "xyz".index(s)).to_bytes(8, "little").hex(),
                "relocs": [[0, {"slot": s, "offset": 0}]]} for s in slots]
        if name in ("axpy", "scale"):
            out.append({"hex": struct.pack("<f", 0.5).hex(), "relocs": []})
        return out + [{"hex": struct.pack("<i", NMAX).hex(), "relocs": []}]
    kernels = [{"name": name, "module": 0, "signature": sig,
                "sizes": [8] * len(ptrs) + [4] * (sig.count(",") + 1 - len(ptrs))}
               for name, sig, ptrs in CHAIN]
    grid = [(NMAX + BLOCK - 1) // BLOCK, 1, 1]
    node_list = [{"id": i, "type": "kernel", "kernel": i % 4, "grid": grid, "block": [BLOCK, 1, 1],
                  "shared_mem": 0, "args": args(CHAIN[i % 4][0])} for i in range(nodes)]
    return {"format": "pycudagraph.graph", "writer": "benchmark", "arch": "sm_90",
            "slots": {s: {"kind": "device", "nbytes": 4 * NMAX} for s in "xyz"},
            "modules": [{"name": "startup.cu", "arch": "sm_90", "cubin": 1, "ptx": None}],
            "kernels": kernels,
            "root": {"handles": [], "nodes": node_list,
                     "edges": [[i, i + 1, "default"] for i in range(nodes - 1)]}}


def cpu_main(repeat: int) -> int:
    """Time decode (container, JSON, schema check) and the loader's node rebuild on a CPU,
    the nodes added through the driver stub (``tests/support/driver_stub.c`` as libcuda):
    format 1 (a JSON record per kernel node) and format 2 (binary records) of the chain."""
    import copy
    from pycudagraph._cuda import fast
    from pycudagraph._cuda.context import thread_state
    from pycudagraph.files import archive as files
    from pycudagraph.files import bulk_format
    from pycudagraph.files.schema import check_manifest
    from tests.support import driver_stub
    from tests.support.fakes import fake_buffer, fake_graph, fake_kernel

    stub = driver_stub.Stub(driver_stub.build(tempfile.mkdtemp(prefix="pcg-stub-")))
    stub.quiet()  # count calls only
    fast.use_driver_library(stub.path)
    thread_state.device, thread_state.visited = 0, {0}
    fast._ensure()

    def best(fn) -> float:
        return min(timed_once(fn) for _ in range(repeat + 1))

    def timed_once(fn) -> float:
        gc.collect()
        gc.disable()
        t0 = time.process_time()  # this process's CPU time: a busy machine does not count
        fn()
        t1 = time.process_time()
        gc.enable()
        return (t1 - t0) * 1e3

    kernels = [fake_kernel(sig, name) for name, sig, _ in CHAIN]
    bufs = {s: fake_buffer(4 * NMAX) for s in "xyz"}
    print(f"Python work of a load, CPU ms (best of {repeat + 1}); Python {sys.version.split()[0]}, "
          f"pycudagraph {pcg.__version__}, hot path {fast.native_status()}")
    cols = ("file KiB", "container", "JSON", "check", "decode", "rebuild", "us/node", "total",
            "us/node", "objects")
    print("nodes".rjust(7) + "format".rjust(8) + "".join(c.rjust(11) for c in cols))
    cubin = [("CUBN", b"\x7fELF" + bytes(16 << 10))]
    for nodes in (1000, 10000):
        v1 = cpu_manifest(nodes)
        v2, v2_sections = bulk_format.pack(copy.deepcopy(v1), cubin, dict(enumerate(kernels)))
        for version, m, sections in (((1, 0), v1, cubin), ((2, 0), v2, v2_sections)):
            data = files.encode(m, sections, version=version)
            gf = files.decode(data)
            raw = gf.sections[0][1]
            tags = [t for t, _ in gf.sections]
            t_all = best(lambda: files.decode(data))
            t_json = best(lambda: files._parse_manifest(raw, keys_checked=False))  # as decode does
            t_check = best(lambda: check_manifest(gf.manifest, tags, False, gf.sections))
            made = []

            def rebuild():
                loader = file_load._Loader(gf, bufs, None, "benchmark")
                loader.use(kernels)
                g = fake_graph()
                loader.fill(g, gf.manifest["root"])
                made.append(g)
            before = stub.calls("cuGraphAddKernelNode")
            t_build = best(rebuild)
            assert stub.calls("cuGraphAddKernelNode") - before == nodes * (repeat + 1)
            made[-1].table.settle()
            assert len(made[-1].table.nodes) == nodes
            made.clear()

            def first_use() -> float:  # every node's object made after a rebuild
                rebuild()
                return timed_once(made.pop().table.settle)
            t_adds = (min(first_use() for _ in range(repeat + 1)) if version == (2, 0)
                      else float("nan"))
            cells = (len(data) / 1024, t_all - t_json - t_check, t_json, t_check, t_all,
                     t_build, t_build / nodes * 1e3, t_all + t_build, (t_all + t_build) / nodes * 1e3,
                     t_adds)
            print(f"{nodes:7d}{version[0]:8d}" + "".join("n/a".rjust(11) if c != c else
                                                         f"{c:11.2f}" for c in cells))
    print("container: decode less JSON and check (header, checksum, section table, key count);")
    print("rebuild: the loader's node rebuild, the kernel nodes added through the driver stub "
          "(cuGraphAddKernelNode counts calls only); total: decode + rebuild;")
    print("objects: format 2 adds its kernel nodes with no object each; this is making every "
          "node's object afterwards (what reading all of them first costs, table.settle)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--buckets", type=int, default=20)
    ap.add_argument("--cpu", action="store_true", help="time the Python work of a load, no GPU")
    opts = ap.parse_args()
    if opts.cpu:
        return cpu_main(opts.repeat)
    try:
        pcg.device_count()
    except pcg.CudaError as exc:
        print(f"no usable GPU: {exc}")
        return 1
    stream = pcg.Stream()
    bufs = {name: pcg.DeviceBuffer(4 * NMAX) for name in ("x", "y", "z")}
    sets = sizes(opts.nodes, opts.buckets)
    work = Path(tempfile.mkdtemp(prefix="pcg_startup_"))
    cold_dirs = iter(range(10 ** 6))

    def cache(folder: str) -> None:
        os.environ["PYCUDAGRAPH_CACHE_DIR"] = str(work / folder)

    cache("warm")
    ks = kernels()
    files, saved = {}, {}
    for title, graphs in sets.items():
        t0 = time.perf_counter()
        files[title] = []
        for name, nodes, n in graphs:
            path = work / f"{name}.pcgraph"
            build(ks, bufs, nodes, n).save(path, slots=bufs)
            files[title].append(path)
        saved[title] = ((time.perf_counter() - t0) * 1e3, sum(p.stat().st_size for p in files[title]))

    # the loaded graph computes what the rebuilt one does
    results = []
    for make in (lambda: build(kernels(), bufs, opts.nodes, NMAX),
                 lambda: pcg.load(files["1000-node graph"][0], bind=bufs)):
        for name in ("x", "y", "z"):
            bufs[name].copy_from(np.linspace(-1, 1, NMAX, dtype=np.float32))
        make().instantiate().launch(stream)
        stream.synchronize()
        results.append(bufs["z"].to_numpy(np.float32))
    assert np.array_equal(results[0], results[1]), "the loaded graph computes something else"

    def load_set(title):
        def run():
            file_modules._MODULES.clear()  # a fresh process has loaded no module yet
            return [pcg.load(p, bind=bufs).instantiate() for p in files[title]]
        return run

    def rebuild_set(title, cold: bool):
        def run():
            if cold:
                cache(f"cold{next(cold_dirs)}")  # an empty cache folder: NVRTC compiles
            ks = kernels()
            return [build(ks, bufs, nodes, n).instantiate() for _, nodes, n in sets[title]]
        return run

    def capture_set(title):
        def run():
            ks = kernels()
            return [capture(ks, bufs, nodes, n, stream).instantiate() for _, nodes, n in sets[title]]
        return run

    def load_split(title):
        """Median ms of each step of load + instantiate of a set, as ``pcg.load`` takes
        them (read_file, _Loader.prepare, _Loader.build), then instantiate; and of the same
        add_kernel calls made from Python with the kernels at hand."""
        rounds = []
        for r in range(opts.repeat + 1):
            file_modules._MODULES.clear()
            gc.collect()
            gc.disable()
            cells, keep = [0.0] * 5, []
            for p, (_, nodes, n) in zip(files[title], sets[title]):
                t0 = time.perf_counter()
                gf = graph_files.read_file(p)
                t1 = time.perf_counter()
                loader = file_load._Loader(gf, bufs, None, str(p))
                loader.prepare()
                t2 = time.perf_counter()
                g = loader.build()
                t3 = time.perf_counter()
                with paused():  # a real instantiate, as in a fresh process
                    keep.append(g.instantiate())
                t4 = time.perf_counter()
                keep.append(build(ks, bufs, nodes, n))
                t5 = time.perf_counter()
                steps = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
                cells = [c + d for c, d in zip(cells, steps)]
            gc.enable()
            for obj in keep:
                obj.close()
            if r:
                rounds.append(cells)
        return [statistics.median(col) * 1e3 for col in zip(*rounds)]

    def module_loads(title) -> int:
        """cudaLibraryLoadData calls of one pcg.load of every file of a set (1: one module)."""
        file_modules._MODULES.clear()
        with pcg.trace() as t:
            execs = [pcg.load(p, bind=bufs).instantiate() for p in files[title]]
        for exe in execs:
            exe.close()
        return sum("LibraryLoadData" in line for line in t.calls)

    def warm(run):
        def with_warm_cache():
            cache("warm")  # the cold row's run points the cache at an empty folder
            return run()
        return with_warm_cache

    labels = ("load + instantiate", "rebuild, compile cache cold",
              "rebuild, compile cache warm", "capture, compile cache warm")
    cells = {}
    for title in sets:
        fns = [warm(load_set(title)), rebuild_set(title, True),
               warm(rebuild_set(title, False)), warm(capture_set(title))]
        cells[title] = timed_rows(fns, opts.repeat)
        print(f"  measured: {title}", file=sys.stderr)
    rows = [(label, [cells[title][i] for title in sets]) for i, label in enumerate(labels)]

    gpu = pcg.Device(0)
    print(f"\nStart-up to instantiated graphs, ms (median of {opts.repeat}); "
          f"{getattr(gpu, 'name', 'GPU 0')}, pycudagraph {pcg.__version__}")
    titles = list(sets)
    width = max(len(r[0]) for r in rows) + 2
    print("".ljust(width) + "".join(t.rjust(22) for t in titles))
    for label, cells in rows:
        print(label.ljust(width) + "".join(f"{c:22.2f}" for c in cells))
    base = rows[0][1]
    for label, cells in rows[1:]:
        print(f"{label} / load:".ljust(width) + "".join(f"{c / b:21.1f}x" for c, b in zip(cells, base)))
    print("load / capture, compile cache warm:".ljust(width)
          + "".join(f"{b / c:21.2f}x" for b, c in zip(base, rows[3][1])))
    splits = [load_split(title) for title in titles]
    width = 42
    print(f"\nload + instantiate, step by step, ms (median of {opts.repeat})")
    print("".ljust(width) + "".join(t.rjust(22) for t in titles))
    steps = ("read + decode + check", "bind + module load", "node rebuild",
             "instantiate", "(add_kernel from Python)")
    for i, step in enumerate(steps):
        print(f"  {step}".ljust(width) + "".join(f"{c[i]:22.2f}" for c in splits))
    counts = {t: sum(n for _, n, _ in sets[t]) for t in titles}
    print("  node rebuild - add_kernel, us/node".ljust(width)
          + "".join(f"{(c[2] - c[4]) * 1e3 / counts[t]:22.2f}" for c, t in zip(splits, titles)))
    loads = [module_loads(title) for title in titles]
    print("  cudaLibraryLoadData per load of the set".ljust(width)
          + "".join(f"{n:22d}" for n in loads))
    if any(n != 1 for n in loads):
        print("  (expected 1: every file of a set shares one module)")
    for title in titles:
        ms, nbytes = saved[title]
        print(f"{title}: {len(files[title])} file(s), {nbytes / 1024:.0f} KiB, saved in {ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
