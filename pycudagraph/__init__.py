"""pycudagraph: a thin, Pythonic and complete binding to the CUDA Graph runtime API.

Every object exposes ``.handle`` (the raw ``cuda.bindings`` handle) and every method
names the raw call it makes. Importing the package makes no CUDA call.
"""

from .compiler import Kernel, Module, Program
from .errors import (ArgumentError, CaptureError, CompileError, CudaError,
                     CudaNotAvailableError, GraphExecUpdateError, HostCallbackError,
                     NotSupportedError, PyCudaGraphError)
from .memory import DeviceBuffer, PinnedBuffer, device_pointer, host_pointer
from .stream import Event, Stream

__version__ = "0.1.0"

__all__ = [
    "Program", "Module", "Kernel",
    "Stream", "Event", "DeviceBuffer", "PinnedBuffer", "device_pointer", "host_pointer",
    "PyCudaGraphError", "CudaError", "CudaNotAvailableError", "NotSupportedError",
    "CompileError", "ArgumentError", "CaptureError", "GraphExecUpdateError", "HostCallbackError",
]
