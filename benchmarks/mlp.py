"""The demo MLP: 512 -> 1024 -> 1024 -> 512, ReLU after the first two layers, batch 32,
float32, with ``kernels/mlp.cu``'s ``linear_splitk`` through the demo's
``pycudagraph.cli.demo_mlp.MLP`` (pycudagraph; the naive ``linear_bias_relu`` is timed
too and shown in the note) or an ``nn.Sequential`` of the same shape (PyTorch).

Per iteration, in microseconds:

* eager - wall time of N back-to-back iterations (3 kernel launches each for
  pycudagraph, ``model(x)`` for PyTorch), synchronized at the end, over N;
* graph - the same with one graph launch per iteration (pycudagraph: a graph built node
  by node with ``add_kernel``; PyTorch: ``torch.cuda.CUDAGraph`` capture of ``model(x)``);
* GPU-only - CUDA events around 20 graph launches queued behind a short spin kernel
  (so the GPU never waits for the CPU), over 20: the time the GPU needs per iteration.
"""

from __future__ import annotations

import numpy as np

from .common import median, now, ok
from .timing import gc_paused, gpu_time_per_launch

BATCH, SIZES = 32, (512, 1024, 1024, 512)


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    layers = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        w = (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
        b = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
        layers.append((w, b))
    return x, layers


def reference(x, layers) -> np.ndarray:
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(layers):
        h = h @ w.astype(np.float64) + b.astype(np.float64)
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def _rel_err(out, ref) -> float:
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def _wall_per_iter(step, sync, iters: int, repeats: int) -> float:
    out = []
    with gc_paused():
        for _ in range(repeats):
            sync()
            t0 = now()
            for _ in range(iters):
                step()
            sync()
            out.append((now() - t0) * 1e-3 / iters)
    return median(out)


def _cells(eager_us, graph_us, gpu_us, note):
    return {"mlp_eager_iter": ok(eager_us, note),
            "mlp_graph_iter": ok(graph_us, note),
            "mlp_gpu_iter": ok(gpu_us, "events around 20 graph launches behind a spin, / 20"),
            "mlp_graph_over_gpu": ok(graph_us / gpu_us, "graph replay per iteration / GPU-only")}


def _pcg_exe(mlp, stream, ref, x_host):
    """Build and instantiate ``mlp``'s graph and check both paths on ``x_host``."""
    out = mlp.acts[-1]
    poison = np.full((BATCH, SIZES[-1]), np.nan, dtype=np.float32)

    def result() -> np.ndarray:
        stream.synchronize()
        return out.to_numpy(np.float32, (BATCH, SIZES[-1]))

    mlp.x.copy_from(x_host, stream=stream)
    out.copy_from(poison, stream=stream)
    mlp.forward(stream)
    err_eager = _rel_err(result(), ref)
    g, _ = mlp.build_graph()
    exe = g.instantiate()
    exe.upload(stream)
    out.copy_from(poison, stream=stream)
    exe.launch(stream)
    err_graph = _rel_err(result(), ref)
    if not (err_eager < 1e-5 and err_graph < 1e-5):
        raise RuntimeError(f"MLP ({mlp.kind} kernels) output is wrong: relative error eager "
                           f"{err_eager:.2e}, graph {err_graph:.2e} (float64 reference)")
    return exe, max(err_eager, err_graph)


def pcg_mlp(env, settings) -> dict:
    from pycudagraph.cli.demo_mlp import MLP
    import pycudagraph as pcg
    s = settings
    stream = pcg.Stream()
    x, layers = make_data()
    ref = reference(x, layers)
    weights = ([w for w, _ in layers], [b for _, b in layers])
    mlp = MLP(BATCH, "fast", weights=weights, stream=stream)
    naive = MLP(BATCH, "naive", weights=weights, stream=stream)
    exe, err = _pcg_exe(mlp, stream, ref, x)
    naive_exe, naive_err = _pcg_exe(naive, stream, ref, x)

    def eager_step():
        mlp.forward(stream)

    for _ in range(20):
        eager_step()
        exe.launch(stream)
    eager_us = _wall_per_iter(eager_step, stream.synchronize, s.mlp_iters, s.mlp_repeats)
    graph_us = _wall_per_iter(lambda: exe.launch(stream), stream.synchronize, s.mlp_iters,
                              s.mlp_repeats)
    gpu_us = gpu_time_per_launch(env, exe.launch, (stream,), stream.ptr, 20, max(5, s.mlp_repeats))
    naive_us = gpu_time_per_launch(env, naive_exe.launch, (stream,), stream.ptr, 20,
                                   max(5, s.mlp_repeats))
    stream.synchronize()
    note = (f"linear_splitk, {mlp.blocks} blocks/layer; checked vs float64: rel err {err:.1e} "
            f"(naive linear_bias_relu: {naive_us:.1f} us GPU, rel err {naive_err:.1e})")
    return _cells(eager_us, graph_us, gpu_us, note)


def torch_mlp(env, settings) -> dict:
    import torch
    s = settings
    x_np, layers = make_data()
    model = torch.nn.Sequential(
        torch.nn.Linear(SIZES[0], SIZES[1]), torch.nn.ReLU(),
        torch.nn.Linear(SIZES[1], SIZES[2]), torch.nn.ReLU(),
        torch.nn.Linear(SIZES[2], SIZES[3])).cuda().eval()
    with torch.no_grad():
        for lin, (w, b) in zip((m for m in model if isinstance(m, torch.nn.Linear)), layers):
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b))
    x = torch.from_numpy(x_np).cuda()
    stream = torch.cuda.Stream()
    s_int = int(stream.cuda_stream)
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(5):
            y = model(x)
        stream.synchronize()
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        y = model(x)
        g.capture_end()
        g.replay()
        stream.synchronize()
        err = _rel_err(y.double().cpu().numpy(), reference(x_np, layers))
        for _ in range(20):
            model(x)
            g.replay()
        eager_us = _wall_per_iter(lambda: model(x), stream.synchronize, s.mlp_iters, s.mlp_repeats)
        graph_us = _wall_per_iter(g.replay, stream.synchronize, s.mlp_iters, s.mlp_repeats)
        gpu_us = gpu_time_per_launch(env, g.replay, (), s_int, 20, max(5, s.mlp_repeats))
    stream.synchronize()
    tf32 = torch.backends.cuda.matmul.allow_tf32
    return _cells(eager_us, graph_us, gpu_us,
                  f"nn.Sequential, rel err {err:.1e} vs float64, allow_tf32={tf32}")


