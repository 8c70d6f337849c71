"""Capturing CuPy and PyTorch work into a pycudagraph graph, then editing it.

Any library that launches on a stream handle can be captured: the frameworks are
pointed at a ``pcg.Stream`` (``cupy.cuda.Stream.from_external(stream)``,
``torch.cuda.ExternalStream(stream.ptr)``) inside ``with pcg.capture(stream) as cap:``
(``cudaStreamBeginCapture`` / ``cudaStreamEndCapture``). The capture is memory-safe:
what CuPy and PyTorch allocate inside it (the temporaries ``a + b`` and ``3 * x`` here)
comes from a private pool the graph owns (``cap.pool``), so no array allocated later
gets memory a replay still writes. Rules: run the ops once first (CuPy compiles kernels
on first use), and keep the arrays made outside the capture alive for as long as the
graph (``cap.keep``).

The captured graph is then introspected (``cudaGraphGetNodes``,
``cuGraphKernelNodeGetParams`` + ``cuFuncGetName`` for the kernel names), edited by
adding a pycudagraph kernel node after its leaves (``cudaGraphAddKernelNode``),
instantiated and launched twice with new input (``cudaGraphLaunch``), checked against
numpy. Each framework is skipped when it is not importable or has no GPU; with
neither, the script prints SKIPPED and exits 0 (with no GPU at all it exits 1).
"""

import numpy as np

import pycudagraph as pcg

N = 1 << 12


def finish(label, graph, add_one, target):
    """Print the captured nodes, append add_one(target) after the leaves, instantiate."""
    print(f"  {label} capture:")
    for node in graph.nodes:
        print(f"    {node.type}" + (f" {node.kernel_name}" if node.type == "kernel" else ""))
    leaves = [n for n in graph.nodes if not n.dependents]
    graph.add_kernel(add_one, (N + 255) // 256, 256, (target, N), deps=leaves)
    print(graph.to_dot(name=f"{label} capture + add_one"))
    return graph.instantiate()


def cupy_stream(cp, stream):
    """CuPy's view of a pcg.Stream (Stream.from_external in CuPy 14+)."""
    if hasattr(cp.cuda.Stream, "from_external"):
        return cp.cuda.Stream.from_external(stream)
    return cp.cuda.ExternalStream(stream.ptr)


def with_cupy(cp, add_one, stream):
    cs = cupy_stream(cp, stream)
    with cs:  # made on the capture stream: the work that reads b is ordered after it
        a = cp.empty(N, dtype=cp.float32)
        b = cp.linspace(0.0, 1.0, N, dtype=cp.float32)
        d = cp.empty_like(a)

    def ops():  # d = (a + b) * 2; a + b is a temporary, allocated inside the capture
        cp.multiply(a + b, 2.0, out=d)

    with cs:
        ops()  # warm-up: CuPy compiles its kernels here
    stream.synchronize()
    with pcg.capture(stream, mode="thread_local") as cap:
        with cs:
            ops()
        cap.keep(a, b, d)
    exe = finish("CuPy", cap.graph, add_one, d)
    for seed in (0, 1):
        host_a = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        a.set(host_a, stream=cs)
        exe.launch(stream)
        stream.synchronize()
        want = (host_a + cp.asnumpy(b)) * np.float32(2.0) + np.float32(1.0)
        np.testing.assert_allclose(cp.asnumpy(d), want, rtol=1e-6, atol=1e-6)
    print("  CuPy graph + extra node matches numpy")


def with_torch(torch, add_one, stream):
    ts = torch.cuda.ExternalStream(stream.ptr)
    x = torch.empty(N, device="cuda", dtype=torch.float32)
    z = torch.empty_like(x)

    def ops():  # z = max(3 * x, 0); 3 * x is a temporary, allocated inside the capture
        torch.clamp(x * 3.0, min=0.0, out=z)

    with torch.cuda.stream(ts):
        x.zero_()
        ops()
    stream.synchronize()
    with pcg.capture(stream, mode="thread_local") as cap:
        with torch.cuda.stream(ts):
            ops()
        cap.keep(x, z)
    exe = finish("PyTorch", cap.graph, add_one, z)
    for seed in (2, 3):
        host_x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        with torch.cuda.stream(ts):
            x.copy_(torch.from_numpy(host_x))
        exe.launch(stream)
        stream.synchronize()
        want = np.maximum(host_x * np.float32(3.0), 0) + np.float32(1.0)
        np.testing.assert_allclose(z.cpu().numpy(), want, rtol=1e-6, atol=1e-6)
    print("  PyTorch graph + extra node matches numpy")


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
    add_one = pcg.Module.from_file("helpers.cu")["add_one"]
    stream = pcg.Stream()
    cp, torch = available("cupy"), available("torch")
    if cp is None and torch is None:
        print("SKIPPED: neither CuPy nor PyTorch with CUDA is importable here")
        return
    scratch = pcg.DeviceBuffer(4)
    add_one.launch(1, 1, (scratch, 1), stream=stream)  # warm-up: load the module
    stream.synchronize()
    for name, lib, fn in (("CuPy", cp, with_cupy), ("PyTorch", torch, with_torch)):
        if lib is None:
            print(f"{name}: not available, skipped")
        else:
            print(f"{name} {lib.__version__}:")
            fn(lib, add_one, stream)
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
