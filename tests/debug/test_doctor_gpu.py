"""``pcg.doctor`` and ``pcg.capture``'s failure report on the GPU, each check in a child
process of its own (tests/support/watchdog: CUPTI's callbacks and a broken capture stay
out of the test run's process). The functions checked are in tests/debug/doctor_cases.py;
the lines expected are the ones marked ``# breaks: <tag>`` there, read from the source.

* PyTorch: ``.item()``, ``torch.cuda.synchronize()`` and a pageable ``.cpu()`` are the
  three problems, at their lines, and nothing else; a matmul + ReLU + sum is ``ok``; an
  async copy into pageable memory is named as that; a capture of the three-breaker function
  fails naming the ``.item()`` line, and PyTorch works afterwards.
* CuPy: ``cupy.asnumpy``, ``Device().synchronize()`` and ``float(x.sum())`` the same; an
  elementwise + reduction function is ``ok``; a capture fails naming the ``asnumpy`` line.

Needs cupti-python (``pip install cupti-python``): without it the doctor checks skip,
saying so.
"""

import importlib.util

import pytest

from tests.support.watchdog import run_ok

pytestmark = pytest.mark.gpu

NO_CUPTI = importlib.util.find_spec("cupti") is None
needs_cupti = pytest.mark.skipif(NO_CUPTI, reason="cupti-python is not installed (pip install "
                                 "cupti-python): pcg.doctor needs CUPTI's callbacks")

FRAMEWORK = """
import sys
try:
    import {0}
except ImportError:
    print("SKIP {0} is not installed"); sys.exit(0)
import pycudagraph as pcg
from tests.debug import doctor_cases as cases
"""

CUPTI = """
try:
    from cupti import cupti  # noqa: F401
except Exception as exc:
    print(f"SKIP cupti-python is not importable: {exc}"); sys.exit(0)

def check_lines(report, fn):
    print(report)
    marks = cases.marked(fn)
    got = {p.line: p for p in report.problems}
    assert sorted(got) == sorted(marks.values()), (sorted(got), marks, str(report))
    assert all(p.file == cases.__file__ for p in report.problems), report.problems
    assert all(p.count == 1 and p.what and p.fix for p in report.problems), report.problems
    return {tag: got[line] for tag, line in marks.items()}
"""


def doctor_child(framework: str, body: str) -> str:
    return run_ok(FRAMEWORK.format(framework) + CUPTI + body)


def capture_child(framework: str, body: str) -> str:
    return run_ok(FRAMEWORK.format(framework) + body)


@needs_cupti
def test_doctor_lists_pytorch_breakers_at_their_lines():
    doctor_child("torch", """
x = torch.randn(4096, device="cuda")
d = pcg.doctor(cases.torch_three, x)
assert not d.ok
by = check_lines(d, cases.torch_three)
assert by["item"].what.startswith(".item()"), by["item"]
assert "Synchronize" in by["item"].call, by["item"]
assert "cudaDeviceSynchronize" in by["synchronize"].call, by["synchronize"]
assert by["synchronize"].inner.startswith("torch.cuda"), by["synchronize"]
assert by["cpu"].what.startswith(".cpu()") and "Synchronize" in by["cpu"].call, by["cpu"]
text = str(d)
assert text.startswith("pcg.doctor: 3 line(s) in fn would break a capture"), text
assert "v = y.sum().item()" in text and "h = y.cpu()" in text

w = torch.randn(64, 64, device="cuda")
clean = pcg.doctor(cases.torch_clean, x.view(64, 64), w)
print(clean)
assert clean.ok and str(clean).startswith("ok: no call in fn would break a capture"), clean
assert clean.calls > 0, clean  # the run was observed
import time
eager = []
for _ in range(5):  # the same call unobserved, timed the same way (no synchronize inside)
    t0 = time.perf_counter()
    cases.torch_clean(x.view(64, 64), w)
    eager.append(time.perf_counter() - t0)
torch.cuda.synchronize()
print(f"DOCTOR COST: {clean.calls} CUDA calls; observed run {clean.seconds * 1e3:.3f} ms, "
      f"eager run {min(eager) * 1e3:.3f} ms, "
      f"{(clean.seconds - min(eager)) / clean.calls * 1e6:.1f} us per call")
print("OK")
""")


