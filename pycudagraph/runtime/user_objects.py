"""CUDA user objects: tie a Python object's release to the graphs and execs that hold it.

A user object (``cudaUserObjectCreate``) is a reference count CUDA keeps; graphs hold
references (``cudaGraphRetainUserObject``), and so do their clones, the execs made from
them and, while they run, launches. When the last reference goes, CUDA calls the
object's destructor **on an internal thread, possibly while it holds its own locks**.

Running Python there would take the GIL inside CUDA: a thread holding the GIL while it
waits for one of those CUDA locks would deadlock. So the destructor pycudagraph registers
is C code that runs no Python and takes no lock: the C library's ``sem_post`` on a
semaphore allocated for the object. A reaper thread (started while user objects are
pending, polling every 20 ms) and every :func:`collect` call find the posted semaphores
with ``sem_trywait`` and drop the Python object then, in an ordinary Python thread. The
Python object is released shortly after CUDA drops the last reference, never inside
CUDA.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import weakref

from .._cuda import call, ensure_device, rt
from ..errors import ArgumentError, NotSupportedError

__all__ = ["UserObject", "GraphUserObjects", "collect", "pending", "holding"]

#: The node tables of graphs that retained a user object (and their clones): their
#: execs are never kept for reuse, whose raw graph would hold the object on.
holding: "weakref.WeakSet" = weakref.WeakSet()

_SEM_BYTES = 64  # sem_t is 32 bytes on glibc x86-64/aarch64; room to spare
_POLL_S = 0.02
_libc = None
_lock = threading.Lock()
_pending: dict[int, object] = {}  # semaphore address -> the Python object kept alive
_reaper: threading.Thread | None = None


def _c():
    """The C library with ``sem_init/sem_post/sem_trywait/sem_destroy``, ``malloc/free``."""
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None)
        for name in ("sem_init", "sem_post", "sem_trywait", "sem_destroy", "malloc", "free"):
            if not hasattr(lib, name):
                raise NotSupportedError("user objects", "a C library with POSIX semaphores",
                                        f"a C library without {name}")
        lib.malloc.restype = ctypes.c_void_p
        lib.malloc.argtypes = [ctypes.c_size_t]
        lib.free.argtypes = [ctypes.c_void_p]
        lib.sem_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint]
        lib.sem_trywait.argtypes = [ctypes.c_void_p]
        lib.sem_destroy.argtypes = [ctypes.c_void_p]
        _libc = lib
    return _libc


def destructor_address() -> int:
    """The address of ``sem_post``: the destructor CUDA calls (C, no Python, no lock)."""
    return ctypes.cast(_c().sem_post, ctypes.c_void_p).value


def _new_semaphore() -> int:
    lib = _c()
    sem = lib.malloc(_SEM_BYTES)
    if not sem:
        raise MemoryError("malloc failed for a user object's semaphore")
    if lib.sem_init(sem, 0, 0) != 0:
        lib.free(sem)
        raise OSError(ctypes.get_errno(), "sem_init failed for a user object")
    return sem


def collect() -> int:
    """Drop the Python objects whose user objects CUDA has destroyed; returns how many.

    Runs by itself every 20 ms while user objects are pending; call it to release them
    at a known point (after ``exe.close()`` and ``graph.close()``, say).
    """
    lib = _c() if _pending else None
    released = []
    with _lock:
        for sem in list(_pending):
            if lib.sem_trywait(sem) == 0:  # posted by the destructor
                released.append(_pending.pop(sem))
                lib.sem_destroy(sem)
                lib.free(sem)
    n = len(released)
    released.clear()  # the objects' last references go here, outside the lock
    return n


def pending() -> int:
    """How many user objects CUDA has not destroyed yet."""
    return len(_pending)


def _reap() -> None:
    stop = threading.Event()
    while _pending:
        stop.wait(_POLL_S)
        try:
            collect()
        except Exception:  # noqa: BLE001 - the reaper never dies of one bad object
            pass
    global _reaper
    with _lock:
        _reaper = None
        if _pending:  # one arrived as we left
            _start_reaper()


def _start_reaper() -> None:
    global _reaper
    if _reaper is None:
        _reaper = threading.Thread(target=_reap, name="pycudagraph-user-objects", daemon=True)
        _reaper.start()


def _release_own(handle, count: int) -> None:
    """The Python wrapper's references go (finalizer: never raises)."""
    try:
        if count:
            rt.cudaUserObjectRelease(handle, count)
    except Exception:  # noqa: BLE001 - at exit CUDA may be gone
        pass


