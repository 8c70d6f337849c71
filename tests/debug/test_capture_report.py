"""CPU tests of what explains a broken capture: the table of calls that break one and the
explanation a user's line picks (pycudagraph/capture/breakers.py), the user's line found in
live frames and in tracebacks (pycudagraph/capture/user_frames.py), and the error
``pcg.capture`` raises when its block breaks (the driver side stood in). "Framework" code is
compiled under a ``torch.*`` / ``cupy_backends`` module name so that there are frames to
skip."""

from __future__ import annotations

import inspect

import pytest

import pycudagraph as pcg
from pycudagraph.capture import breakers, user_frames


def line_of(fn, text: str) -> int:
    """The line number of the line of ``fn``'s source holding ``text``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1, (text, hits)
    return hits[0]


# --- the table of breaking calls -------------------------------------------------------

def test_names_and_categories():
    assert breakers.base_name("cuMemcpyDtoHAsync_v2_ptsz") == ("cuMemcpyDtoHAsync", True)
    assert breakers.base_name("cudaMemcpyAsync_ptsz_v7000") == ("cudaMemcpyAsync", True)
    assert breakers.base_name("cuMemAlloc_v2") == ("cuMemAlloc", False)
    assert breakers.category("cudaStreamSynchronize_v3020") == "sync"
    assert breakers.category("cuMemcpyDtoH_v2") == "sync_copy"
    assert breakers.category("cudaFree") == "free"
    assert breakers.category("cudaMallocAsync") is None  # stream-ordered: captured
    assert breakers.category("cudaMemcpyAsync") is None  # only with pageable memory
    assert breakers.category("cudaStreamIsCapturing") is None
    assert breakers.category("cudaGetDevice") is None


def test_the_line_picks_the_explanation():
    what, fix = breakers.explain(["sync"], "v = x.sum().item()")
    assert what.startswith(".item()") and "device" in fix
    what, fix = breakers.explain(["pageable_copy", "sync"], "h = x.cpu()")
    assert what.startswith(".cpu()") and "pin_memory=True" in fix
    what, fix = breakers.explain(["sync"], "torch.cuda.synchronize()")
    assert what.startswith("waits on the host") and fix.startswith("remove it from the captured")
    # a hint explains only the categories it names: a print on the legacy stream is that
    assert breakers.explain(["legacy_stream"], "print(x + 1)") == \
        breakers.CATEGORIES["legacy_stream"]
    assert breakers.explain(["free"], "torch.cuda.empty_cache()")[0].startswith("returns")
    assert breakers.explain([], "x") == ("", "")


# --- frames ----------------------------------------------------------------------------

def test_user_place_skips_framework_frames():
    seen = []
    ns = {"__name__": "torch.cuda", "seen": seen, "inspect": inspect}
    exec(compile("def synchronize():\n    seen.append(inspect.currentframe())\n",
                 "fake/torch/cuda/__init__.py", "exec"), ns)

    def user_code():
        ns["synchronize"]()  # the user's line

    user_code()
    place = user_frames.user_place(seen[0])
    assert place.file == __file__ and place.line == line_of(user_code, "the user's line")
    assert place.function.endswith("user_code") and place.inner == "torch.cuda.synchronize"
    assert place.source == 'ns["synchronize"]()  # the user\'s line'
    assert user_frames.is_framework("cupy_backends.cuda.api.runtime")
    assert user_frames.is_framework("importlib._bootstrap", "<frozen importlib._bootstrap>")
    assert not user_frames.is_framework("tests.debug.test_doctor_cpu")


def test_traceback_place_and_cupy_raw_name():
    ns = {"__name__": "cupy_backends.cuda.api.runtime"}
    exec(compile("def check_status(s):\n    raise RuntimeError('cudaErrorStreamCaptureUnsupported')"
                 "\ndef streamSynchronize(s):\n    check_status(s)\n",
                 "cupy_backends/cuda/api/runtime.pyx", "exec"), ns)

    def user_code():
        ns["streamSynchronize"](0)  # breaks

    try:
        user_code()
    except RuntimeError as exc:
        place, raw = user_frames.traceback_place(exc.__traceback__)
    assert raw == "cudaStreamSynchronize"
    assert place.line == line_of(user_code, "# breaks") and place.file == __file__
    assert place.inner == "cupy_backends.cuda.api.runtime.streamSynchronize"
    assert user_frames.cupy_raw_name("cupy_backends.cuda.api.driver", "launchKernel") == \
        "cuLaunchKernel"
    assert user_frames.cupy_raw_name("cupy._core.core", "get") == ""


# --- what pcg.capture says when the block breaks ---------------------------------------

def _failed_capture(block):
    """``capture.__exit__`` on the exception ``block`` raises, the driver side stood in."""
    cap = pcg.capture(0x1234)
    cap._flow_close = lambda: ""
    cap._end = lambda: ("invalidated", 0, None)
    try:
        block()
    except Exception as exc:  # noqa: BLE001 - handed to __exit__ as a with statement does
        with pytest.raises(pcg.CaptureError) as info:
            cap.__exit__(type(exc), exc, exc.__traceback__)
        return info.value
    raise AssertionError("the block did not raise")


def test_capture_error_names_the_users_line_and_the_framework_call():
    ns = {"__name__": "torch.cuda"}
    exec(compile("def synchronize():\n    raise RuntimeError('CUDA error: operation not "
                 "permitted when stream is capturing')\n", "fake/torch/cuda/__init__.py",
                 "exec"), ns)

    def block():
        ns["synchronize"]()  # torch.cuda.synchronize() in the captured block

    err = _failed_capture(block)
    where = f"{user_frames.Place(__file__, line_of(block, '# torch.cuda'), '')}"
    assert err.failed_at == where
    text = str(err)
    assert f"stream capture failed at {where} (" in text
    assert "in torch.cuda.synchronize" in text
    assert "That call waits on the host" in text and "pcg.doctor(fn, *args)" in text
    assert "the block raised RuntimeError" in text


def test_capture_error_names_cupy_raw_call_and_item_hint():
    ns = {"__name__": "cupy_backends.cuda.api.runtime"}
    exec(compile("def check_status(s):\n    raise RuntimeError('cudaErrorStreamCaptureUnsupported')"
                 "\ndef memcpy(*a):\n    check_status(1)\n", "runtime.pyx", "exec"), ns)

    class Value:
        def item(self):
            ns["memcpy"]()

    def block():
        Value().item()  # reads on the host

    err = _failed_capture(block)
    assert err.failed_call == "cudaMemcpy"
    assert "the failing call was cudaMemcpy" in str(err)
    # the user's class lives here, so its method is the innermost user line
    assert err.failed_at.endswith(f":{line_of(Value.item, 'ns[')}")


def test_capture_error_for_a_python_error_gives_no_cuda_advice():
    def block():
        if True:
            raise ValueError("nope")

    err = _failed_capture(block)
    assert "the block raised ValueError: nope" in str(err)
    assert "That call" not in str(err) and err.failed_call is None
    assert err.failed_at.endswith(f":{line_of(block, 'raise ValueError')}")
