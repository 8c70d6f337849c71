"""Test configuration: GPU tests (marker ``gpu``) skip with a reason when no GPU is usable,
and the compile cache of the whole session (subprocesses included) is a temporary folder,
never the user's ``~/.cache/pycudagraph``."""

import os
import shutil
import tempfile

import pytest

# Before anything compiles: every compile of this session, and of the commands it runs,
# is cached in a folder of its own that goes at the end.
_CACHE = tempfile.mkdtemp(prefix="pycudagraph-test-cache-")
os.environ["PYCUDAGRAPH_CACHE_DIR"] = _CACHE

from pycudagraph import _cuda  # noqa: E402


def _gpu_reason():
    try:
        _cuda.ensure_device()
        return None
    except Exception as exc:  # no driver, no device
        return f"no usable NVIDIA GPU/driver here ({type(exc).__name__}: {exc})"


_REASON = _gpu_reason()


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    skip = pytest.mark.skip(reason=_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def helpers():
    import pycudagraph as pcg
    return pcg.Module.from_file("helpers.cu")


@pytest.fixture
def stream():
    import pycudagraph as pcg
    s = pcg.Stream()
    yield s
    s.synchronize()


@pytest.fixture
def cpu_device(monkeypatch):
    """Without a GPU, pretend device 0 is current in this thread, so checks made before
    any CUDA call can be tested with fake kernels (tests/support/fakes.py). With a GPU: nothing."""
    if _REASON is not None:
        from pycudagraph._cuda.context import thread_state
        monkeypatch.setattr(thread_state, "device", 0)
