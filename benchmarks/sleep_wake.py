"""``python -m benchmarks.sleep_wake``: giving back the memory of 10 bucket graphs of a
GPT-2-sized model and getting it back, against recapturing them.

The model is transformers' ``GPT2LMHeadModel`` built from a ``GPT2Config`` (12 layers, 768
wide, 12 heads; random weights, nothing downloaded), ``use_cache=False``, batch 1; without
transformers, a GPT-2-sized stand-in of the same shape built here. One graph per bucket of
sequence lengths (16, 32, ... 160), all captured into one sleepable pool
(``pcg.CapturePool(sleepable=True)``), after the eager warm-up every capture needs.

Timed, in one run on one GPU (wall time, each step ending with the device idle):

- recapture: capture and instantiate the 10 graphs again into a new pool (what a server
  without sleepable memory does after giving the memory back);
- sleep: ``pool.sleep(keep=False)`` (the activations are scratch the next replay rewrites);
- wake: ``pool.wake()``; then one replay of each graph, checked equal to before the sleep.

The first sleep and wake also find the execs to block; the steady figure is the median of
the next 5. Prints the GPU, the versions, the memory the sleep gave back (cudaMemGetInfo),
each time and the ratio recapture / (sleep + wake). Exits 0 without PyTorch or a GPU,
saying so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

BUCKETS = tuple(range(16, 161, 16))


def _gpt2(torch):
    """The model and a name for it: transformers' GPT-2 (random weights) or a stand-in."""
    try:
        import transformers
        config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024)
        model = transformers.GPT2LMHeadModel(config)
        return (lambda ids: model(ids, use_cache=False).logits), model, \
            f"transformers {transformers.__version__} GPT2LMHeadModel (random weights)"
    except ImportError:
        pass
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(768), nn.LayerNorm(768)
            self.qkv, self.proj = nn.Linear(768, 3 * 768), nn.Linear(768, 768)
            self.mlp = nn.Sequential(nn.Linear(768, 3072), nn.GELU(), nn.Linear(3072, 768))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, 12, 64).permute(2, 0, 3, 1, 4)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, 768))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(50257, 768), nn.Embedding(1024, 768)
            self.blocks = nn.Sequential(*[Block() for _ in range(12)])
            self.ln, self.head = nn.LayerNorm(768), nn.Linear(768, 50257, bias=False)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            return self.head(self.ln(self.blocks(self.wte(ids) + self.wpe(pos))))

    model = GPT()
    return model, model, "GPT-2-sized stand-in (transformers not installed)"


def _versions(torch, pcg) -> str:
    from pycudagraph._cuda import versions
    dev = torch.cuda.get_device_name()
    driver = versions.format_version(versions.driver_version())
    return (f"GPU {dev}; PyTorch {torch.__version__}; cuda-bindings "
            f"{versions.BINDINGS_VERSION}; driver {driver}; pycudagraph {pcg.__version__}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=5, help="steady sleep/wake cycles (5)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("sleep_wake: PyTorch is not installed; nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("sleep_wake: no CUDA GPU; nothing to measure")
        return 0
    import pycudagraph as pcg
    from pycudagraph._cuda import vmm
    if not vmm.available():
        print(f"sleep_wake: {vmm.why_not()}; build it (python setup.py build_ext --inplace)")
        return 1
    fn, model, name = _gpt2(torch)
    model.cuda().eval()
    torch.manual_seed(0)
    side = torch.cuda.Stream()
    stream = pcg.Stream.wrap(side)
    inputs = {n: torch.randint(0, 50257, (1, n), device="cuda") for n in BUCKETS}
    with torch.no_grad():  # eager warm-up on both streams, as every capture needs
        for ids in inputs.values():
            fn(ids)
            with torch.cuda.stream(side):
                fn(ids)
    torch.cuda.synchronize()

    def capture_all():
        pool = pcg.CapturePool(sleepable=True)
        out = {}
        with torch.no_grad(), torch.cuda.stream(side):
            for n, ids in inputs.items():
                with pcg.capture(stream, mode="thread_local", pool=pool) as cap:
                    logits = fn(ids)
                out[n] = (cap.graph.instantiate(), logits)
        side.synchronize()
        return pool, out

    def replay_all(graphs):
        for exe, _ in graphs.values():
            exe.launch(stream)
        stream.synchronize()

    def timed(step) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    pool, graphs = capture_all()  # the first capture also loads kernels: not timed
    replay_all(graphs)
    before = {n: logits.clone() for n, (_exe, logits) in graphs.items()}
    held = pool.mapped_bytes
    kept: list = []
    recapture_s = timed(lambda: kept.append(capture_all()))
    kept.clear()  # the recaptured graphs and their pool go (not timed)
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    first_sleep = timed(lambda: pool.sleep(keep=False))
    freed = torch.cuda.mem_get_info()[0] - free0
    first_wake = timed(pool.wake)
    replay_all(graphs)
    same = all(torch.equal(graphs[n][1], before[n]) for n in BUCKETS)
    sleeps, wakes = [], []
    for _ in range(max(1, args.cycles)):
        sleeps.append(timed(lambda: pool.sleep(keep=False)))
        wakes.append(timed(pool.wake))
        replay_all(graphs)
        same = same and all(torch.equal(graphs[n][1], before[n]) for n in BUCKETS)
    sleep_s, wake_s = statistics.median(sleeps), statistics.median(wakes)
    print(_versions(torch, pcg))
    print(f"model: {name}; {len(BUCKETS)} bucket graphs (batch 1, lengths "
          f"{BUCKETS[0]}..{BUCKETS[-1]}); pool {held / 2**20:.1f} MiB in "
          f"{len(vmm.allocations(None))} allocations")
    print(f"sleep gave back {freed / 2**20:.1f} MiB of device memory (cudaMemGetInfo)")
    print(f"recapture 10 graphs (capture + instantiate): {recapture_s * 1e3:9.2f} ms")
    print(f"first sleep / wake:                        {first_sleep * 1e3:9.2f} / "
          f"{first_wake * 1e3:.2f} ms")
    print(f"steady sleep / wake (median of {len(sleeps)}):        {sleep_s * 1e3:9.2f} / "
          f"{wake_s * 1e3:.2f} ms")
    print(f"replays after wake equal to before: {same}")
    ratio = recapture_s / (sleep_s + wake_s)
    print(f"recapture / (sleep + wake) = {ratio:.1f}x (steady); "
          f"{recapture_s / (first_sleep + first_wake):.1f}x (first); "
          f"recapture / wake = {recapture_s / wake_s:.1f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
