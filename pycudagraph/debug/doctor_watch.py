"""What ``pcg.doctor`` sees of a function's CUDA calls: CUPTI's API callbacks, read as they
happen.

CUPTI (the optional ``cupti-python`` package) calls :meth:`Watch.callback` on entry and
exit of every runtime API call, and of the driver API calls that matter here (the driver
calls a runtime call makes inside itself are not the user's: they are skipped, by a depth
count per thread). The callback runs on the thread that made the call, holding the GIL
(cupti-python takes it with ``PyGILState_Ensure``, which finds the thread's own state even
where PyTorch or CuPy released the GIL around the call): its frames then lead on to the
thread's Python frames, and the user's line is read from them only for calls that break a
capture (or may: async copies, work on the legacy stream).

Arguments are read from the call's parameter struct (``functionParams`` of
``CUpti_CallbackData``) at the offsets CUDA's ``*_params`` structs give them
(:data:`STREAM_AT`, :data:`COPIES`): the stream of launches, async copies, memsets, event
records and waits and graph launches; the host pointers of async copies; the pinned
allocations made or freed while the function runs, so a copy's host memory is known pinned
or pageable after the run. Calls whose layout is not listed here are not read.
"""

from __future__ import annotations

import ctypes
import inspect
import threading
from dataclasses import dataclass, field

from ..capture.breakers import BREAKERS, base_name
from ..capture.user_frames import user_place

__all__ = ["STREAM_AT", "COPIES", "Spec", "spec_for", "Event", "Watch"]

#: ``{call: byte offset of its stream in the params struct}``; a tuple ``(offset of a
#: config pointer, offset of the stream inside the config)`` for the ``Ex`` launches.
#: ``__cudaLaunchKernel`` (CUDA 13's ``<<<>>>``) takes cudaLaunchKernel's arguments.
STREAM_AT = {
    "cudaLaunchKernel": 48, "__cudaLaunchKernel": 48, "cudaLaunchCooperativeKernel": 48,
    "cudaLaunchKernelExC": (0, 32), "cudaMemcpyAsync": 32, "cudaMemcpy2DAsync": 56,
    "cudaMemsetAsync": 24, "cudaEventRecord": 8, "cudaEventRecordWithFlags": 8,
    "cudaStreamWaitEvent": 0, "cudaGraphLaunch": 8, "cudaLaunchHostFunc": 0,
    "cuLaunchHostFunc": 0, "cuLaunchKernel": 40, "cuLaunchCooperativeKernel": 40, "cuLaunchKernelEx": (0, 32),
    "cuMemcpyAsync": 24, "cuMemcpyHtoDAsync": 24, "cuMemcpyDtoHAsync": 24,
    "cuMemcpyDtoDAsync": 24, "cuMemsetD8Async": 24, "cuMemsetD16Async": 24,
    "cuMemsetD32Async": 24, "cuMemsetD2D8Async": 40, "cuMemsetD2D16Async": 40,
    "cuMemsetD2D32Async": 40, "cuEventRecord": 8, "cuEventRecordWithFlags": 8,
    "cuStreamWaitEvent": 0, "cuGraphLaunch": 8,
}

#: ``{async copy: (offset of dst, offset of src, offset of the cudaMemcpyKind or None)}``;
#: an offset is None where that side is device memory by the call's name.
COPIES = {
    "cudaMemcpyAsync": (0, 8, 24), "cudaMemcpy2DAsync": (0, 16, 48),
    "cuMemcpyAsync": (0, 8, None), "cuMemcpyHtoDAsync": (None, 8, None),
    "cuMemcpyDtoHAsync": (0, None, None),
}
#: Which sides of a runtime copy are host memory, by its ``cudaMemcpyKind``.
_HOST_SIDES = {0: (True, True), 1: (False, True), 2: (True, False), 3: (False, False),
               4: (True, True)}

_CHECKS = {"cudaStreamIsCapturing", "cudaStreamGetCaptureInfo", "cuStreamIsCapturing",
           "cuStreamGetCaptureInfo"}
