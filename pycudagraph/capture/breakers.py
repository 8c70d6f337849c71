"""The CUDA calls that break a stream capture, what each does and how to avoid it.

One table for everything that explains a broken capture: ``pcg.capture``'s error when a
capture fails (:func:`describe_failure`) and ``pcg.doctor``, which lists every such call a
function makes. A call breaks a capture when CUDA refuses it while a capture is open
(``cudaErrorStreamCaptureUnsupported``, ``...Invalidated``, ``...Implicit``): it waits on
the host (synchronization, synchronous copies, queries), it is not stream-ordered
(``cudaMalloc`` and ``cudaFree`` outside relaxed mode, pinned allocations), it copies to or
from pageable host memory, or it uses the legacy default stream.

Names are the raw calls without version or per-thread suffixes (``cuMemcpyDtoH_v2`` and
``cudaMemcpy_ptds`` are ``cuMemcpyDtoH`` and ``cudaMemcpy``: :func:`base_name`). What a
user's line says (``.item()``, ``.cpu()``, ``synchronize()``, ``float(x)``) picks a more
precise explanation than the call's category (:data:`HINTS`). No CUDA call here.
"""

from __future__ import annotations

import re

from ..errors import CudaError
from .user_frames import Place, traceback_place

__all__ = ["CATEGORIES", "BREAKERS", "HINTS", "base_name", "category", "hint", "explain",
           "Failure", "describe_failure"]

#: ``{category: (what it does, how to avoid it)}``.
CATEGORIES = {
    "sync": ("waits on the host for the device, a stream or an event",
             "remove it from the captured region; synchronize after launching the graph"),
    "query": ("asks whether a stream's or an event's work is done, which is not allowed "
              "while a capture is open",
              "query outside the captured region; order work with events "
              "(cudaEventRecord / cudaStreamWaitEvent) instead"),
    "sync_copy": ("a synchronous copy or memset: it waits for the device and runs on the "
                  "legacy default stream",
                  "use the async form on the capture stream (cudaMemcpyAsync, "
                  "copy_(..., non_blocking=True)) between device or pinned memory"),
    "pageable_copy": ("an async copy to or from pageable host memory, which CUDA makes "
                      "synchronous and cannot capture",
                      "keep the data on the device, or copy through a pinned buffer made "
                      "before the capture"),
    "alloc": ("allocates device memory outside a stream-ordered pool (not permitted while a "
              "global or thread-local capture is open)",
              "allocate before the capture and reuse the buffer, or use a stream-ordered "
              "allocation (cudaMallocAsync); PyTorch's and CuPy's allocators are routed to "
              "the graph's pool inside pcg.capture"),
    "free": ("frees memory, which synchronizes the device",
             "free after the capture; keep buffers alive while the graph may run"),
    "host_alloc": ("allocates, frees or registers pinned host memory, which is not permitted "
                   "while a capture is open",
                   "make pinned buffers before the capture and reuse them"),
    "legacy_stream": ("issues work on the legacy default stream (stream 0), which cannot be "
                      "captured and waits for every other blocking stream",
                      "issue it on the capture stream: make it the framework's current stream "
                      "(torch.cuda.stream(s), `with cupy_stream:`) or pass stream="),
}

