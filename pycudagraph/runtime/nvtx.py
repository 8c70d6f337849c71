"""NVTX ranges around capture, instantiate, upload and launch, for Nsight Systems.

Enabled by ``PYCUDAGRAPH_NVTX=1``: :func:`install` then wraps those methods once, at
import, with ranges from the ``nvtx`` package, or CuPy's or PyTorch's NVTX bindings when
that package is missing. When it is off nothing is wrapped, so the
hot paths cost nothing extra.
"""

from __future__ import annotations

import functools
import os
import warnings
import weakref

__all__ = ["install", "enabled", "wrapped"]

#: The methods :func:`install` wrapped (so a second install wraps nothing twice).
_WRAPPED: "weakref.WeakSet" = weakref.WeakSet()

_RANGES = (("graph.exec", "GraphExec", "launch", "cudaGraphLaunch"),
           ("graph.exec", "GraphExec", "upload", "cudaGraphUpload"),
           ("graph.graph", "Graph", "instantiate", "cudaGraphInstantiate"),
           ("capture.capture", "capture", "__enter__", "capture begin"),
           ("capture.capture", "capture", "__exit__", "capture end"))

enabled = False


def _push_pop():
    """(push(name), pop()) from the first NVTX binding available, or None."""
    try:
        import nvtx
        return (lambda name: nvtx.push_range(name, domain="pycudagraph"),
                lambda: nvtx.pop_range(domain="pycudagraph"))
    except ImportError:
        pass
    try:
        from cupy.cuda import nvtx as cupy_nvtx
        return cupy_nvtx.RangePush, cupy_nvtx.RangePop
    except ImportError:
        pass
    try:
        import torch.cuda.nvtx as torch_nvtx
        return torch_nvtx.range_push, torch_nvtx.range_pop
    except ImportError:
        return None


def _wrap(fn, label: str, push, pop):
    name = f"pycudagraph {label}"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        push(name)
        try:
            return fn(*args, **kwargs)
        finally:
            pop()
    _WRAPPED.add(wrapper)
    return wrapper


def wrapped(fn) -> bool:
    """Whether ``fn`` is a method :func:`install` wrapped with an NVTX range."""
    try:
        return fn in _WRAPPED
    except TypeError:  # not weakly referable: never wrapped here
        return False


def install(force: bool = False) -> bool:
    """Wrap the methods with NVTX ranges if ``PYCUDAGRAPH_NVTX=1`` (or ``force``); idempotent."""
    global enabled
    if enabled or not (force or os.environ.get("PYCUDAGRAPH_NVTX") == "1"):
        return enabled
    funcs = _push_pop()
    if funcs is None:
        warnings.warn("PYCUDAGRAPH_NVTX=1 but no NVTX binding is installed (pip install "
                      "nvtx); no NVTX ranges will be emitted", stacklevel=2)
        return False
    import importlib
    for module, cls, method, label in _RANGES:
        owner = getattr(importlib.import_module(f"pycudagraph.{module}"), cls)
        fn = getattr(owner, method)
        if not wrapped(fn):
            setattr(owner, method, _wrap(fn, label, *funcs))
    enabled = True
    return True