_MODES = {"cudaThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode"}
#: Pinned allocations (``void **`` at 0, size at 8: read on exit), registrations (pointer
#: at 0, size at 8: read on entry) and releases (pointer at 0).
_PIN_OUT = {"cudaMallocHost", "cudaHostAlloc", "cuMemAllocHost", "cuMemHostAlloc"}
_PIN_IN = {"cudaHostRegister", "cuMemHostRegister"}
_UNPIN = {"cudaFreeHost", "cudaHostUnregister", "cuMemFreeHost", "cuMemHostUnregister"}
#: Calls a capture-aware caller may make: after it asked cudaStreamIsCapturing (PyTorch's
#: allocator does, and switches to relaxed mode when capturing) or in relaxed mode.
_AWARE = {"alloc", "host_alloc", "query"}
_RELAXED = 2  # cudaStreamCaptureModeRelaxed == CU_STREAM_CAPTURE_MODE_RELAXED
_CHECK_WINDOW = 3  # calls between a capture check and the call it covers

#: Every driver call worth a callback (the rest of the driver domain stays off).
DRIVER_CALLS = frozenset(n for n in (set(BREAKERS) | set(STREAM_AT) | set(COPIES) | _CHECKS
                                     | _MODES | _PIN_OUT | _PIN_IN | _UNPIN)
                         if n.startswith("cu") and not n.startswith("cuda"))


@dataclass(frozen=True)
class Spec:
    """What to do with one callback id: the call's ``name`` (no suffixes), whether it is a
    per-thread default-stream variant, its breaking ``category`` (or None) and its role."""

    name: str
    per_thread: bool = False
    category: str | None = None
    stream_at: object = None
    copy: tuple | None = None
    check: bool = False
    mode: bool = False
    pin: str = ""  # "out", "in", "free" or ""


def spec_for(function_name: str) -> Spec:
    """The :class:`Spec` of a call named ``function_name`` (as CUPTI names it). No CUDA call."""
    name, per_thread = base_name(function_name)
    pin = "out" if name in _PIN_OUT else "in" if name in _PIN_IN else \
        "free" if name in _UNPIN else ""
    return Spec(name, per_thread, BREAKERS.get(name), STREAM_AT.get(name), COPIES.get(name),
                name in _CHECKS, name in _MODES, pin)


@dataclass
class Event:
    """One call that breaks a capture, or may (``category`` ``"copy"``: an async copy whose
    host memory is judged after the run): the order it came in, the call, the thread, the
    user's place (None without Python frames) and, for copies, the host addresses."""

    seq: int
    name: str
    category: str
    thread: int
    place: object
    hosts: tuple = ()
    label: str = ""


@dataclass
class _Thread:
    depth: int = 0  # runtime calls open on this thread
    n: int = 0  # top-level calls seen on this thread
    checked: int = -100  # n at the last capture check
    relaxed: bool = False