_NAMES = {
    "sync": "cudaDeviceSynchronize cudaThreadSynchronize cudaStreamSynchronize "
            "cudaEventSynchronize cuCtxSynchronize cuStreamSynchronize cuEventSynchronize",
    "query": "cudaStreamQuery cudaEventQuery cuStreamQuery cuEventQuery",
    "sync_copy": "cudaMemcpy cudaMemcpy2D cudaMemcpy3D cudaMemcpyPeer cudaMemcpy3DPeer "
                 "cudaMemcpyToArray cudaMemcpyFromArray cudaMemcpy2DToArray "
                 "cudaMemcpy2DFromArray cudaMemcpyArrayToArray cudaMemcpy2DArrayToArray "
                 "cudaMemcpyToSymbol cudaMemcpyFromSymbol cudaMemset cudaMemset2D cudaMemset3D "
                 "cuMemcpy cuMemcpyPeer cuMemcpyHtoD cuMemcpyDtoH cuMemcpyDtoD cuMemcpyDtoA "
                 "cuMemcpyAtoD cuMemcpyHtoA cuMemcpyAtoH cuMemcpyAtoA cuMemcpy2D "
                 "cuMemcpy2DUnaligned cuMemcpy3D cuMemcpy3DPeer cuMemsetD8 cuMemsetD16 "
                 "cuMemsetD32 cuMemsetD2D8 cuMemsetD2D16 cuMemsetD2D32",
    "alloc": "cudaMalloc cudaMallocPitch cudaMalloc3D cudaMallocArray cudaMalloc3DArray "
             "cudaMallocMipmappedArray cudaMallocManaged cuMemAlloc cuMemAllocPitch "
             "cuMemAllocManaged cuArrayCreate cuArray3DCreate cuMipmappedArrayCreate",
    "free": "cudaFree cudaFreeArray cudaFreeMipmappedArray cuMemFree cuArrayDestroy "
            "cuMipmappedArrayDestroy",
    "host_alloc": "cudaMallocHost cudaHostAlloc cudaFreeHost cudaHostRegister "
                  "cudaHostUnregister cuMemAllocHost cuMemHostAlloc cuMemFreeHost "
                  "cuMemHostRegister cuMemHostUnregister",
}

#: ``{raw call: category}`` of every call that breaks a capture whatever its arguments.
#: (Async copies break one only with pageable memory, launches only on the legacy stream:
#: ``pcg.doctor`` reads their arguments.)
BREAKERS = {name: cat for cat, names in _NAMES.items() for name in names.split()}

_SUFFIX = re.compile(r"^(?P<base>.+?)(?:_v\d+)?(?:_(?P<pt>ptsz|ptds))?(?:_v\d+)?$")


def base_name(name: str) -> tuple[str, bool]:
    """(the raw call without version or per-thread suffix, whether it is the per-thread
    default-stream variant): ``cuMemcpyDtoHAsync_v2_ptsz`` -> (``cuMemcpyDtoHAsync``,
    True). No CUDA call."""
    m = _SUFFIX.match(name or "")
    if m is None:
        return name or "", False
    return m.group("base"), m.group("pt") is not None


def category(name: str) -> str | None:
    """The category (a key of :data:`CATEGORIES`) of a call that always breaks a capture,
    or None. No CUDA call."""
    return BREAKERS.get(base_name(name)[0])


_HOST_READ = frozenset({"sync", "sync_copy", "pageable_copy", "query"})
_KEEP = ("keep the value on the device (a 0-d tensor or array; torch.where / cupy.where "
         "for a branch), or read it after the graph has run")

#: ``(pattern on the user's line, the categories it explains, what, fix)``; the first whose
#: pattern matches and whose categories meet the line's wins.
HINTS = [
    (re.compile(r"\.item\(\s*\)"), _HOST_READ,
     ".item() copies the value to the host and waits for it", _KEEP),
    (re.compile(r"\.(tolist|numpy)\("), _HOST_READ,
     "reads the tensor on the host: a copy and a wait", _KEEP),
    (re.compile(r"\.cpu\(|\.to\(\s*['\"]cpu|device\s*=\s*['\"]cpu"), _HOST_READ,
     ".cpu() copies to pageable host memory and waits for the copy",
     "keep it on the device, or copy into a pinned tensor made before the capture: "
     "host = torch.empty(..., pin_memory=True), then host.copy_(x, non_blocking=True)"),
    (re.compile(r"asnumpy\(|\.get\("), _HOST_READ,
     "copies the array into a NumPy array (pageable host memory) and waits",
     "keep it on the device, or copy into pinned memory made before the capture "
     "(cupyx.empty_pinned) with x.get(out=pinned, stream=s, blocking=False)"),
    (re.compile(r"\bsynchronize\("), frozenset({"sync"}),
     "waits on the host for the device or a stream",
     "remove it from the captured region; synchronize after launching the graph"),
    (re.compile(r"\b(float|int|bool|complex)\("), _HOST_READ,
     "turns a device value into a Python number: a copy to the host and a wait", _KEEP),
    (re.compile(r"^\s*(if|elif|while|assert)\b"), _HOST_READ,
     "a condition on a device value reads it on the host: a copy and a wait",
     "branch on the device (torch.where / cupy.where, or a conditional node), or decide "
     "before the capture"),
    (re.compile(r"\bprint\("), _HOST_READ,
     "printing a device value copies it to the host and waits", "print after the graph has run"),
    (re.compile(r"empty_cache\("), frozenset({"free"}),
     "returns cached memory to the driver (cudaFree)", "call it outside the captured region"),
    (re.compile(r"pin_memory"), frozenset({"host_alloc"}),
     "pins host memory (cudaHostAlloc / cudaHostRegister)",
     "pin buffers before the capture and reuse them"),
]


