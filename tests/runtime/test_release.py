"""CPU tests: the finalizer every owning object registers (``_lifetime.release``): it runs
its destroy once, whether the owner is collected or closed first, never raises, waits while
a capture is open, can be detached, and leaves nothing behind. Plain Python owners and
destroy functions: no CUDA call."""

import threading
import weakref

from pycudagraph import _lifetime
from pycudagraph._cuda import check


class Owner:
    pass


def test_runs_once_when_the_owner_is_collected():
    done = []
    owner = Owner()
    fin = _lifetime.release(owner, done.append, 7)
    assert fin.alive and done == []
    del owner
    assert done == [7] and not fin.alive
    fin()  # a close() after the collection: nothing more
    assert done == [7]


def test_runs_once_when_called_then_not_again_at_collection():
    done = []
    owner = Owner()
    fin = _lifetime.release(owner, done.append, 8)
    fin()
    fin()
    del owner
    assert done == [8]


def test_detached_never_runs():
    done = []
    owner = Owner()
    fin = _lifetime.release(owner, done.append, 9)
    assert fin.detach() == (done.append, 9) and fin.detach() is None
    del owner
    fin()
    assert done == [] and not fin.alive


def test_never_raises():
    def boom(handle):
        raise RuntimeError(f"destroy of {handle} failed")
    owner = Owner()
    fin = _lifetime.release(owner, boom, 1)
    fin()  # swallowed: there is nobody left to tell
    assert not fin.alive


def test_waits_while_a_capture_is_open():
    done = []
    owner = Owner()
    _lifetime.release(owner, done.append, 3)
    check.capture_watchers.append([])
    try:
        del owner
        assert done == []  # a destroy inside a capture would invalidate it
    finally:
        check.capture_watchers.pop()
    _lifetime.flush_deferred()
    assert done == [3]


def test_two_threads_closing_at_once_run_it_once():
    done = []
    owners = [Owner() for _ in range(200)]
    fins = [_lifetime.release(o, done.append, i) for i, o in enumerate(owners)]
    go = threading.Barrier(2)

    def close_all():
        go.wait()
        for f in fins:
            f()
    threads = [threading.Thread(target=close_all) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(done) == list(range(200))


def test_leaves_nothing_behind():
    owner = Owner()
    fin = _lifetime.release(owner, lambda h: None, 0)
    gone = weakref.ref(fin)
    del owner, fin
    assert gone() is None  # no cycle through the weak reference's callback: freed at once