def _u64(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value if address else 0


def _i32(address: int) -> int:
    return ctypes.c_int32.from_address(address).value if address else 0


@dataclass
class Watch:
    """The callback's state for one observed run (see the module docstring)."""

    runtime: int
    params_at: int = 16  # offset of functionParams in CUpti_CallbackData
    from_ptr: object = None  # cupti.CallbackData.from_ptr, where the binding hands an int
    specs: dict = field(default_factory=dict)
    threads: dict = field(default_factory=dict)
    events: list = field(default_factory=list)
    pins: list = field(default_factory=list)  # (seq, start, size, +1 pinned / -1 released)
    errors: list = field(default_factory=list)
    unread: dict = field(default_factory=dict)  # {launch name: count} of layouts not read
    calls: int = 0
    seq: int = 0

    def callback(self, userdata, domain, cbid, cbdata) -> None:
        """CUPTI's API callback; never raises into CUPTI (errors are kept)."""
        try:
            self._on(int(domain), int(cbid), cbdata)
        except Exception as exc:  # noqa: BLE001 - never raise into CUPTI
            if len(self.errors) < 20:
                self.errors.append(exc)

    def _on(self, domain: int, cbid: int, cbdata) -> None:
        if isinstance(cbdata, int) and self.from_ptr is not None:
            cbdata = self.from_ptr(cbdata)
        enter = int(cbdata.callback_site) == 0
        tid = threading.get_ident()
        st = self.threads.get(tid)
        if st is None:
            st = self.threads[tid] = _Thread()
        if domain == self.runtime:
            if not enter:
                if st.depth == 0:  # a call that began before the subscription
                    return
                st.depth -= 1
                if st.depth == 0:
                    self._exit(self._spec(domain, cbid, cbdata), cbdata)
                return
            st.depth += 1
            if st.depth > 1:
                return
        elif st.depth > 0:  # a driver call the runtime call on this thread makes
            return
        elif not enter:
            self._exit(self._spec(domain, cbid, cbdata), cbdata)
            return
        self._enter(self._spec(domain, cbid, cbdata), cbdata, st, tid)

    def _spec(self, domain: int, cbid: int, cbdata) -> Spec:
        spec = self.specs.get((domain, cbid))
        if spec is None:
            spec = self.specs[(domain, cbid)] = spec_for(str(cbdata.function_name or ""))
        return spec

    def _params(self, cbdata) -> int:
        return _u64(int(getattr(cbdata, "ptr", None) or int(cbdata)) + self.params_at)

    def _enter(self, spec: Spec, cbdata, st: _Thread, tid: int) -> None:
        self.calls += 1
        self.seq += 1
        st.n += 1
        if spec.check:
            st.checked = st.n
            return
        if spec.mode:
            st.relaxed = _i32(_u64(self._params(cbdata))) == _RELAXED
            return
        if spec.pin == "in" or spec.pin == "free":
            p = self._params(cbdata)
            size = _u64(p + 8) if spec.pin == "in" else 0
            self.pins.append((self.seq, _u64(p), size, 1 if spec.pin == "in" else -1))
        cat = spec.category
        if cat is not None:
            aware = st.relaxed or st.n - st.checked <= _CHECK_WINDOW
            if not (cat in _AWARE and aware):
                self._record(spec.name, cat, tid)
            return
        if spec.stream_at is not None:
            self._stream_use(spec, cbdata, tid)
        elif "Launch" in spec.name:
            self.unread[spec.name] = self.unread.get(spec.name, 0) + 1

    def _exit(self, spec: Spec, cbdata) -> None:
        if spec.pin == "out":
            p = self._params(cbdata)
            self.pins.append((self.seq, _u64(_u64(p)), _u64(p + 8), 1))

    def _stream_use(self, spec: Spec, cbdata, tid: int) -> None:
        p = self._params(cbdata)
        at = spec.stream_at
        stream = _u64(_u64(p + at[0]) + at[1]) if isinstance(at, tuple) else _u64(p + at)
        if stream == 1 or (stream == 0 and not spec.per_thread):
            self._record(spec.name, "legacy_stream", tid,
                         label=f"{spec.name} (legacy default stream)")
        if spec.copy is not None:
            dst_at, src_at, kind_at = spec.copy
            dst_host, src_host = _HOST_SIDES.get(_i32(p + kind_at), (True, True)) \
                if kind_at is not None else (dst_at is not None, src_at is not None)
            hosts = tuple(_u64(p + off) for off, host in ((dst_at, dst_host), (src_at, src_host))
                          if host and off is not None)
            if hosts:
                self._record(spec.name, "copy", tid, hosts=hosts)

    def _record(self, name: str, cat: str, tid: int, hosts: tuple = (), label: str = "") -> None:
        # the frames of this callback end at Watch.callback; past it, the thread's own
        frame = inspect.currentframe()
        while frame is not None and frame.f_code is not _CALLBACK:
            frame = frame.f_back
        place = user_place(frame.f_back) if frame is not None else None
        self.events.append(Event(self.seq, name, cat, tid, place, hosts, label or name))

    def pinned_at(self, address: int, seq: int, now) -> bool:
        """Whether host ``address`` was pinned when call ``seq`` ran: the last pinned
        allocation or release covering it before ``seq``; else what the driver says now
        (``now(address)``), unless it was pinned only after ``seq``."""
        state = None
        later = False
        sizes: dict = {}
        for s, start, size, sign in self.pins:
            if sign > 0:
                sizes[start] = size
            span = size if sign > 0 else sizes.get(start, 1)
            if not start <= address < start + max(span, 1):
                continue
            if s < seq or (s == seq and sign < 0):
                state = sign > 0
            elif sign > 0 and state is None:
                later = True
            elif sign < 0 and state is None:
                state = True  # released after the copy: it was pinned when copied
        if state is not None:
            return state
        return False if later else bool(now(address))


_CALLBACK = Watch.callback.__code__
