"""``demo --torch``: a PyTorch MLP, three ways.

The model: ``nn.Sequential`` of Linear(512, 1024), ReLU, Linear(1024, 1024),
ReLU, Linear(1024, 512), batch 32, float32, a static input tensor, warmed up on a side
stream. It runs

1. eagerly (``model(static_input)``, about five kernel launches per call),
2. captured with ``torch.cuda.graph`` and replayed with ``CUDAGraph.replay()``,
3. captured with ``pcg.capture`` on ``pcg.Stream.wrap(side_stream)`` and replayed with
   ``GraphExec.launch`` (``cudaGraphLaunch``): pycudagraph drives PyTorch's own kernels.

Everything runs on the side stream. The capture is memory-safe: the tensors PyTorch
allocates inside it come from a private pool that the graph owns (``cap.pool``, the
graph-pool machinery ``torch.cuda.graph`` uses), so the caching allocator never hands
their memory to a tensor allocated later.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import pycudagraph as pcg

from .demo_common import (Check, Clock, compare, gpu_name, headline, print_table, say,
                          verdict, write_chart)

SIZES = (512, 1024, 1024, 512)
BATCH = 32


def import_torch():
    """(torch, "") when PyTorch is installed; else (None, one sentence saying so)."""
    try:
        import torch
    except ImportError:
        return None, ("demo --torch needs PyTorch, which is not installed here "
                      "(pip install torch).")
    return torch, ""


def build_model(torch):
    """The model on the GPU, in eval mode, with fixed random weights."""
    torch.manual_seed(0)
    nn = torch.nn
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(SIZES) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).cuda().eval()


def reference(model, x: np.ndarray) -> np.ndarray:
    """The model in float64 numpy (``y = x @ W.T + b``, ReLU between)."""
    lin = [m for m in model if m.__class__.__name__ == "Linear"]
    h = x.astype(np.float64)
    for i, m in enumerate(lin):
        h = h @ m.weight.detach().double().cpu().numpy().T + m.bias.detach().double().cpu().numpy()
        if i < len(lin) - 1:
            h = np.maximum(h, 0.0)
    return h


def run(iters: int, out: Path) -> int:
    torch, why = import_torch()
    if torch is None:
        print(f"pycudagraph {why}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print(f"pycudagraph demo --torch: PyTorch {torch.__version__} was built without CUDA "
              "or sees no GPU.", file=sys.stderr)
        return 1
    say(f"pycudagraph demo --torch: a PyTorch MLP {' -> '.join(map(str, SIZES))}, "
        f"batch {BATCH}, PyTorch {torch.__version__}, "
        f"allow_tf32={torch.backends.cuda.matmul.allow_tf32}, {iters} iterations per timing")
    model = build_model(torch)
    static_input = torch.randn(BATCH, SIZES[0], device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    stream = pcg.Stream.wrap(side)
    gen = torch.Generator(device="cpu").manual_seed(1)
    with torch.no_grad(), torch.cuda.stream(side):
        say("[1/4] warm-up on a side stream (cuBLAS handles, allocator blocks)...")
        for _ in range(3):
            model(static_input)
        side.synchronize()
        clock = Clock(stream)

        def checked(run_once, output) -> Check:
            """Fresh input, NaN-poisoned output (graphs), replay, compare with float64."""
            result = Check(0.0, 0.0)
            for _ in range(2):
                x = torch.randn(BATCH, SIZES[0], generator=gen)
                static_input.copy_(x.cuda(non_blocking=False))
                if output is not None:
                    output.fill_(float("nan"))
                got = run_once()
                side.synchronize()
                result = result.merge(compare((got if got is not None else output).cpu().numpy(),
                                              reference(model, x.numpy())))
            return result

        say("[2/4] eager PyTorch: model(static_input)...")
        eager = lambda: model(static_input)  # noqa: E731
        rows = [clock.row("eager PyTorch", eager, iters, checked(eager, None))]

        say("[3/4] torch.cuda.graph capture, CUDAGraph.replay()...")
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            torch_graph_out = model(static_input)
        rows.append(clock.row("torch.cuda.graph replay", tg.replay, iters,
                              checked(tg.replay, torch_graph_out)))

        say("[4/4] pcg.capture on pcg.Stream.wrap(side stream), GraphExec.launch()...")
        side.synchronize()
        # PyTorch's allocations inside go to the graph's own pool (cap.pool)
        with pcg.capture(stream, mode="thread_local") as cap:
            pcg_out = model(static_input)
            cap.keep(static_input, model)  # the model keeps its weights
        exe = cap.graph.instantiate(upload_stream=stream)
        launch = lambda: exe.launch(stream)  # noqa: E731
        rows.append(clock.row("pcg.capture + GraphExec.launch", launch, iters,
                              checked(launch, pcg_out)))

        # The graphs against eager on one more input.
        static_input.copy_(torch.randn(BATCH, SIZES[0], generator=gen).cuda())
        eager_out = model(static_input)
        tg.replay()
        exe.launch(stream)
        side.synchronize()
        d_torch = float((torch_graph_out - eager_out).abs().max())
        d_pcg = float((pcg_out - eager_out).abs().max())
        match = all(torch.allclose(o, eager_out, rtol=1e-5, atol=1e-5)
                    for o in (torch_graph_out, pcg_out))

    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_graph.dot").write_text(cap.graph.to_dot("PyTorch MLP captured by pcg"))
    kernels = [n.kernel_name for n in cap.graph.nodes if hasattr(n, "kernel_name")]
    chart = write_chart(out / "torch_demo.png", "a PyTorch MLP: eager vs CUDA graphs",
                        rows)
    say("")
    all_ok = print_table(rows)
    say("")
    base = rows[0].ms
    say(f"=== Comparison: PyTorch MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, "
        f"{iters} iterations ===")
    for r in rows:
        tail = "" if r is rows[0] else f"  ({base / r.ms:.2f}x faster than eager)"
        say(f"{r.name:32s}: {r.ms:.4f} ms/iter{tail}")
    say(headline(gpu_name(), base, rows[2].ms, len(kernels), "iteration"))
    note = verdict(base, rows[2].ms, rows[2].gpu_ms, "iteration")
    if note:
        say(note)
    say(f"max |diff| vs eager: torch.cuda.graph {d_torch:.2e}, pcg.capture {d_pcg:.2e}")
    say("Results match" if match else "Results DIFFER")
    say(f"the pcg-captured graph holds {len(kernels)} kernel nodes: "
        + ", ".join(k[:40] for k in kernels))
    mem, problems = cap.graph.memory(), cap.graph.audit()
    say(f"it points into {mem['allocations']} allocations ({mem['pinned_bytes'] / 2**20:.1f} MiB); "
        f"its private pool holds {mem['graph_pool_bytes'] / 2**20:.1f} MiB; audit: "
        + (f"{len(problems)} problems, the first: {problems[0]}" if problems else "no problems"))
    say(f"wrote {out / 'torch_graph.dot'}; {chart}")
    for r in rows[1:]:
        if r.ms >= base:
            say(f"NOTE: {r.name} took {r.ms / base:.2f}x the eager time on this run")
    return 0 if all_ok and match else 1
