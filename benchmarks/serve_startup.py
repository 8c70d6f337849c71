"""Serving start-up: a GPT-2-sized model with 20 decode buckets, from "model built" to "first
replay of every bucket done", by capturing (``pcg.graphed``) and by loading what another
process saved (``pcg.load_graphed``). Not part of the suite. Run from the repository root
on a GPU::

    python benchmarks/serve_startup.py [--repeat 3] [--layers 12] [--json PATH]

Every measurement runs in a fresh child process (nothing warm but the files on disk): one
child captures the 20 buckets and saves them (``f.save``), then ``--repeat`` pairs of
children, alternating, time each path:

* **capture path**: ``f = pcg.graphed(step)``, then ``f(ids)`` for each bucket (each first
  call warms up, captures and instantiates its graph) and one synchronize;
* **load path**: ``f = pcg.load_graphed(folder, step)`` (index and model checks, the probe
  captures that find the library kernels, the graph files, instantiates), then ``f(ids)``
  for each bucket (its first replay, rebinding the input) and one synchronize (the wait
  there, for the replays to finish on the GPU, is timed too);
* **first eager call**: one bucket run eagerly and one synchronize, the least a load can
  cost: it finds PyTorch's and cuBLAS's kernels by running the model once (their modules
  load as they first run).

All three start after the model is built and the inputs made (the same in each). Prints the
median of each, their ratio (the target: the load path at most 25% of the capture path),
the load path step by step (``f.load_report``), then the memory of the 20 keys with one
capture pool shared by every key against one pool per key (``f.memory()`` where the
graphed callable has it, else the bytes of the distinct capture pools the keys hold), and
the GPU and versions. ``--json PATH`` writes the same to a file, which
``python docs/_tools/make_pictures.py startup PATH`` draws as the serving page's chart.

The model is ``transformers.GPT2LMHeadModel`` from ``GPT2Config()`` (GPT-2 small: 12 layers,
768 wide, 124M parameters) with random weights (no download); a decode step is
``model(ids, use_cache=False).logits`` for ids of shape (batch, 1), the buckets are the
batch sizes 1, 2, 4, 8, 16, ..., 136.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUCKETS = [1, 2, 4] + list(range(8, 144, 8))  # 20 batch sizes

MODEL = r'''
import json, sys, time
import torch, transformers
import pycudagraph as pcg

ARGS = json.loads(sys.argv[1])
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=ARGS["layers"])
model = transformers.GPT2LMHeadModel(config).cuda().eval()


def step(ids):
    return model(ids, use_cache=False).logits


IDS = {b: torch.randint(0, config.vocab_size, (b, 1), device="cuda") for b in ARGS["buckets"]}
torch.cuda.synchronize()


def pools_bytes(f):
    """Bytes of the distinct capture pools the keys hold (each counted once)."""
    memory = getattr(f, "memory", None)
    if callable(memory):
        return int(memory()["total"])
    pools = {}
    for e in f.graphs.values():
        for p in (e.pools() if hasattr(e, "pools") else (e.pool,)):
            pools[id(p)] = p
    return sum(sum(p.reserved_bytes().values()) for p in pools.values())


def done(**out):
    print("RESULT " + json.dumps(out))
'''

SAVE = MODEL + r'''
f = pcg.graphed(step)
for ids in IDS.values():
    f(ids)
torch.cuda.synchronize()
report = f.save(ARGS["folder"])
done(keys=report.keys, skipped=[str(why) for why in report.skipped.values()])
'''

CAPTURE = MODEL + r'''
start = time.perf_counter()
f = pcg.graphed(step)
for ids in IDS.values():
    f(ids)
torch.cuda.synchronize()
done(ms=1000 * (time.perf_counter() - start), captures=f.stats.captures)
'''

LOAD = MODEL + r'''
start = time.perf_counter()
f = pcg.load_graphed(ARGS["folder"], step)
for ids in IDS.values():
    f(ids)
called = time.perf_counter()
torch.cuda.synchronize()
end = time.perf_counter()
r = f.load_report
done(ms=1000 * (end - start), wait_ms=1000 * (end - called), captures=f.stats.captures,
     loaded=r.loaded, fallback=len(r.fallback), probes=r.probes, kernel_sets=r.kernel_sets,
     kernels=r.kernels, module_hits=r.module_hits, seconds=r.seconds)
'''

FIRST = MODEL + r'''
start = time.perf_counter()
with torch.no_grad():
    step(IDS[ARGS["buckets"][0]])
torch.cuda.synchronize()
done(ms=1000 * (time.perf_counter() - start))
'''

MEMORY = MODEL + r'''
import inspect
pool = ARGS["pool"]
if "pool" in inspect.signature(pcg.graphed).parameters:
    f = pcg.graphed(step, pool=pool)
elif pool == "private":
    f = pcg.graphed(step)  # before shared pools: one pool per key
else:
    done(bytes=None); sys.exit(0)
for ids in IDS.values():
    f(ids)
torch.cuda.synchronize()
done(bytes=pools_bytes(f), reserved=torch.cuda.memory_reserved())
'''

ENV = r'''
import json, platform, torch
import pycudagraph as pcg
from pycudagraph._cuda import versions
try:
    import transformers
    tv = transformers.__version__
except ImportError:
    tv = None
p = torch.cuda.get_device_properties(0)
print("RESULT " + json.dumps({"gpu": f"{p.name} (sm_{p.major}{p.minor})",
      "torch": torch.__version__, "transformers": tv, "python": platform.python_version(),
      "cuda_bindings": versions.BINDINGS_VERSION,
      "driver": versions.format_version(versions.driver_version()),
      "pycudagraph": pcg.__version__}))
'''


def child(script: str, args: dict, timeout: int = 900) -> dict:
    """Run ``script`` in a fresh Python; its ``RESULT`` line as a dict."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"serve_startup: a child failed (exit {proc.returncode}):\n"
                         f"{(proc.stdout + proc.stderr)[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def saved_lines(saved: dict, folder: str) -> str:
    """What the saving child saved (its ``RESULT``): the keys, and why each key left out
    was left out (a key left out is captured at load, which the load path then pays)."""
    lines = [f"saved {saved['keys']} keys ({len(saved['skipped'])} left out) to {folder}"]
    lines += [f"  left out: {why}" for why in saved["skipped"]]
    return "\n".join(lines)


