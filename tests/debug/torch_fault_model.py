"""A small PyTorch MLP captured with ``pcg.capture``, and the resolver that ``find_fault``'s
child process imports for PyTorch's kernels: one probe capture of the same operations on
scratch tensors (the recipe of docs/graph_files.md), made at the first call.

Imported by tests/debug/test_find_fault_gpu.py (in a child process of its own) and by the
child processes of ``pcg.find_fault``; nothing runs at import.
"""

from __future__ import annotations

B, D, H = 8, 64, 128

_side = None
_table: dict = {}


def side_stream():
    import torch
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    return _side


def tensors(seed: int = 0) -> dict:
    """Inputs, weights, the column index of the selection, and every intermediate."""
    import torch
    gen = torch.Generator(device="cuda").manual_seed(seed)
    t = {"x": torch.randn(B, D, device="cuda", generator=gen),
         "w1": torch.randn(H, D, device="cuda", generator=gen) * 0.1,
         "b1": torch.randn(H, device="cuda", generator=gen) * 0.1,
         "w2": torch.randn(D, H // 2, device="cuda", generator=gen) * 0.1,
         "idx": torch.arange(0, H, 2, device="cuda"),
         "h": torch.empty(B, H, device="cuda"), "sel": torch.empty(B, H // 2, device="cuda"),
         "y": torch.empty(B, D, device="cuda")}
    torch.cuda.synchronize()
    return t


def forward(t: dict) -> None:
    """Linear, ReLU, a selection of hidden columns by index, Linear: all into ``t``."""
    import torch
    torch.addmm(t["b1"], t["x"], t["w1"].t(), out=t["h"])
    torch.relu_(t["h"])
    torch.index_select(t["h"], 1, t["idx"], out=t["sel"])
    torch.mm(t["sel"], t["w2"].t(), out=t["y"])


def captured(t: dict):
    """``forward`` captured on a side stream (after eager runs there: PyTorch loads its
    kernels and makes that stream's cuBLAS workspace)."""
    import torch
    import pycudagraph as pcg
    side = side_stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(2):
            forward(t)
        side.synchronize()
        with pcg.capture(pcg.Stream.wrap(side), mode="thread_local") as cap:
            forward(t)
    torch.cuda.synchronize()
    return cap.graph


def resolve(name: str):
    """The function of PyTorch's kernel ``name``: the kernel nodes of one probe capture of
    ``forward`` on scratch tensors (made once per process)."""
    if not _table:
        probe = captured(tensors(seed=1))
        _table.update({n.mangled_name: n.function for n in probe.nodes if n.type == "kernel"})
        _table["probe"] = probe  # keeps the probe's kernels loaded
    return _table[name]
