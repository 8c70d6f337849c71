"""Machines with no usable GPU: what is missing, in one sentence, and what works anyway.

:func:`unavailable` builds the :class:`~pycudagraph.errors.CudaNotAvailableError` of a
failed first device use, its message saying what is missing (no driver, a driver too old
for the installed CUDA runtime, no device) instead of CUDA's "driver version is
insufficient". :func:`report_uncaught` makes such an error, when nothing catches it, end
the program with that one sentence instead of a traceback (``PYCUDAGRAPH_TRACEBACK=1``
keeps the traceback); it is installed when the error is first raised, not at import.
"""

from __future__ import annotations

import os
import sys

from cuda.bindings import runtime as rt

from ..errors import CudaNotAvailableError

__all__ = ["format_version", "missing", "unavailable", "report_uncaught", "WITHOUT_GPU",
           "TRACEBACK_ENV"]

#: Set to 1 to see the traceback of an uncaught CudaNotAvailableError.
TRACEBACK_ENV = "PYCUDAGRAPH_TRACEBACK"

#: What works on a machine with no GPU (for messages and ``python -m pycudagraph info``).
WITHOUT_GPU = ('Program(...).compile(arch="sm_90"), Kernel.pack_args(...), '
               "`python -m pycudagraph info` and `python -m pycudagraph demo --model` work "
               "without one")


def format_version(v: int) -> str:
    """``12030`` -> ``"12.3"`` (a CUDA version as the driver and runtime report it; here,
    where the messages of a missing driver need it, and :mod:`.versions` takes it)."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def missing(err_name: str, cuda_text: str) -> str:
    """What is missing, in words, for a failed ``cudaGetDeviceCount`` (``err_name``)."""
    try:
        err, driver = rt.cudaDriverGetVersion()
        _, runtime = rt.cudaRuntimeGetVersion()
    except Exception:  # noqa: BLE001 - the runtime library itself: say what CUDA said
        return cuda_text
    if err or not driver:
        return "no NVIDIA driver is installed on this machine: libcuda.so.1 was not found"
    if err_name == "cudaErrorInsufficientDriver" and runtime:
        return (f"the NVIDIA driver supports CUDA {format_version(driver)} but the installed "
                f"cuda-bindings need CUDA {format_version(runtime)} (a newer driver, or "
                f"pycudagraph[cu{driver // 1000}])")
    if err_name in ("cudaErrorNoDevice", "cudaSuccess"):
        return "the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES and nvidia-smi)"
    return cuda_text


def unavailable(api: str, code: int, err_name: str, cuda_text: str,
                hint: str = "") -> CudaNotAvailableError:
    """The error of a first device use that found no usable GPU; installs
    :func:`report_uncaught`."""
    exc = CudaNotAvailableError(api, code, err_name, missing(err_name, cuda_text), hint)
    report_uncaught()
    return exc


def _one_line(exc: CudaNotAvailableError) -> str:
    text = f"pycudagraph: {exc.message}"
    if exc.hint:
        text += f"; {exc.hint}"
    return text + f" (set {TRACEBACK_ENV}=1 for the traceback)"


def report_uncaught() -> None:
    """From now on an uncaught :class:`CudaNotAvailableError` ends the program with one line
    on stderr (what is missing, and what to do) instead of a traceback; other exceptions
    go to the hook that was there before. Idempotent."""
    previous = sys.excepthook
    if previous in _HOOKS:
        return

    def hook(kind, exc, tb):
        if (isinstance(exc, CudaNotAvailableError)
                and os.environ.get(TRACEBACK_ENV, "") in ("", "0")):
            print(_one_line(exc), file=sys.stderr)
            return
        previous(kind, exc, tb)

    _HOOKS.append(hook)
    sys.excepthook = hook


_HOOKS: list = []  # the hooks installed here (a second install finds its own and stops)
