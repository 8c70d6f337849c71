"""Rebind the static input of a PyTorch CUDA graph to another tensor, without copying.

``torch.cuda.graph`` bakes the address of its static input into the captured kernels;
PyTorch users then copy each new input into that tensor, or recapture. pycudagraph adopts
PyTorch's graph and exec (``Graph.wrap`` / ``GraphExec.wrap``, owned by the
``torch.cuda.CUDAGraph``) and ``exe.rebind(static_in, other)`` patches every kernel
argument slot holding the static input's address (inside the by-value structs of cuBLAS
and PyTorch's elementwise kernels too) through ``cuGraphExecKernelNodeSetParams``. The
replay then reads ``other``; the result is checked against eager PyTorch.
"""

import pycudagraph as pcg


def main():
    pcg.Stream().close()  # no GPU: CudaNotAvailableError, one sentence
    try:
        import torch
    except ImportError:
        print("SKIPPED: PyTorch is not installed")
        print("OK")
        return
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 64)).cuda().eval()
    static_in = torch.randn(32, 256, device="cuda")

    side = torch.cuda.Stream()  # warm-up on a side stream, as torch.cuda.graph wants
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)

    tg = torch.cuda.CUDAGraph(keep_graph=True)  # keep the cudaGraph_t for introspection
    with torch.no_grad(), torch.cuda.graph(tg):
        static_out = model(static_in)
    tg.instantiate()

    graph = pcg.Graph.wrap(tg.raw_cuda_graph(), owner=tg)
    exe = pcg.GraphExec.wrap(tg.raw_cuda_graph_exec(), owner=tg, graph=graph)
    print(f"captured {len(graph)} nodes: "
          + ", ".join(n.kernel_name for n in graph.nodes if n.type == "kernel"))

    stream = torch.cuda.current_stream().cuda_stream
    for step in range(3):
        other = torch.randn(32, 256, device="cuda")
        patched = exe.rebind(static_in, other)
        exe.launch(stream)
        torch.cuda.synchronize()
        with torch.no_grad():
            expected = model(other)
        err = float((static_out - expected).abs().max())
        print(f"step {step}: rebound {patched} argument slot(s); max |graph - eager| = {err:.2e}")
        torch.testing.assert_close(static_out, expected)
        exe.rebind(other, static_in)  # back, so the next step rebinds from the static input
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
