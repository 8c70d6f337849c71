"""CPU tests of ``pcg.doctor`` with stand-ins: CUPTI callback data built with ctypes (the
parameter structs at CUDA's offsets), a fake ``cupti`` module, and "framework" code compiled
under a ``torch.*`` module name so that frame picking has frames to skip. The table of
breaking calls, frame picking and ``pcg.capture``'s report: tests/debug/test_capture_report.py;
the GPU side: tests/debug/test_doctor_gpu.py."""

from __future__ import annotations

import ctypes
import inspect
import sys

import pytest

import pycudagraph as pcg
from pycudagraph.capture import breakers
from pycudagraph.debug import doctor_run as doctor_mod
from pycudagraph.debug.doctor_report import DoctorReport, group_events
from pycudagraph.debug.doctor_watch import DRIVER_CALLS, Watch, spec_for

RUNTIME, DRIVER = 2, 1

# "framework" code: frames of module torch.fake_ops are not the user's
_FAKE_TORCH = '''
def fire(watch, name, params=None, domain=2, inside=()):
    """Enter and exit one call; ``inside``: (name, params, domain) calls made within it."""
    cb = make(name, params or {})
    cbid = sum(name.encode())  # one id per name, as CUPTI's callback ids are
    watch.callback(None, domain, cbid, cb.at(0))
    for inner in inside:
        fire(watch, *inner)
    watch.callback(None, domain, cbid, cb.at(1))

def synchronize(watch):
    fire(watch, "cudaDeviceSynchronize")
'''


