"""What a graphed callable asks of PyTorch and CuPy: their current stream, a context that
makes a stream current in both, a copy of an array with the same layout, a comparison.

Every function takes the framework from ``sys.modules`` (:mod:`.loaded`); none imports
one. The copies and comparisons run as the framework's own work on its current stream.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..runtime.memory import DeviceBuffer
from ..runtime.stream import Stream
from . import loaded

__all__ = ["current_stream", "framework_streams", "cupy_stream", "twin", "copy_of", "compare"]


def current_stream(frameworks, device: int) -> int | None:
    """The stream handle work on ``frameworks``' arrays is ordered on now: PyTorch's
    current stream when a PyTorch array is among them, else CuPy's, else None (the
    legacy default stream). No CUDA call."""
    if "torch" in frameworks:
        torch = loaded.torch()
        return int(torch.cuda.current_stream(device).cuda_stream)
    if "cupy" in frameworks:
        return int(loaded.cupy().cuda.get_current_stream().ptr)
    return None


@contextlib.contextmanager
def framework_streams(stream_ptr: int | None, device: int):
    """Make ``stream_ptr`` (on ``device``) the current stream of each imported framework
    (``None``: keep their current streams), and turn PyTorch's autograd off (graphed work
    is inference). No CUDA call of ours; PyTorch only takes part once its CUDA state exists."""
    with contextlib.ExitStack() as stack:
        torch = loaded.torch()
        if torch is not None and loaded.torch_cuda_ready(torch):
            stack.enter_context(torch.cuda.device(device))
            if stream_ptr is not None:
                stack.enter_context(torch.cuda.stream(
                    torch.cuda.ExternalStream(stream_ptr, device=device)))
            stack.enter_context(torch.no_grad())
        cupy = loaded.cupy()
        if cupy is not None:
            stack.enter_context(cupy.cuda.Device(device))
            if stream_ptr is not None:
                stack.enter_context(cupy_stream(cupy, stream_ptr))
        yield


def cupy_stream(cupy, stream_ptr: int):
    """A CuPy stream over ``stream_ptr`` (``Stream.from_external``, CuPy 14+; the
    deprecated ``ExternalStream`` before). No CUDA call."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(Stream.wrap(stream_ptr))
    return cupy.cuda.ExternalStream(stream_ptr)


def twin(obj):
    """A new array with ``obj``'s shape, strides and dtype holding its values (PyTorch
    ``empty_strided`` + ``copy_``, CuPy ``ndarray`` over a new block + ``copyto``), on the
    framework's current stream; a :class:`~pycudagraph.DeviceBuffer` is copied through
    the host (``cudaMemcpy`` both ways). An array whose elements overlap (stride 0) gets
    a dense copy."""
    torch = loaded.torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        try:
            return torch.empty_strided(obj.shape, obj.stride(), dtype=obj.dtype,
                                       device=obj.device).copy_(obj)
        except RuntimeError:  # overlapping elements cannot be written to
            return obj.clone()
    cupy = loaded.cupy()
    if cupy is not None and isinstance(obj, cupy.ndarray):
        if any(s == 0 for s in obj.strides) or not obj.size:
            return obj.copy()
        lo = sum((n - 1) * s for n, s in zip(obj.shape, obj.strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(obj.shape, obj.strides) if s > 0) + obj.itemsize
        mem = cupy.cuda.alloc(hi - lo)
        out = cupy.ndarray(obj.shape, obj.dtype, memptr=mem + (-lo), strides=obj.strides)
        cupy.copyto(out, obj)
        return out
    if isinstance(obj, DeviceBuffer):  # through the host: first calls and checks only
        return DeviceBuffer.from_array(_host_bytes(obj))
    raise TypeError(f"cannot copy a {type(obj).__name__}")


def copy_of(obj):
    """A copy of an output (``Tensor.clone``, ``cupy.ndarray.copy``, a new
    :class:`~pycudagraph.DeviceBuffer`) on the framework's current stream."""
    torch = loaded.torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return obj.clone()
    cupy = loaded.cupy()
    if cupy is not None and isinstance(obj, cupy.ndarray):
        return obj.copy()
    return twin(obj)


def compare(got, want, rtol: float = 1e-5, atol: float = 1e-6) -> str:
    """"" when two arrays hold the same values (floats within ``rtol``/``atol``, NaNs
    equal), else one line saying how they differ. Waits for the values (the framework's
    own synchronizing reads)."""
    torch = loaded.torch()
    if torch is not None and isinstance(got, torch.Tensor):
        if got.shape != want.shape:
            return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
        if got.dtype.is_floating_point or got.dtype.is_complex:
            if torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
                return ""
            return f"max |difference| {float((got - want).abs().nan_to_num().max()):.3g}"
        return "" if torch.equal(got, want) else "integer values differ"
    cupy = loaded.cupy()
    if cupy is not None and isinstance(got, cupy.ndarray):
        if got.shape != want.shape:
            return f"shape {got.shape} != {want.shape}"
        if got.dtype.kind in "fc":
            if bool(cupy.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)):
                return ""
            return f"max |difference| {float(cupy.nanmax(cupy.abs(got - want))):.3g}"
        return "" if bool(cupy.array_equal(got, want)) else "integer values differ"
    return "" if np.array_equal(_host_bytes(got), _host_bytes(want)) else "bytes differ"


def _host_bytes(buf: DeviceBuffer) -> np.ndarray:
    out = np.empty(buf.nbytes, np.uint8)
    buf.copy_to(out)
    return out
