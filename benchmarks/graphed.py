"""``python -m benchmarks.graphed``: a graphed call with a new input each time, three ways.

The callable is an MLP (Linear 1024 -> 1024, ReLU, Linear 1024 -> 1024, float32) on a
small input (32 x 1024, 128 KiB) and a 64 MiB one (16384 x 1024). Each call gets the next
of four input tensors, so its address changes every call:

- eager PyTorch: ``model(x)``;
- ``torch.cuda.make_graphed_callables``: copies ``x`` into its static input
  (``copy_``), then ``CUDAGraph.replay()``;
- ``pcg.graphed``: rebinds ``x``'s address in the kernel nodes that read it
  (``cuGraphExecKernelNodeSetParams``), then ``cudaGraphLaunch``; no copy;
- ``pcg.graphed``, same input every call (nothing to rebind);
- the rebind alone (``entry.plan.apply``: the set-params calls of one call).

Columns: host microseconds per call (wall time of N calls and one synchronize, over N)
and GPU microseconds per call (CUDA events around the N calls, over N). Prints one
sentence and exits 0 without PyTorch, 1 without a GPU.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

ROWS = ("eager PyTorch", "torch make_graphed_callables (copy in)", "pcg.graphed (rebind)",
        "pcg.graphed (same input)", "pcg rebind alone (set-params)")


def _model(torch):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)]
    model = torch.nn.Sequential(*layers).cuda().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _time(torch, call, iters: int, repeats: int) -> tuple[float, float]:
    """(host us per call, GPU us per call), the medians of ``repeats`` runs."""
    host, gpu = [], []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        for i in range(iters):
            call(i)
        end.record()
        torch.cuda.synchronize()
        host.append((time.perf_counter() - t0) * 1e6 / iters)
        gpu.append(start.elapsed_time(end) * 1e3 / iters)
    return sorted(host)[len(host) // 2], sorted(gpu)[len(gpu) // 2]


def measure(torch, pcg, batch: int, iters: int, repeats: int) -> dict:
    model = _model(torch)
    inputs = [torch.randn(batch, 1024, device="cuda") for _ in range(4)]
    graphed = pcg.graphed(model)
    copied = torch.cuda.make_graphed_callables(copy.deepcopy(model), (inputs[0],))
    with torch.no_grad():
        want = model(inputs[1])
        torch.testing.assert_close(graphed(inputs[1]), want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(copied(inputs[1]), want, rtol=1e-4, atol=1e-4)
        entry, = graphed.graphs.values()
        ptrs = [[x.data_ptr()] for x in inputs]
        calls = {
            ROWS[0]: lambda i: model(inputs[i % 4]),
            ROWS[1]: lambda i: copied(inputs[i % 4]),
            ROWS[2]: lambda i: graphed(inputs[i % 4]),
            ROWS[3]: lambda i: graphed(inputs[0]),
            ROWS[4]: lambda i: entry.plan.apply(ptrs[i % 4], [0]),
        }
        out = {}
        for name, call in calls.items():
            call(1)
            out[name] = _time(torch, call, iters, repeats)
    out["slots"] = entry.plan.slots[0]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.graphed", description=__doc__)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("benchmarks.graphed skipped: PyTorch is not installed.")
        return 0
    if not torch.cuda.is_available():
        print("benchmarks.graphed needs an NVIDIA GPU; PyTorch sees none.")
        return 1
    import pycudagraph as pcg
    cases = (("small: 32 x 1024 fp32 (128 KiB)", 32), ("64 MiB: 16384 x 1024 fp32", 16384))
    results = {label: measure(torch, pcg, batch, args.iters, args.repeats)
               for label, batch in cases}
    print(f"pcg.graphed against torch.cuda.make_graphed_callables: MLP 1024-1024-1024, "
          f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, "
          f"{args.iters} calls x {args.repeats} repeats (median), a new input address every call")
    head = f"{'':42s}" + "".join(f"| {label:^36s}" for label, _ in cases)
    print(head)
    print(f"{'':42s}" + "| host us/call    GPU us/call       " * len(cases))
    print("-" * len(head))
    for row in ROWS:
        cells = "".join(f"| {results[label][row][0]:11.2f}    {results[label][row][1]:11.2f}       "
                        for label, _ in cases)
        print(f"{row:42s}{cells}")
    print(f"the input's address sits in {results[cases[0][0]]['slots']} kernel argument slots "
          "(rebound each call; make_graphed_callables copies the whole input instead)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
