"""Functions for ``pcg.doctor``'s GPU tests (tests/debug/test_doctor_gpu.py), each run in a
child process of its own. A line that breaks a capture ends with ``# breaks: <tag>``;
:func:`marked` finds those lines from the source, so the expected line numbers never drift.

Imported by the test module on any machine: PyTorch and CuPy are imported inside the
functions, and nothing runs at import.
"""

from __future__ import annotations

import inspect
import re

_MARK = re.compile(r"#\s*breaks:\s*(\w+)")


def marked(fn) -> dict:
    """``{tag: line number}`` of the lines of ``fn`` marked ``# breaks: <tag>``."""
    lines, start = inspect.getsourcelines(fn)
    out = {}
    for i, text in enumerate(lines):
        m = _MARK.search(text)
        if m:
            out[m.group(1)] = start + i
    return out


def torch_three(x):
    """Three capture breakers: a host read, a device synchronization, a pageable copy."""
    import torch
    y = x * 2 + 1
    v = y.sum().item()  # breaks: item
    torch.cuda.synchronize()  # breaks: synchronize
    h = y.cpu()  # breaks: cpu
    return y * v, h


def torch_clean(x, w):
    """A matmul (cuBLAS), an activation and a reduction: nothing that breaks a capture."""
    import torch
    y = torch.relu(x @ w)
    return (y * 2).sum(dim=1)


def torch_pageable(x, host):
    """An async copy into pageable host memory, and nothing else that breaks."""
    y = x + 1
    host.copy_(y, non_blocking=True)  # breaks: pageable
    return y


def cupy_three(x):
    """Three capture breakers: a copy to NumPy, a device synchronization, a host read."""
    import cupy
    y = x * 2 + 1
    h = cupy.asnumpy(y)  # breaks: asnumpy
    cupy.cuda.Device().synchronize()  # breaks: synchronize
    s = float(y.sum())  # breaks: float
    return y * s, h


def cupy_clean(x):
    """Elementwise kernels and a reduction: nothing that breaks a capture."""
    import cupy
    y = cupy.tanh(x) * 3
    return y.sum(axis=0)