class _Call:
    """A ``CUpti_CallbackData`` (callback site, then ``functionParams`` at byte 16) and a
    parameter struct of 16 eight-byte slots (``{byte offset: value}``)."""

    def __init__(self, name: str, params: dict):
        self.name = name
        self.params = (ctypes.c_uint64 * 16)()
        self.extra = []  # structs the params point at (a launch config, a void**)
        for off, value in params.items():
            if isinstance(value, dict):  # a pointer to another struct
                sub = (ctypes.c_uint64 * 16)()
                for o, v in value.items():
                    sub[o // 8] = v
                self.extra.append(sub)
                value = ctypes.addressof(sub)
            self.params[off // 8] = value
        self.data = (ctypes.c_uint64 * 8)()
        self.data[2] = ctypes.addressof(self.params)

    def at(self, site: int):
        self.data[0] = site
        return _Data(site, self.name, ctypes.addressof(self.data))


class _Data:
    def __init__(self, site, name, ptr):
        self.callback_site, self.function_name, self.ptr = site, name, ptr


_NS = {"__name__": "torch.fake_ops", "make": _Call}
exec(compile(_FAKE_TORCH, "fake/torch/fake_ops.py", "exec"), _NS)
fire, fake_sync = _NS["fire"], _NS["synchronize"]


def line_of(fn, text: str) -> int:
    """The line number of the line of ``fn``'s source holding ``text``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1, (text, hits)
    return hits[0]


# --- the callbacks ---------------------------------------------------------------------

def test_breakers_are_recorded_at_the_users_line_and_driver_internals_are_not():
    w = Watch(RUNTIME)

    def run():
        fire(w, "cudaStreamSynchronize_v3020", inside=[("cuStreamSynchronize", {}, DRIVER)])  # a
        fire(w, "cudaGetDevice")
        fire(w, "cuCtxSynchronize", domain=DRIVER)  # b
        fake_sync(w)  # c

    run()
    assert [(e.name, e.category) for e in w.events] == [
        ("cudaStreamSynchronize", "sync"), ("cuCtxSynchronize", "sync"),
        ("cudaDeviceSynchronize", "sync")]
    lines = [e.place.line for e in w.events]
    assert lines == [line_of(run, "# a"), line_of(run, "# b"), line_of(run, "# c")]
    assert w.events[2].place.inner == "torch.fake_ops.synchronize"
    assert w.calls == 4 and not w.errors


def test_capture_aware_allocations_are_not_breakers():
    w = Watch(RUNTIME)
    mode = ctypes.c_int32(2)  # cudaStreamCaptureModeRelaxed
    fire(w, "cudaStreamIsCapturing")
    fire(w, "cudaMalloc")  # PyTorch's allocator asked first: relaxed when capturing
    fire(w, "cudaMalloc")
    fire(w, "cudaGetDevice")
    fire(w, "cudaGetLastError")
    fire(w, "cudaGetDevice")
    fire(w, "cudaMalloc_v3020")  # too far from the check: a breaker
    fire(w, "cudaThreadExchangeStreamCaptureMode", {0: ctypes.addressof(mode)})
    fire(w, "cudaMalloc")  # relaxed mode
    fire(w, "cudaFree")  # never capture-aware: it synchronizes
    assert [e.name for e in w.events] == ["cudaMalloc", "cudaFree"]


def test_legacy_stream_use_is_read_from_the_parameters():
    w = Watch(RUNTIME)
    side = 0x7F00
    fire(w, "cudaLaunchKernel_v7000", {48: side})
    fire(w, "cudaLaunchKernel_v7000", {48: 0})
    fire(w, "cudaLaunchKernel_ptsz_v7000", {48: 0})  # per-thread default stream: fine
    fire(w, "cudaLaunchKernel_ptsz_v7000", {48: 1})  # cudaStreamLegacy
    fire(w, "cuLaunchKernelEx", {0: {32: 0}}, DRIVER)
    fire(w, "cuLaunchKernelEx", {0: {32: side}}, DRIVER)
    fire(w, "cudaEventRecord", {8: 0})
    fire(w, "cudaSomeNewLaunch")
    labels = [e.label for e in w.events]
    assert labels == ["cudaLaunchKernel (legacy default stream)"] * 2 + [
        "cuLaunchKernelEx (legacy default stream)", "cudaEventRecord (legacy default stream)"]
    assert w.unread == {"cudaSomeNewLaunch": 1}


def test_copies_to_pageable_memory_are_judged_after_the_run():
    w = Watch(RUNTIME)
    dev, pageable, pinned, late = 0xD000, 0x1000, 0x5000, 0x9000
    slot = ctypes.c_uint64(pinned)
    fire(w, "cudaHostAlloc", {0: ctypes.addressof(slot), 8: 256})
    fire(w, "cudaMemcpyAsync", {0: pageable, 8: dev, 24: 2, 32: 0x77})  # D2H, pageable
    fire(w, "cudaMemcpyAsync", {0: pinned + 16, 8: dev, 24: 2, 32: 0x77})  # D2H, pinned
    fire(w, "cudaMemcpyAsync", {0: dev, 8: dev + 64, 24: 3, 32: 0x77})  # D2D: nothing
    fire(w, "cuMemcpyHtoDAsync_v2", {0: dev, 8: late, 24: 0x77}, DRIVER)
    fire(w, "cudaHostRegister", {0: late, 8: 64})  # pinned only after the copy
    fire(w, "cudaMemcpyAsync", {0: pageable, 8: dev, 24: 2, 32: 0})  # and on stream 0
    # the pinned allocation and the registration break a capture themselves
    assert [e.category for e in w.events] == ["host_alloc", "copy", "copy", "copy",
                                              "host_alloc", "legacy_stream", "copy"]
    asked = []
    report = doctor_mod.report(w, 1, 0.001, lambda a: asked.append(a) or a == late)
    got = [(p.call, p.categories) for p in report.problems]
    assert got == [
        ("cudaHostAlloc", ["host_alloc"]),
        ("cudaMemcpyAsync (pageable host memory)", ["pageable_copy"]),
        ("cuMemcpyHtoDAsync (pageable host memory)", ["pageable_copy"]),
        ("cudaHostRegister", ["host_alloc"]),
        ("cudaMemcpyAsync (legacy default stream), cudaMemcpyAsync (pageable host memory)",
         ["legacy_stream", "pageable_copy"])]
    assert report.problems[1].what == breakers.CATEGORIES["pageable_copy"][0]
    assert asked == [pageable, pageable]  # the rest is known from the run itself


def test_callback_errors_are_kept_not_raised():
    w = Watch(RUNTIME)
    w.callback(None, RUNTIME, 1, object())  # no callback_site: the read fails
    assert len(w.errors) == 1
    assert "1 error(s) while observing" in doctor_mod.report(w, 0, 0.0, bool).notes[0]


def test_a_call_begun_before_the_subscription_does_not_unbalance_the_depth():
    w = Watch(RUNTIME)
    w.callback(None, RUNTIME, 5, _Call("cudaMemcpy", {}).at(1))  # only its exit is seen
    fire(w, "cuCtxSynchronize", domain=DRIVER)  # a user's driver call: reported
    fire(w, "cudaLaunchKernel", {48: 0x77}, inside=[("cuStreamSynchronize", {}, DRIVER)])
    assert [e.name for e in w.events] == ["cuCtxSynchronize"]


def test_driver_calls_cover_what_the_watch_reads():
    assert {"cuStreamSynchronize", "cuLaunchKernel", "cuMemcpyDtoHAsync", "cuMemAlloc",
            "cuStreamIsCapturing", "cuMemHostAlloc"} <= DRIVER_CALLS
    assert not any(n.startswith("cuda") for n in DRIVER_CALLS)
    s = spec_for("cudaMemcpyAsync_ptsz_v7000")
    assert s.per_thread and s.copy == (0, 8, 24) and s.stream_at == 32


# --- grouping and the report -----------------------------------------------------------

def test_repeated_calls_at_one_line_are_one_problem_with_a_count():
    w = Watch(RUNTIME)

    def loop():
        for _ in range(3):
            fire(w, "cudaStreamSynchronize")  # each time
        fake_sync(w)  # once

    loop()
    problems = group_events(w.events)
    assert [(p.line, p.count, p.call) for p in problems] == [
        (line_of(loop, "# each time"), 3, "cudaStreamSynchronize"),
        (line_of(loop, "# once"), 1, "cudaDeviceSynchronize")]
    rep = DoctorReport(problems, calls=w.calls, warmup=1, seconds=0.002)
    text = str(rep)
    assert not rep.ok and text.startswith("pcg.doctor: 2 line(s) in fn would break a capture")
    assert "#  where" in text and "times  calls" in text
    assert f"{problems[0].where}      3  cudaStreamSynchronize" in text
    assert "fix: remove it from the captured region" in text
    assert "calls torch.fake_ops.synchronize" in text
    ok = DoctorReport([], calls=12, warmup=1)
    assert ok.ok and str(ok).startswith("ok: no call in fn would break a capture")


# --- pcg.doctor itself, with a fake cupti ----------------------------------------------

class FakeCupti:
    """The calls pcg.doctor makes of cupti-python's ``cupti`` module."""

    class CallbackDomain:
        DRIVER_API, RUNTIME_API = 1, 2

    class driver_api_trace_cbid:
        __members__ = {"cuStreamSynchronize": 120, "cuStreamSynchronize_ptsz": 121,
                       "cuGraphCreate": 300, "cuMemAlloc_v2": 40}

    def __init__(self, refuse=False):
        self.refuse = refuse
        self.callback = None
        self.enabled = []
        self.unsubscribed = False

    def subscribe(self, callback, userdata):
        if self.refuse:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        self.callback = callback
        return 99

    def enable_domain(self, on, sub, domain):
        self.enabled.append(("domain", domain))

    def enable_callback(self, on, sub, domain, cbid):
        self.enabled.append((domain, cbid))

    def unsubscribe(self, sub):
        self.unsubscribed = True


class _Side:
    ptr = 0x7F00

    def synchronize(self):
        pass


@pytest.fixture
def fake_cupti(monkeypatch):
    fake = FakeCupti()
    monkeypatch.setattr(doctor_mod, "load_cupti", lambda: fake)
    monkeypatch.setattr(doctor_mod._cuda, "ensure_device", lambda: 0)
    monkeypatch.setattr(doctor_mod, "_side", lambda device: _Side())
    monkeypatch.setattr(doctor_mod.Device, "current", classmethod(lambda cls: _Side()))
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    return fake


def test_doctor_runs_fn_warm_then_observed(fake_cupti):
    runs = []

    def fn(x, scale=1):
        runs.append((x, scale, fake_cupti.callback is not None))
        if fake_cupti.callback is not None:
            fire(fake_cupti.callback.__self__, "cudaStreamSynchronize")  # breaks
            fire(fake_cupti.callback.__self__, "cudaLaunchKernel", {48: 0x7F00})

    d = pcg.doctor(fn, 3, scale=2, warmup=2)
    assert runs == [(3, 2, False), (3, 2, False), (3, 2, True)]
    assert fake_cupti.unsubscribed
    assert ("domain", 2) in fake_cupti.enabled
    assert {(1, 120), (1, 121), (1, 40)} <= set(fake_cupti.enabled)
    assert (1, 300) not in fake_cupti.enabled  # graph calls are not watched
    assert [(p.call, p.line) for p in d.problems] == [
        ("cudaStreamSynchronize", line_of(fn, "# breaks"))]
    assert d.warmup == 2 and d.calls == 2 and not d.ok


def test_doctor_ok_and_argument_errors(fake_cupti):
    d = pcg.doctor(lambda: None, warmup=0)
    assert d.ok and "ok: no call in fn" in str(d)
    with pytest.raises(pcg.ArgumentError, match="fn must be callable"):
        pcg.doctor(3)
    with pytest.raises(pcg.ArgumentError, match="warmup must be an int >= 0"):
        pcg.doctor(lambda: None, warmup=-1)


def test_doctor_unsubscribes_when_fn_raises(fake_cupti):
    def bad():
        if fake_cupti.callback is not None:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        pcg.doctor(bad)
    assert fake_cupti.unsubscribed


def test_doctor_inside_fn_is_refused_not_deadlocked(fake_cupti):
    def nested():
        if fake_cupti.callback is not None:
            fake_cupti.refuse = True  # CUPTI has its one subscriber
            pcg.doctor(lambda: None, warmup=0)

    with pytest.raises(doctor_mod.DoctorUnavailable, match="one subscriber"):
        pcg.doctor(nested, warmup=0)


def test_doctor_says_when_cupti_is_held(fake_cupti):
    fake_cupti.refuse = True
    with pytest.raises(doctor_mod.DoctorUnavailable, match="one subscriber at a time"):
        pcg.doctor(lambda: None, warmup=0)


def test_doctor_without_cupti_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti raises ImportError
    with pytest.raises(doctor_mod.DoctorUnavailable, match="cupti-python") as info:
        pcg.doctor(lambda: None)
    assert "pip install cupti-python" in str(info.value)
    assert isinstance(info.value, pcg.PyCudaGraphError)
