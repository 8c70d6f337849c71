"""The checked layer: the only part of pycudagraph that imports ``cuda.bindings`` or libcuda.

Three layers, one direction: public objects (:class:`~pycudagraph.Graph`, ...) call this
layer, which calls ``cuda.bindings`` (cold paths) or libcuda through ctypes (hot paths).

Naming rule: a raw call keeps its CUDA name. ``call(rt.cudaGraphCreate, 0)`` runs
``cudaGraphCreate`` and returns its values or raises :class:`~pycudagraph.errors.CudaError`
naming ``cudaGraphCreate``; ``fast.launch_graph`` runs ``cuGraphLaunch`` (the driver twin of
``cudaGraphLaunch``) and reports to the same check and trace.

Modules:

=========== ===================================================================
check       ``call``, ``error_for`` (sticky-error clearing), the trace hook
versions    bindings/driver versions, ``require(feature, version)``, 12.x/13.x shims
context     the current device's context, per thread (``ensure_device``)
fast        the hot calls (compiled ``_native`` route, then ctypes), checked and traced
structs     byte layouts of the structs the hot calls take
=========== ===================================================================

Nothing here touches CUDA at import time.
"""

from cuda.bindings import driver as dr
from cuda.bindings import nvrtc
from cuda.bindings import runtime as rt

from . import check, fast, structs, versions
from .check import call, error_for, report
from .context import cuda_available, ensure_device, set_device
from .versions import (BINDINGS_MAJOR, BINDINGS_VERSION, driver_version, format_version,
                       nvrtc_version, require, runtime_version)

__all__ = ["rt", "dr", "nvrtc", "call", "error_for", "report", "ensure_device", "set_device",
           "cuda_available", "require", "driver_version", "runtime_version", "nvrtc_version",
           "format_version", "BINDINGS_MAJOR", "BINDINGS_VERSION", "check", "fast", "structs",
           "versions"]
