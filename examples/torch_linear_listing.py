"""List the nodes of a captured ``torch.nn.Linear``: the GEMM kernel, then the epilogue.

``torch.cuda.graph`` captures the layer's forward into a CUDA graph; ``Graph.wrap``
adopts that graph (PyTorch keeps owning it) and ``print(graph)`` lists every node in
topological order: position, type, local ID (``cudaGraphNodeGetLocalId`` on CUDA 13.1+,
``-`` before), node handle, kernel name with ``<<<grid, block, shared_mem>>>``, the
function handle, and the positions of its dependencies.
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
    layer = torch.nn.Linear(1024, 4096).cuda()
    x = torch.randn(64, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        layer(x)  # warm-up: cuBLAS picks its kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)

    tg = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.no_grad(), torch.cuda.graph(tg):
        y = layer(x)
    graph = pcg.Graph.wrap(tg.raw_cuda_graph(), owner=tg)
    print(graph)
    kernels = [n for n in graph.nodes if n.type == "kernel"]
    assert kernels, "the captured Linear has no kernel node"
    tg.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        torch.testing.assert_close(y, layer(x))
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
