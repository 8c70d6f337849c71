"""User objects on the CPU: the destructor CUDA is given is C ``sem_post`` (no Python),
the reaper drops the Python object once it is posted, and the raw calls are made with
the right arguments (recorded in place of cuda.bindings). On the GPU (marker ``gpu``): an
object lives as long as graphs, clones and execs hold it, and is released while Python is busy."""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import weakref

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph.runtime import user_objects
from tests.support.fakes import fake_graph

_OK = rt.cudaError_t.cudaSuccess


class Payload:
    pass


@pytest.fixture
def cuda(monkeypatch, cpu_device):
    """Recorders for the user-object calls; ``made`` holds (ptr, destroy) per object."""
    calls, made = [], []

    def create(ptr, destroy, refs, flags):
        made.append((ptr, int(destroy)))
        calls.append(("create", refs, flags))
        return _OK, rt.cudaUserObject_t(0x5000 + len(made))

    def rec(name):
        def fn(*args):
            calls.append((name,) + tuple(int(a) if not isinstance(a, int) else a for a in args))
            return (_OK,)
        fn.__name__ = name
        return fn
    create.__name__ = "cudaUserObjectCreate"
    monkeypatch.setattr(rt, "cudaUserObjectCreate", create)
    for name in ("cudaUserObjectRetain", "cudaUserObjectRelease", "cudaGraphRetainUserObject",
                 "cudaGraphReleaseUserObject"):
        monkeypatch.setattr(rt, name, rec(name))
    return calls, made


def _destroy(ptr, destroy):
    """Call the destructor as CUDA would: a C function pointer, with the GIL released."""
    ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(destroy)(ptr)


def test_the_destructor_is_c_sem_post(cuda):
    calls, made = cuda
    pcg.UserObject(Payload())
    ptr, destroy = made[0]
    assert destroy == user_objects.destructor_address()
    libc = ctypes.CDLL(None)
    assert destroy == ctypes.cast(libc.sem_post, ctypes.c_void_p).value
    assert calls[0] == ("create", 1, int(rt.cudaUserObjectFlags.cudaUserObjectNoDestructorSync))
    _destroy(ptr, destroy)
    user_objects.collect()


def test_the_object_lives_until_cuda_destroys_it(cuda):
    calls, made = cuda
    obj = Payload()
    ref = weakref.ref(obj)
    uo = pcg.UserObject(obj)
    del obj
    gc.collect()
    assert ref() is not None and not uo.released
    assert user_objects.collect() == 0
    _destroy(*made[0])  # CUDA dropped the last reference
    assert uo.released and ref() is None


def test_the_reaper_releases_without_a_collect_call(cuda):
    calls, made = cuda
    obj = Payload()
    ref = weakref.ref(obj)
    pcg.UserObject(obj)
    del obj
    t = threading.Thread(target=_destroy, args=made[0])  # from another thread, as CUDA does
    t.start()
    t.join()
    deadline = time.monotonic() + 5
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ref() is None


def test_graph_retain_and_release_and_the_wrapper_references(cuda):
    calls, made = cuda
    g = fake_graph()
    uo = g.retain_user_object(Payload(), count=2)
    assert calls[-1] == ("cudaGraphRetainUserObject", g.table.h, 0x5001, 2, 0)
    g.release_user_object(uo)
    assert calls[-1] == ("cudaGraphReleaseUserObject", g.table.h, 0x5001, 1)
    uo.retain(2)
    assert calls[-1] == ("cudaUserObjectRetain", 0x5001, 2) and uo._refs() == 3
    uo.release()
    assert calls[-1] == ("cudaUserObjectRelease", 0x5001, 1) and uo._refs() == 2
    with pytest.raises(pcg.ArgumentError, match="holds 2 reference"):
        uo.release(3)
    del uo
    gc.collect()
    assert calls[-1] == ("cudaUserObjectRelease", 0x5001, 2)  # the wrapper's share, once
    _destroy(*made[0])
    user_objects.collect()


@pytest.mark.parametrize("count", [0, -1, True, 1.0])
def test_counts_are_checked_before_any_call(cuda, count):
    calls, made = cuda
    g = fake_graph()
    uo = pcg.UserObject(Payload())
    n = len(calls)
    with pytest.raises(pcg.ArgumentError, match="count must be a positive int"):
        g.retain_user_object(uo, count=count)
    with pytest.raises(pcg.ArgumentError, match="count must be a positive int"):
        uo.retain(count)
    assert len(calls) == n
    with pytest.raises(pcg.ArgumentError, match="needs a UserObject"):
        g.release_user_object(object())
    uo.close()
    with pytest.raises(pcg.ArgumentError, match="was closed"):
        uo.handle
    _destroy(*made[0])
    user_objects.collect()


def test_a_failed_create_raises_and_keeps_nothing(monkeypatch, cpu_device):
    def create(ptr, destroy, refs, flags):
        return rt.cudaError_t.cudaErrorInvalidValue, None
    create.__name__ = "cudaUserObjectCreate"
    monkeypatch.setattr(rt, "cudaUserObjectCreate", create)
    before = user_objects.pending()
    with pytest.raises(pcg.CudaError, match="cudaUserObjectCreate"):
        pcg.UserObject(Payload())
    assert user_objects.pending() == before


# On the GPU ---------------------------------------------------------------------------

class _Payload:
    pass


def _released(ref, seconds=5.0):
    import time
    deadline = time.monotonic() + seconds
    while ref() is not None and time.monotonic() < deadline:
        pcg.UserObject.collect()
        gc.collect()
        time.sleep(0.01)
    return ref() is None


@pytest.mark.gpu
def test_user_object_lives_as_long_as_graphs_clones_and_execs(stream):
    import weakref
    obj = _Payload()
    ref = weakref.ref(obj)
    g = pcg.Graph()
    g.add_empty()
    uo = g.retain_user_object(obj)
    del obj
    clone = g.clone()
    exe = g.instantiate()
    uo.close()
    g.close()
    assert not _released(ref, 0.3)  # the clone and the exec hold it
    clone.close()
    exe.launch(stream)
    assert not _released(ref, 0.3)
    stream.synchronize()
    exe.close()
    del clone, exe, g
    assert _released(ref)


@pytest.mark.gpu
def test_user_object_released_from_cuda_thread_while_python_is_busy(stream):
    """CUDA's destructor thread runs no Python: a thread holding the GIL in a tight loop
    while CUDA destroys the graph does not block the release (the reaper does it after)."""
    import weakref
    obj = _Payload()
    ref = weakref.ref(obj)
    g = pcg.Graph()
    g.add_empty()
    g.retain_user_object(obj).close()
    del obj
    done = threading.Event()

    def spin():
        x = 0
        while not done.is_set():
            x += 1
    t = threading.Thread(target=spin)
    t.start()
    g.close()
    del g
    try:
        assert _released(ref)
    finally:
        done.set()
        t.join()