@needs_cupti
def test_doctor_names_an_async_copy_into_pageable_memory():
    doctor_child("torch", """
x = torch.randn(1 << 16, device="cuda")
host = torch.empty(1 << 16)  # pageable
d = pcg.doctor(cases.torch_pageable, x, host)
by = check_lines(d, cases.torch_pageable)
p = by["pageable"]
assert "cudaMemcpyAsync (pageable host memory)" in p.calls, p
assert p.categories == ["pageable_copy"], p
pinned = torch.empty(1 << 16, pin_memory=True)
into_pinned = pcg.doctor(cases.torch_pageable, x, pinned)
print(into_pinned)  # the same copy into pinned memory is no pageable copy
assert not any("pageable" in p.call for p in into_pinned.problems), into_pinned
print("OK")
""")


def test_failed_pytorch_capture_names_the_users_line():
    capture_child("torch", """
x = torch.randn(4096, device="cuda")
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    cases.torch_three(x)  # warm-up
torch.cuda.synchronize()
s = pcg.Stream.wrap(side)
err = None
with torch.cuda.stream(side):
    try:
        with pcg.capture(s):
            cases.torch_three(x)
    except pcg.CaptureError as exc:
        err = exc
assert err is not None, "the capture did not fail"
print(err)
line = cases.marked(cases.torch_three)["item"]
assert err.failed_at is not None and err.failed_at.endswith(f"doctor_cases.py:{line}"), \\
    err.failed_at
assert "`v = y.sum().item()  # breaks: item`" in str(err) and "pcg.doctor" in str(err)
assert pcg.capture_status(s) == "none"
y = (x * 3).sum().item()  # PyTorch works afterwards
assert abs(y - 3 * x.sum().item()) <= 1e-3 * max(1.0, abs(y))
print("OK")
""")


@needs_cupti
def test_doctor_lists_cupy_breakers_at_their_lines():
    doctor_child("cupy", """
x = cupy.arange(4096, dtype=cupy.float32) / 4096
d = pcg.doctor(cases.cupy_three, x)
by = check_lines(d, cases.cupy_three)
assert by["asnumpy"].what.startswith("copies the array into a NumPy array"), by["asnumpy"]
assert "cudaDeviceSynchronize" in by["synchronize"].call, by["synchronize"]
assert by["float"].what.startswith("turns a device value into a Python number"), by["float"]
clean = pcg.doctor(cases.cupy_clean, x)
print(clean)
assert clean.ok and clean.calls > 0, clean
print("OK")
""")


def test_failed_cupy_capture_names_the_users_line():
    capture_child("cupy", """
x = cupy.arange(4096, dtype=cupy.float32)
cs = cupy.cuda.Stream(non_blocking=True)
with cs:
    cases.cupy_three(x)  # warm-up
cs.synchronize()
s = pcg.Stream.wrap(cs)
err = None
with cs:
    try:
        with pcg.capture(s):
            cases.cupy_three(x)
    except pcg.CaptureError as exc:
        err = exc
assert err is not None, "the capture did not fail"
print(err)
print("failed_call:", err.failed_call)
# asnumpy's copy breaks it (or, where CUDA let that copy pass, the synchronize after it)
marks = cases.marked(cases.cupy_three)
where = {f"doctor_cases.py:{marks[tag]}": tag for tag in ("asnumpy", "synchronize")}
assert err.failed_at is not None and err.failed_at.rsplit("/", 1)[-1] in where, err.failed_at
tag = where[err.failed_at.rsplit("/", 1)[-1]]
print("broke at", tag)
assert {"asnumpy": "`h = cupy.asnumpy(y)  # breaks: asnumpy`",
        "synchronize": "`cupy.cuda.Device().synchronize()  # breaks: synchronize`"}[tag] in str(err)
assert pcg.capture_status(s) == "none"
assert float((x * 2).sum()) == float(x.sum()) * 2  # CuPy works afterwards
print("OK")
""")
