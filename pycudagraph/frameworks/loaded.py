"""The array frameworks the program has imported, found without importing them.

pycudagraph never imports PyTorch or CuPy: a framework takes part in a capture, a graphed
call or an audit only when ``sys.modules`` already holds it (the user imported it). The
functions here answer that question, and reach a framework's private functions by name,
so that a version that lacks one is told apart from a version that has it.
"""

from __future__ import annotations

import sys

__all__ = ["torch", "cupy", "torch_cuda_ready", "torch_private", "drop_torch_workspaces"]


def torch():
    """The ``torch`` module when the program imported it (and it has ``torch.cuda``), else
    None. No CUDA call."""
    mod = sys.modules.get("torch")
    return mod if mod is not None and hasattr(mod, "cuda") else None


def cupy():
    """The ``cupy`` module when the program imported it, else None. No CUDA call."""
    mod = sys.modules.get("cupy")
    return mod if mod is not None and hasattr(mod, "cuda") else None


def torch_cuda_ready(mod) -> bool:
    """Whether PyTorch's CUDA state is initialized (its caching allocator exists): only
    then may its allocator be routed to a pool. No CUDA call."""
    try:
        return bool(mod.cuda.is_initialized())
    except Exception:  # a CPU-only build, or a broken install: PyTorch takes no part
        return False


def torch_private(*names: str):
    """The first of ``names`` that ``torch._C`` has (private allocator entry points change
    names between releases), or None. No CUDA call."""
    c = sys.modules.get("torch._C")
    for name in names:
        fn = getattr(c, name, None) if c is not None else None
        if fn is not None:
            return fn
    return None


def drop_torch_workspaces() -> None:
    """Have PyTorch forget its cuBLAS and cuBLASLt workspaces (``torch._C.
    _cuda_clearCublasWorkspaces``; the next matrix product on a stream allocates one anew),
    as ``torch.compile``'s CUDA graphs do around each recording. A capture calls it before
    it begins, so the workspace its matrix products use is allocated inside the capture,
    from the capture's pool, and after it ends, so that no eager work goes on using that
    workspace. A graph that used a workspace from before its capture breaks when anyone
    clears them (``torch.compile`` does) and the memory goes back to the driver. Nothing
    when PyTorch is not imported, its CUDA state not initialized, or the entry point
    missing. No CUDA call of pycudagraph's own."""
    mod = torch()
    if mod is None or not torch_cuda_ready(mod):
        return
    clear = torch_private("_cuda_clearCublasWorkspaces")
    if clear is not None:
        clear()