def per_bucket(cap_ms: float, first_ms: float, load: dict) -> str:
    """What one more bucket costs each path: a load, its key's share of ``graphs`` (graph
    file, instantiate, rebinding plan) as ``load`` (a load child's result) measured it; a
    capture, the capture path less one eager call, shared out over the buckets."""
    n = len(BUCKETS)
    loaded = 1000 * load["seconds"]["graphs"] / max(load["loaded"], 1)
    captured = (cap_ms - first_ms) / n
    return (f"per bucket: a load {loaded:.1f} ms (its graph file, instantiate and rebinding "
            f"plan), a capture {captured:.1f} ms (the capture path less one eager call, over "
            f"{n} buckets): {loaded / captured:.0%}")


def result_json(layers: int, capture: list, load: list, first: list, pools: tuple,
                env: dict) -> str:
    """What ``--json`` writes: every child's result (capture, load with its
    ``f.load_report`` steps, first eager call), the pools' bytes and the versions."""
    shared, private = pools
    return json.dumps({"layers": layers, "buckets": len(BUCKETS), "repeat": len(capture),
                       "capture": capture, "load": load, "first_eager": first,
                       "pool_bytes": {"shared": shared["bytes"], "per_key": private["bytes"]},
                       "env": env}, indent=1) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed pairs of children (3)")
    parser.add_argument("--layers", type=int, default=12, help="GPT-2 layers (12)")
    parser.add_argument("--json", metavar="PATH", help="also write what was measured to PATH "
                        "(the input of docs/_tools/startup_chart.py)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        print(f"serve_startup: {exc}; nothing to measure")
        return 0
    work = Path(tempfile.mkdtemp(prefix="serve-startup-"))
    common = {"layers": args.layers, "buckets": BUCKETS, "folder": str(work / "gpt2.graphs")}
    try:
        saved = child(SAVE, common)
        print(saved_lines(saved, common["folder"]))
        capture, load, first = [], [], []
        for _ in range(args.repeat):
            capture.append(child(CAPTURE, common))
            load.append(child(LOAD, common))
            first.append(child(FIRST, common))
        cap_ms = statistics.median(r["ms"] for r in capture)
        load_ms = statistics.median(r["ms"] for r in load)
        first_ms = statistics.median(r["ms"] for r in first)
        last = load[-1]
        print(f"\nstart to first replay of all {len(BUCKETS)} buckets, GPT-2 ({args.layers} layers),"
              f" median of {args.repeat} fresh processes each:")
        print(f"  capture path  {cap_ms:9.1f} ms  ({capture[-1]['captures']} captures)")
        print(f"  load path     {load_ms:9.1f} ms  ({last['loaded']} keys loaded, "
              f"{last['fallback']} captured instead, {last['captures']} captures, "
              f"{last['probes']} probe capture(s) for {last['kernel_sets']} kernel sets)")
        ratio = load_ms / cap_ms
        print(f"  load / capture = {ratio:.1%}  (target <= 25%: "
              f"{'met' if ratio <= 0.25 else 'NOT met'})")
        steps = ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in last["seconds"].items())
        print(f"  load path step by step: {steps}; {last['kernels']} library kernels found, "
              f"{last['module_hits']} of them in modules a probe had shown")
        print(f"  first eager call of one bucket in a fresh process {first_ms:9.1f} ms  "
              f"({first_ms / cap_ms:.1%} of the capture path): the load path runs the model once "
              "to find the library kernels (their modules load as they first run, cuBLAS "
              "starts)")
        wait_ms = statistics.median(r["wait_ms"] for r in load)
        floor = first_ms + wait_ms
        print(f"  of the load path, the wait at its end for the first replays to finish on the "
              f"GPU {wait_ms:.1f} ms; with the eager call, {floor:.1f} ms ({floor / cap_ms:.1%} "
              "of the capture path): no load is faster than this")
        print("  " + per_bucket(cap_ms, first_ms, last))
        shared = child(MEMORY, dict(common, pool="shared"))
        private = child(MEMORY, dict(common, pool="private"))
        print(f"\nmemory of the {len(BUCKETS)} keys' capture pools:")
        for name, r in (("one pool shared by every key", shared), ("one pool per key", private)):
            text = "n/a (this pycudagraph has no pool= option)" if r["bytes"] is None else \
                f"{r['bytes'] / 2**20:9.1f} MiB (PyTorch reserved {r['reserved'] / 2**20:.0f} MiB)"
            print(f"  {name:30s} {text}")
        env = child(ENV, {})
        print("\n" + "; ".join(f"{k} {v}" for k, v in env.items()))
        if args.json:
            Path(args.json).write_text(result_json(args.layers, capture, load, first,
                                                   (shared, private), env))
            print(f"wrote {args.json}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