# ----------------------------------------------------------------------------------
# ``python -m benchmarks.mlp``: check linear_splitk on many shapes and sweep its split.


def sweep(rotate: int = 8) -> int:
    import pycudagraph as pcg
    from pycudagraph.cli.demo_common import Clock
    from pycudagraph.cli.demo_mlp import MLP, allowed_splits, check_shapes, choose_splits
    stream = pcg.Stream()
    clock = Clock(stream)
    ok_all = True
    for name, check in check_shapes(stream):
        ok_all &= check.ok
        print(f"check {name}: max rel err {check.rel:.1e} {'ok' if check.ok else 'MISMATCH'}",
              flush=True)

    def gpu_us(launch, n=50):
        return clock.gpu_ms(launch, n, enqueue_ms=0.05 * n)[0] * 1e3

    variants = {"8 warps": (8, ()), "8 warps, no prefetch": (8, ("-DSPLITK_PREFETCH=0",)),
                "4 warps": (4, ())}
    for label, (warps, options) in variants.items():  # each layer alone, every allowed split
        mlp = MLP(BATCH, "fast", warps=warps, options=options, stream=stream)
        for i in range(3):
            fan_in, fan_out = SIZES[i], SIZES[i + 1]
            line = []
            for s in allowed_splits(fan_in, warps):
                m = MLP(BATCH, "fast", weights=(mlp.ws, mlp.bs), warps=warps, options=options,
                        splits=[s if j == i else allowed_splits(SIZES[j], warps)[0]
                                for j in range(3)], stream=stream)
                g = pcg.Graph()
                g.add_kernel(m.kernel, m.grids[i], m.block, m.layer_args(i))
                exe = g.instantiate()
                line.append(f"s={s}:{gpu_us(lambda: exe.launch(stream)):6.2f}")
            print(f"layer {i} ({fan_in}->{fan_out}) {label}: us " + "  ".join(line), flush=True)
    for label, (warps, options) in variants.items():  # the whole model per target_blocks
        for target in (64, 128, 256, 512, 1024):
            m = MLP(BATCH, "fast", warps=warps, options=options, target_blocks=target,
                    stream=stream)
            exe = m.build_graph()[0].instantiate()
            print(f"model {label}, target {target:4d}, blocks {m.blocks}: "
                  f"{gpu_us(lambda: exe.launch(stream)):6.2f} us/iter", flush=True)
    # weights from HBM instead of L2: `rotate` copies of the model (8 MB each) in turn
    models = [MLP(BATCH, "fast", seed=r, stream=stream) for r in range(rotate)]
    exes = [m.build_graph()[0].instantiate() for m in models]
    for naive in (False, True):
        if naive:
            models = [MLP(BATCH, "naive", seed=r, stream=stream) for r in range(rotate)]
            exes = [m.build_graph()[0].instantiate() for m in models]
        state = {"i": 0}

        def rotating():
            exes[state["i"] % rotate].launch(stream)
            state["i"] += 1
        print(f"{'naive' if naive else 'fast'} kernels, {rotate} weight sets in turn "
              f"({rotate * 8} MB): {gpu_us(rotating, 8 * rotate):6.2f} us/iter; one set: "
              f"{gpu_us(lambda: exes[0].launch(stream)):6.2f} us/iter", flush=True)
    print(f"choose_splits for the demo layers: "
          f"{[choose_splits(a, b, BATCH) for a, b in zip(SIZES[:-1], SIZES[1:])]}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(sweep())