class UserObject:
    """A CUDA user object keeping ``obj`` alive until CUDA drops its last reference
    (``cudaUserObjectCreate``).

    The Python wrapper owns one reference, released when it is collected or
    :meth:`close`\\ d; each graph given it with :meth:`Graph.retain_user_object` owns more
    (and its clones and execs in turn). ``obj`` is released once every one is gone.

    Parameters
    ----------
    obj : object
        Any Python object (a buffer, an array, a model) to keep alive.
    """

    __slots__ = ("_handle", "_sem", "_fin", "__weakref__")

    def __init__(self, obj):
        ensure_device()
        sem = _new_semaphore()
        try:
            handle = call(rt.cudaUserObjectCreate, sem, rt.cudaHostFn_t(destructor_address()), 1,
                          int(rt.cudaUserObjectFlags.cudaUserObjectNoDestructorSync))
        except Exception:
            _c().sem_destroy(sem)
            _c().free(sem)
            raise
        with _lock:
            _pending[sem] = obj
            _start_reaper()
        self._handle = handle
        self._sem = sem
        self._fin = weakref.finalize(self, _release_own, handle, 1)
        self._fin.atexit = False

    @property
    def handle(self):
        """The raw ``cudaUserObject_t``."""
        if not self._fin.alive:
            raise ArgumentError("this UserObject was closed: its references were handed back")
        return self._handle

    @property
    def released(self) -> bool:
        """Whether CUDA destroyed the object and its Python object was dropped."""
        collect()
        return self._sem not in _pending

    def retain(self, count: int = 1) -> None:
        """Take ``count`` more references for this wrapper (``cudaUserObjectRetain``)."""
        count = _count(count)
        have = self._refs()
        call(rt.cudaUserObjectRetain, self.handle, count)
        self._fin.detach()
        self._fin = weakref.finalize(self, _release_own, self._handle, have + count)
        self._fin.atexit = False

    def release(self, count: int = 1) -> None:
        """Give back ``count`` of this wrapper's references (``cudaUserObjectRelease``)."""
        count = _count(count)
        have = self._refs()
        if count > have:
            raise ArgumentError(f"release({count}): this wrapper holds {have} reference(s)")
        call(rt.cudaUserObjectRelease, self.handle, count)
        self._fin.detach()
        self._fin = weakref.finalize(self, _release_own, self._handle, have - count)
        self._fin.atexit = False
        if have == count:  # none left: the handle may be gone once the graphs drop theirs
            self._fin()

    def _refs(self) -> int:
        info = self._fin.peek()
        return info[2][1] if info else 0

    def close(self) -> None:
        """Give back all of this wrapper's references now (``cudaUserObjectRelease``;
        graphs and execs keep theirs); idempotent."""
        self._fin()

    #: Drop the Python objects of user objects CUDA has destroyed (:func:`collect`).
    collect = staticmethod(collect)

    def __repr__(self) -> str:
        return f"<pycudagraph.UserObject 0x{int(self._handle):x} refs={self._refs()}>"


def _count(count) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ArgumentError(f"count must be a positive int, got {count!r}")
    return count


def _user_object(obj) -> UserObject:
    return obj if isinstance(obj, UserObject) else UserObject(obj)


class GraphUserObjects:
    """User-object methods of :class:`~pycudagraph.Graph` (mixed into it)."""

    __slots__ = ()

    def retain_user_object(self, obj, count: int = 1) -> UserObject:
        """Make this graph hold ``obj`` until CUDA drops the graph, its clones and every
        exec made from them (``cudaGraphRetainUserObject``).

        Parameters
        ----------
        obj : object or UserObject
            A Python object (wrapped in a new :class:`UserObject`) or a UserObject.
        count : int
            References the graph takes.

        Returns
        -------
        UserObject
            Drop it (or ``close()`` it) to leave the graph the only holder.
        """
        uo = _user_object(obj)
        call(rt.cudaGraphRetainUserObject, self.handle, uo.handle, _count(count), 0)
        holding.add(self.table)
        return uo

    def release_user_object(self, uo: UserObject, count: int = 1) -> None:
        """Give back ``count`` of this graph's references to ``uo``
        (``cudaGraphReleaseUserObject``); execs made earlier keep theirs."""
        if not isinstance(uo, UserObject):
            raise ArgumentError(f"release_user_object needs a UserObject, got {type(uo).__name__}")
        call(rt.cudaGraphReleaseUserObject, self.handle, uo.handle, _count(count))
