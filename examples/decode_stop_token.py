"""A PyTorch decode loop that stops itself on the GPU at the stop token: one graph launch.

A generation loop usually runs on the host: run one decode step, read the new token back
(``.item()``: a host sync), stop at the stop token. Here the decode step, written in plain
PyTorch (embedding lookup, matmul, position bias, argmax, append), is captured once inside
``with cap.while_(go):``. ``go`` (a one-element bool tensor: the new token is not the stop
token and the step limit is not reached) is updated by the step itself; pycudagraph adds the
kernel that reads it before the loop and after each pass (``cudaGraphSetConditional``), so
the whole generation is one ``cudaGraphLaunch`` with no host sync per token.

For several start tokens the graph and the host loop must decode the same tokens in the same
number of steps; printed: the steps, the host loop's time and the graph's.
"""

import time

import pycudagraph as pcg

V, D = 64, 32  # vocabulary, embedding width
MAX_STEPS = 48
STOP = 0
STARTS = (1, 5, 17, 33, 60)


def make_model(torch):
    """A toy decoder's weights and its state buffers (all on the GPU, made once)."""
    gen = torch.Generator().manual_seed(7)
    bias = torch.randn(MAX_STEPS + 1, V, generator=gen)
    bias[:, STOP] += torch.linspace(-3.0, 3.0, MAX_STEPS + 1)  # the stop token grows likelier
    cuda = dict(device="cuda")
    longs = dict(dtype=torch.int64, device="cuda")
    m = {"E": torch.randn(V, D, generator=gen).to(**cuda),
         "W": (0.5 * torch.randn(D, V, generator=gen)).to(**cuda), "B": bias.to(**cuda),
         "tokens": torch.zeros(MAX_STEPS + 1, **longs), "pos": torch.zeros(1, **longs),
         "cur": torch.zeros(1, **longs), "nxt": torch.zeros(1, **longs),
         "e": torch.empty(1, D, **cuda), "logits": torch.empty(1, V, **cuda),
         "bias": torch.empty(1, V, **cuda),
         "go": torch.ones(1, dtype=torch.bool, device="cuda"),
         "more": torch.ones(1, dtype=torch.bool, device="cuda")}
    torch.cuda.synchronize()  # made on PyTorch's stream; the decode runs on another
    return m


def step(torch, m) -> None:
    """One decode step, nothing allocated: tokens[pos + 1] = argmax(E[tokens[pos]] @ W + B[pos])."""
    torch.index_select(m["tokens"], 0, m["pos"], out=m["cur"])
    torch.index_select(m["E"], 0, m["cur"], out=m["e"])
    torch.mm(m["e"], m["W"], out=m["logits"])
    torch.index_select(m["B"], 0, m["pos"], out=m["bias"])
    m["logits"].add_(m["bias"])
    torch.argmax(m["logits"], dim=1, out=m["nxt"])
    m["pos"].add_(1)
    m["tokens"].index_copy_(0, m["pos"], m["nxt"])
    torch.ne(m["nxt"], STOP, out=m["go"])  # go on while the token is not the stop token
    torch.lt(m["pos"], MAX_STEPS, out=m["more"])
    m["go"].logical_and_(m["more"])  # ... and the step limit is not reached


def reset(m, start: int) -> None:
    m["tokens"].zero_()
    m["tokens"][0].fill_(start)
    m["pos"].zero_()
    m["go"].fill_(True)


def result(m) -> tuple[list, int]:
    steps = int(m["pos"].item())
    return m["tokens"][: steps + 1].tolist(), steps


def main():
    pcg.Stream().close()  # no GPU: CudaNotAvailableError, one sentence
    try:
        import torch
    except ImportError:
        print("SKIPPED: PyTorch is not installed")
        print("OK")
        return
    if not torch.cuda.is_available():
        print("SKIPPED: PyTorch sees no GPU")
        print("OK")
        return
    m = make_model(torch)
    stream = pcg.Stream()
    ts = torch.cuda.ExternalStream(stream.ptr)

    def host_loop(start):
        with torch.cuda.stream(ts):
            reset(m, start)
            while True:
                step(torch, m)
                if not bool(m["go"].item()):  # the host sync of every step
                    break
        return result(m)

    host_loop(STARTS[0])  # warm-up: cuBLAS workspace, kernels; nothing is allocated later
    stream.synchronize()
    with pcg.capture(stream, mode="thread_local") as cap:
        with torch.cuda.stream(ts):
            decode = cap.while_(m["go"])
            with decode:
                step(torch, m)
        cap.keep(*m.values())
    loop = decode.node  # the WhileNode the capture added (its body holds the step)
    print(f"captured: {len(cap.graph)} nodes, the loop body {len(loop.body)} "
          f"({', '.join(n.kernel_name.split('::')[-1] for n in loop.body.nodes if n.type == 'kernel')})")
    exe = cap.graph.instantiate(upload_stream=stream)

    def graph_loop(start):
        with torch.cuda.stream(ts):
            reset(m, start)
        exe.launch(stream)  # the whole generation: one launch
        stream.synchronize()
        return result(m)

    stopped = 0
    for start in STARTS:
        times = {}
        for name, fn in (("host", host_loop), ("graph", graph_loop)):
            best = None
            for _ in range(3):
                t0 = time.perf_counter()
                out = fn(start)
                dt = time.perf_counter() - t0
                best = dt if best is None or dt < best else best
            times[name] = (best, out)
        (host_t, (host_tokens, host_steps)), (graph_t, (tokens, steps)) = times["host"], times["graph"]
        why = "stop token" if tokens[-1] == STOP else "max steps"
        print(f"start {start:2d}: {steps:2d} steps ({why}); host loop {host_t * 1e3:6.2f} ms, "
              f"one graph launch {graph_t * 1e3:6.2f} ms; tokens {tokens[:6]}"
              f"{' ...' if len(tokens) > 6 else ''}")
        assert tokens == host_tokens and steps == host_steps, (start, tokens, host_tokens)
        stopped += tokens[-1] == STOP and steps < MAX_STEPS
    assert stopped, "no start stopped on the stop token"
    print(f"{stopped} of {len(STARTS)} starts stopped on the stop token; graph and host loop agree")
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
