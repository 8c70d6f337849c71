"""The demo MLP: 512 -> 1024 -> 1024 -> 512, ReLU after the first two layers, batch 32,
float32, with ``kernels/mlp.cu``'s ``linear_bias_relu`` (pycudagraph) or an
``nn.Sequential`` of the same shape (PyTorch).

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

from .common import MLP_CU, median, now, ok
from .timing import gc_paused, gpu_time_per_launch

BATCH, SIZES = 32, (512, 1024, 1024, 512)
BLOCK = (16, 16)


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


def pcg_mlp(env, settings) -> dict:
    import pycudagraph as pcg
    s = settings
    kern = pcg.Module.from_file(MLP_CU)["linear_bias_relu"]
    stream = pcg.Stream()
    x, layers = make_data()
    ref = reference(x, layers)
    bufs = [pcg.DeviceBuffer.from_array(x)]
    weights = []
    for w, b in layers:
        weights.append((pcg.DeviceBuffer.from_array(w), pcg.DeviceBuffer.from_array(b)))
        bufs.append(pcg.DeviceBuffer(BATCH * w.shape[1] * 4))
    launches = []
    for i, ((wb, bb), (w, _)) in enumerate(zip(weights, layers)):
        fan_in, fan_out = w.shape
        grid = ((fan_out + BLOCK[0] - 1) // BLOCK[0], (BATCH + BLOCK[1] - 1) // BLOCK[1])
        relu = 1 if i < len(layers) - 1 else 0
        launches.append((grid, (bufs[i], wb, bb, bufs[i + 1], BATCH, fan_in, fan_out, relu)))
    env.rt.cudaDeviceSynchronize()  # the uploads above used pageable cudaMemcpy
    out = bufs[-1]
    poison = np.full((BATCH, SIZES[-1]), np.nan, dtype=np.float32)

    def eager_step():
        for grid, args in launches:
            kern.launch(grid, BLOCK, args, stream=stream)

    def result() -> np.ndarray:
        stream.synchronize()
        return out.to_numpy(np.float32, (BATCH, SIZES[-1]))

    out.copy_from(poison, stream=stream)
    eager_step()
    err_eager = _rel_err(result(), ref)

    g = pcg.Graph()
    prev = None
    for grid, args in launches:
        prev = g.add_kernel(kern, grid, BLOCK, args, deps=(prev,) if prev is not None else ())
    exe = g.instantiate()
    exe.upload(stream)
    out.copy_from(poison, stream=stream)
    exe.launch(stream)
    err_graph = _rel_err(result(), ref)
    if not (err_eager < 1e-4 and err_graph < 1e-4):
        raise RuntimeError(f"MLP output is wrong: relative error eager {err_eager:.2e}, "
                           f"graph {err_graph:.2e} (float64 reference)")

    for _ in range(20):
        eager_step()
        exe.launch(stream)
    eager_us = _wall_per_iter(eager_step, stream.synchronize, s.mlp_iters, s.mlp_repeats)
    graph_us = _wall_per_iter(lambda: exe.launch(stream), stream.synchronize, s.mlp_iters,
                              s.mlp_repeats)
    gpu_us = gpu_time_per_launch(env, exe.launch, (stream,), stream.ptr, 20, max(5, s.mlp_repeats))
    stream.synchronize()
    note = f"checked vs float64: rel err {max(err_eager, err_graph):.1e}"
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
