"""The read and check of a model's graph file, on the CPU (no GPU; not part of the suite)::

    python benchmarks/model_file_check.py [--layers 12] [--repeat 20]

A graph file of a served model (one key ``f.save`` writes for a ``pcg.graphed`` model) is
not a chain. Its library kernels come in short runs between memsets, and its slots are
named for the model's weights (``param:transformer.h.0.attn.c_attn.weight``). This writes
such a file from a manifest shaped like a GPT-2 decode step's:

* per layer, twice: a run of 12 kernels saved by name (pointer and integer arguments, and
  a 256-byte by-value struct as PyTorch's elementwise kernels take), then a memset of the
  attention's scratch;
* 12 weight slots per layer, the arguments pointing into them by relocation.

It then times ``decode`` of the file's bytes, median of ``--repeat``, step by step: the
container (header, checksum, section table), the JSON parse, and the manifest's check
(the fields, the records and the runs). It prints the file's size and shape, one row per
step in milliseconds, and the versions.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pycudagraph as pcg  # noqa: E402
from pycudagraph.files import archive as files  # noqa: E402
from pycudagraph.files import bulk_format  # noqa: E402
from pycudagraph.files.schema import check_manifest  # noqa: E402

WEIGHTS = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
           "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
           "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")
#: argument sizes of the layer's 12 kernels, in bytes: pointers and ints, one struct
SIZES = ([8, 8, 8, 4, 8, 8, 8, 8, 1], [8, 8, 4, 4], [8, 8, 256], [8, 8, 8, 4],
         [8, 8, 8, 8, 4, 4], [8, 256], [8, 8, 4], [8, 8, 8, 8, 4, 4], [8, 8, 256],
         [8, 8, 8, 4], [8, 8, 8, 8, 4, 4], [8, 8, 256])
SCRATCH = 120  # bytes of the memset between layers


def _arg(size: int, slot: str | None, at: int) -> dict:
    """One argument: a pointer into ``slot`` (an 8-byte argument, or two slots of a struct)
    or a number."""
    data = bytearray(size)
    relocs = []
    if slot is not None and size >= 8:
        for off in ((0,) if size == 8 else (0, 64)):
            relocs.append([off, {"slot": slot, "offset": at}])
    elif size in (1, 4):
        data[:size] = (7).to_bytes(size, "little")
    return {"hex": bytes(data).hex(), "relocs": relocs}


def model_manifest(layers: int) -> dict:
    """The manifest of one decode step of a GPT-2-shaped model, ``layers`` layers. No CUDA call."""
    slots = {"input:0": {"kind": "device", "nbytes": 1088},
             "pool:0:0": {"kind": "device", "nbytes": 1 << 24}}
    for i in range(layers):
        for w in WEIGHTS:
            slots[f"param:transformer.h.{i}.{w}"] = {"kind": "device", "nbytes": 1 << 20}
    kernels = [{"name": f"_ZN2at6native{k:02d}elementwise_kernelILi128ELi4EEEviT_",
                "module": None, "signature": None, "sizes": list(sizes)}
               for k, sizes in enumerate(SIZES)]
    nodes = []
    for i in range(layers):
        for _half in range(2):
            for k, sizes in enumerate(SIZES):
                weight = f"param:transformer.h.{i}.{WEIGHTS[k]}"
                args = [_arg(n, weight if j == 0 else ("pool:0:0" if n >= 8 else None), 64 * j)
                        for j, n in enumerate(sizes)]
                nodes.append({"id": len(nodes), "type": "kernel", "kernel": k,
                              "grid": [4, 1, 1], "block": [128, 1, 1], "shared_mem": 0,
                              "args": args})
            nodes.append({"id": len(nodes), "type": "memset", "value": 0, "element_size": 1,
                          "count": SCRATCH, "height": 1, "pitch": 0,
                          "dst": {"slot": "pool:0:0", "offset": 4096}})
    return {"format": "pycudagraph.graph", "writer": "benchmark", "arch": "sm_90",
            "slots": slots, "modules": [], "kernels": kernels,
            "root": {"handles": [], "nodes": nodes,
                     "edges": [[j, j + 1, "default"] for j in range(len(nodes) - 1)]}}


def model_file(layers: int) -> bytes:
    """The bytes of that graph file, its kernel nodes as binary records. No CUDA call."""
    m, sections = bulk_format.pack(model_manifest(layers), [], {})
    return files.encode(m, sections, version=bulk_format.version_of(m, files.VERSION))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=20)
    opts = ap.parse_args(argv)
    data = model_file(opts.layers)
    gf = files.decode(data)
    raw, tags = gf.sections[0][1], [t for t, _ in gf.sections]
    kinds = [n["type"] for n in gf.manifest["root"]["nodes"]]

    def median(fn) -> float:
        times = []
        for _ in range(max(opts.repeat, 1)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    total = median(lambda: files.decode(data))
    parse = median(lambda: files._parse_manifest(raw, keys_checked=False))  # as decode does
    check = median(lambda: check_manifest(gf.manifest, tags, False, gf.sections))
    print(f"a model's graph file: {opts.layers} layers, {len(data) / 1024:.1f} KiB, "
          f"{kinds.count('kernel_run')} kernel runs, {kinds.count('memset')} memsets, "
          f"{len(gf.manifest['slots'])} slots, {len(gf.bulk[0])} kernel records")
    print_rows(f"decode, ms (median of {max(opts.repeat, 1)}):",
               (("container", total - parse - check), ("JSON parse", parse),
                ("manifest check", check), ("decode", total)), 16)
    print(host_line())
    return 0


def print_rows(title: str, rows, width: int) -> None:
    """``title``, then a line per ``(name, ms)`` row, the names ``width`` wide."""
    print(title)
    for name, ms in rows:
        print(f"  {name:{width}s}{ms:8.3f}")


def host_line(*parts: str) -> str:
    """The Python and pycudagraph versions, ``parts``, then the processor."""
    return ", ".join((f"Python {platform.python_version()}", f"pycudagraph {pcg.__version__}",
                      *parts, platform.processor() or platform.machine()))


if __name__ == "__main__":
    sys.exit(main())