def hint(categories, source: str) -> tuple[str, str] | None:
    """(what, fix) of the first of :data:`HINTS` that matches the line ``source`` and
    explains one of ``categories``, or None. No CUDA call."""
    found = set(categories)
    for pattern, explains, what, fix in HINTS:
        if found & explains and pattern.search(source or ""):
            return what, fix
    return None


def explain(categories, source: str = "") -> tuple[str, str]:
    """(what, fix) for a line that made calls of ``categories`` (keys of
    :data:`CATEGORIES`, first one first) and reads ``source``: a hint for the line, else
    the first category's. No CUDA call."""
    cats = [c for c in categories if c in CATEGORIES]
    found = hint(cats, source)
    if found is not None:
        return found
    return CATEGORIES[cats[0]] if cats else ("", "")


class Failure:
    """Where a failed capture broke, read from the exception that ended it: ``place`` (the
    user's line, a :class:`~.user_frames.Place`, or None), ``raw_call`` (the raw call
    CuPy's frames show failed, or ``""``), ``what`` and ``fix`` (from :func:`explain`)."""

    def __init__(self, place: Place | None, raw_call: str, api: str = "", cuda: bool = True):
        self.place = place
        self.raw_call = raw_call or api
        cat = category(self.raw_call) if self.raw_call else None
        source = place.source if place is not None else ""
        if cat is not None:
            self.what, self.fix = explain([cat], source)
        elif cuda:  # the call is not known: only what the line says can explain it
            self.what, self.fix = hint(CATEGORIES, source) or ("", "")
        else:  # a Python error of the block's own: no CUDA call to explain
            self.what = self.fix = ""

    def located(self) -> str:
        """``" at file:line (function): `source` (framework call)"`` or ``""``."""
        p = self.place
        if p is None:
            return ""
        text = f" at {p} ({p.function})"
        if p.source:
            text += f": `{p.source}`"
        if p.inner:
            text += f", in {p.inner}"
        return text

    def advice(self) -> str:
        """``"That call <what>: <fix>. "`` or ``""``."""
        return f"That call {self.what}: {self.fix}. " if self.what else ""


def describe_failure(exc, tb, api: str = "") -> Failure:
    """Where the block of a failed capture broke: the user's line in the traceback ``tb``
    of ``exc`` (:func:`~.user_frames.traceback_place`), the raw call when CuPy's frames or
    ``api`` (the failing call through pycudagraph) name one. No CUDA call."""
    if tb is None and exc is not None:
        tb = exc.__traceback__
    place, raw = traceback_place(tb) if tb is not None else (None, "")
    cuda = bool(api or raw) or isinstance(exc, CudaError) or bool(_CUDA_TEXT.search(str(exc)))
    return Failure(place, raw, api, cuda)


#: What the message of an error raised by a framework's failed CUDA call says.
_CUDA_TEXT = re.compile(r"cuda|captur", re.I)
