"""Graphed calls of PyTorch and CuPy functions that rebind instead of copy, and an audit.

``f = pcg.graphed(fn)`` captures ``fn`` once per input key (shapes, strides, dtypes,
alignment, other arguments) on a side stream, memory-safe (a private pool), and every
later call moves the graph to the new inputs' addresses - exact or a slice of a bigger
array - with ``cuGraphExecKernelNodeSetParams`` and launches it (``cudaGraphLaunch``):
no copy into static inputs, no recapture. The outputs are the graph's static outputs,
overwritten by the next call. ``f.graphs`` and ``f.stats`` say what happened; ``g.audit()``
lists the addresses a graph bakes in that nothing keeps alive. Each framework is skipped
when it is not importable; with neither the script prints SKIPPED and exits 0.
"""

import pycudagraph as pcg


def with_torch(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 256)).cuda().eval()
    f = pcg.graphed(model)
    big = torch.randn(64, 256, device="cuda")
    for i in range(20):  # fresh tensors and row slices of one big tensor
        x = big[i: i + 32] if i % 2 else torch.randn(32, 256, device="cuda")
        y = f(x)
        with torch.no_grad():
            torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)
    entry, = f.graphs.values()
    print(f"  PyTorch: {f.stats.calls} calls, {f.stats.captures} capture, "
          f"{f.stats.set_params} set-params calls; the input sits in {entry.plan.slots[0]} "
          f"argument slots of {len(entry.graph.nodes)} nodes; pool "
          f"{entry.graph.memory()['graph_pool_bytes'] / 2**20:.1f} MiB")


def with_cupy(cp):
    def g(x):
        return cp.tanh(x) * 2 + x.mean()

    f = pcg.graphed(g)
    for _ in range(20):
        x = cp.random.rand(1 << 16, dtype=cp.float32)
        cp.testing.assert_allclose(f(x), g(x), rtol=1e-5, atol=1e-5)
    print(f"  CuPy: {f.stats.calls} calls, {f.stats.captures} capture, "
          f"{f.stats.set_params} set-params calls")
    stream = pcg.Stream()
    cs = cp.cuda.Stream.from_external(stream) if hasattr(cp.cuda.Stream, "from_external") \
        else cp.cuda.ExternalStream(stream.ptr)
    with cs:  # made on the stream that reads it
        x = cp.ones(1 << 16, dtype=cp.float32)
        g(x)
    with pcg.capture(stream, mode="thread_local") as cap:
        with cs:
            g(x)  # x is not kept by the graph
    mine = [p for p in cap.graph.audit() if p.address == x.data.ptr]
    print(f"  audit of a capture that does not keep its input: {mine[0]}")
    assert mine[0].problem == "not kept alive"


def available(name):
    """The framework module when it is importable and sees a GPU, else None."""
    try:
        if name == "cupy":
            import cupy
            return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:  # not installed, or no usable CUDA for it
        return None


def main():
    pcg.Stream().close()  # raises CudaNotAvailableError without a GPU
    cp, torch = available("cupy"), available("torch")
    if cp is None and torch is None:
        print("SKIPPED: neither CuPy nor PyTorch with CUDA is importable here")
        return
    for name, lib, fn in (("PyTorch", torch, with_torch), ("CuPy", cp, with_cupy)):
        if lib is None:
            print(f"{name}: not available, skipped")
        else:
            fn(lib)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
