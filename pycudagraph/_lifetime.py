"""Lifetime: finalizers that never raise, the ledger of what a graph or exec keeps alive,
deferred frees, and a quiet process exit.

Each owning object registers ``release(obj, destroy_fn, handle)`` with the raw destroy
call and the handle (never the object itself), as cuda.core does with its small
holders. ``destroy_fn`` is a ``cuda.bindings`` function; its error code is ignored
because there is nobody left to tell.

A destroy that comes due while a ``pcg.capture`` block is active (the garbage collector
can run anywhere) is deferred until the capture ends: ``cudaFree`` or
``cudaGraphDestroy`` inside a capture would invalidate it.

A :class:`Ledger` is the one place a graph or an exec records the Python objects its
nodes point at (buffers, arrays, callables, kernels, events, child graphs), and the
objects an update replaced while a launch may still read them. Every live ledger is
findable (:func:`holders_of`), so ``DeviceBuffer.free()`` can tell whether a graph or
exec still points at the buffer and, if one does, defer the ``cudaFree`` until the last
of them lets go (:func:`defer_free`).

At process exit (:mod:`atexit`) open captures are ended and, when host nodes exist,
the device is synchronized so that no host callback runs while Python is shutting down;
after that every finalizer is a no-op.
"""

from __future__ import annotations

import atexit
import sys
import weakref

from ._cuda import check

__all__ = ["release", "flush_deferred", "Ledger", "Releasable", "holders_of", "live_owners",
           "defer_free", "retry_frees",
           "deferred_frees", "register_contents", "on_exit"]

_deferred: list = []


def _run_destroy(destroy_fn, handle) -> None:
    if sys.is_finalizing():
        return
    if check.capture_watchers:
        _deferred.append((destroy_fn, handle))
        return
    try:
        destroy_fn(handle)
    except Exception:  # a finalizer never raises
        pass


def flush_deferred() -> None:
    """Run the destroys deferred during captures (called when the last capture ends)."""
    while _deferred and not check.capture_watchers:
        try:
            destroy_fn, handle = _deferred.pop()
        except IndexError:  # another thread emptied it
            return
        _run_destroy(destroy_fn, handle)


#: The releases not run yet: each is kept alive here until it runs or is detached (its
#: weak reference to the owner alone would die with it).
_armed: set = set()


class Release:
    """``destroy_fn(handle)``, run once: when the owner is collected, or when called (an
    owner's ``close()``). Not at process exit. What :func:`release` makes; lighter than a
    ``weakref.finalize`` (no info record, no exit registry), with the calls this package
    uses of it: call, :meth:`detach`, :attr:`alive`."""

    __slots__ = ("_ref", "_fn", "_handle", "__weakref__")

    def __init__(self, owner, destroy_fn, handle):
        self._fn, self._handle = destroy_fn, handle
        self._ref = weakref.ref(owner, self._owner_gone)
        _armed.add(self)

    def _owner_gone(self, _ref) -> None:
        self()

    def __call__(self) -> None:
        """Run the release now, if it has not run and was not detached; never raises."""
        try:
            _armed.remove(self)  # atomic: of two threads calling at once, one runs it
        except KeyError:
            return
        self._ref = None  # no cycle left through the weak reference's callback
        _run_destroy(self._fn, self._handle)

    def detach(self):
        """Disarm without running; ``(destroy_fn, handle)`` if it was armed, else None."""
        try:
            _armed.remove(self)
        except KeyError:
            return None
        self._ref = None
        return self._fn, self._handle

    @property
    def alive(self) -> bool:
        """Whether it has yet to run (and was not detached)."""
        return self in _armed


def release(owner, destroy_fn, handle) -> Release:
    """Call ``destroy_fn(handle)`` when ``owner`` is collected or ``.close()``\\ d.

    Returns the :class:`Release`; calling it runs the release once.
    """
    return Release(owner, destroy_fn, handle)


# ----------------------------------------------------------------------------------
# Ledgers

#: A weak reference to every live :class:`Ledger` (the ledgers themselves are the record
#: of what is held; this only makes them findable).
_ledgers: set = set()

#: type -> function giving the objects a container kept in a ledger refers to
#: (``ArgPack`` -> its argument values, ``HostCall`` -> its callable and args).
_contents: dict = {}


def register_contents(cls, fn) -> None:
    """Tell the ledgers how to look inside ``cls`` objects (``fn(obj)`` -> iterable)."""
    _contents[cls] = fn


def _ledger_gone(ref) -> None:
    try:  # a weakref callback: may run anywhere, even while the interpreter shuts down
        _ledgers.discard(ref)
        if _pending_frees:
            retry_frees()
    except BaseException:  # noqa: BLE001 - never raises
        pass


class Ledger:
    """What one graph or exec keeps alive.

    ``held`` maps a key to what is kept under it: a graph's table keys each node's entry
    by the node's identity (``id(node)`` -> ``(node, *objects)``), an exec keys its
    :class:`~pycudagraph.nodes.exec_node.ExecNode` records the same way. ``extra`` holds
    what the owner keeps as a whole (captured work, the graph a clone copies, an adopted
    handle's owner). ``retired`` holds objects an update replaced, until the owner knows no
    launch can still read them. ``owner`` names the graph or exec in messages.
    """

    __slots__ = ("held", "shared", "extra", "retired", "closed", "_owner", "__weakref__")

    def __init__(self, held: dict | None = None, owner=None):
        self.held: dict = {} if held is None else held
        self.shared = False  # ``held`` was handed out by share(): copied before it changes
        self.extra: list = []
        self.retired: list = []
        self.closed = False  # the owner was destroyed: it holds, but no longer uses, things
        self._owner = weakref.ref(owner) if owner is not None else None
        _ledgers.add(weakref.ref(self, _ledger_gone))  # hashed now, while it is alive

    def share(self) -> dict:
        """``held`` as it is now, for a copy of the owner to keep (an exec, of its graph's
        entries): the dict itself, which this ledger no longer changes (it copies it before
        its next change, :meth:`writable`). O(1): a graph instantiated or given to an update
        is not walked."""
        self.shared = True
        return self.held

    def writable(self) -> dict:
        """``held``, to change: a copy of it first if it was shared."""
        if self.shared:
            self.held = dict(self.held)
            self.shared = False
        return self.held

    def hold(self, key, *objs) -> None:
        """Keep ``objs`` under ``key``, replacing what was kept there."""
        held = self.writable()
        old = held.get(key)
        if objs:
            held[key] = objs
        elif old is not None:
            del held[key]
        if old is not None and _pending_frees:
            retry_frees()

    def add(self, key, *objs) -> None:
        """Keep ``objs`` under ``key`` in addition to what is kept there."""
        held = self.writable()
        held[key] = held.get(key, ()) + objs

    def keep_also(self, *objs) -> None:
        """Keep ``objs`` for the owner as a whole."""
        self.extra.extend(objs)

    def drop(self, key) -> None:
        """Stop keeping what is under ``key`` (now: nothing can launch it any more)."""
        self.writable().pop(key, None)
        if _pending_frees:
            retry_frees()

    def clear_retired(self) -> None:
        if self.retired:
            self.retired.clear()
            if _pending_frees:
                retry_frees()

    def clear(self) -> None:
        """Keep nothing any more (the owner was destroyed)."""
        if self.shared:  # a copy of the owner still keeps the shared dict
            self.held, self.shared = {}, False
        else:
            self.held.clear()
        self.extra = []
        self.retired = []
        if _pending_frees:
            retry_frees()

    def close(self) -> None:
        """The owner was destroyed but a launch of it may still be in flight: keep what is
        held alive (a host node may still call its callable) without counting as a user
        of it, so a deferred ``free()`` goes ahead (``cudaFree`` waits for the device)."""
        self.closed = True
        if _pending_frees:
            retry_frees()

    def snapshot(self) -> tuple:
        """Everything held, as one tuple (what a copy of the owner must keep)."""
        return tuple(self.held.values()) + tuple(self.extra)

    def live_owner(self):
        """The graph or exec this ledger belongs to, while it lives and is not closed; else
        None."""
        owner = self._owner() if self._owner is not None and not self.closed else None
        return owner

    def owner_name(self) -> str:
        owner = self._owner() if self._owner is not None else None
        return repr(owner) if owner is not None else "a graph or exec being destroyed"

    def uses(self, obj) -> bool:
        """True when ``obj`` is held or retired here (looking inside tuples, lists, dicts
        and registered containers such as argument packs)."""
        if self.closed:
            return False
        return _refers_to((self.held, self.extra, self.retired), obj)

    def __contains__(self, obj) -> bool:
        return _refers_to((self.held, self.extra), obj)


def contents(value):
    """Every object reachable from ``value`` through tuples, lists, dict values and the
    containers registered in ``_contents`` (argument packs, exec records ...), ``value``
    included, each once."""
    stack = [value]
    seen = set()
    while stack:
        v = stack.pop()
        yield v
        t = type(v)
        if t is tuple or t is list:
            items = v
        elif t is dict:
            items = v.values()
        else:
            fn = _contents.get(t)
            if fn is None:
                continue
            items = fn(v)
        if id(v) not in seen:
            seen.add(id(v))
            stack.extend(items)


def _refers_to(value, obj) -> bool:
    return any(v is obj for v in contents(value))


def holders_of(obj, first: bool = False) -> list[str]:
    """Names of the live graphs and execs whose ledgers hold or retired ``obj``
    (only the first one found with ``first=True``).

    Looks through every live ledger: the cost grows with what live graphs hold.
    """
    out = []
    for ref in list(_ledgers):
        ledger = ref()
        if ledger is not None and ledger.uses(obj):
            out.append(ledger.owner_name())
            if first:
                break
    return out


def live_owners(holding=None) -> list:
    """The live graphs and execs (the owners of live ledgers not closed), each once; with
    ``holding``, only those whose ledgers hold or retired it. Looks through every live
    ledger, like :func:`holders_of`. No CUDA call."""
    out = []
    for ref in list(_ledgers):
        ledger = ref()
        owner = ledger.live_owner() if ledger is not None else None
        if owner is not None and (holding is None or ledger.uses(holding)):
            out.append(owner)
    return out


# ----------------------------------------------------------------------------------
# Deferred frees

#: weakrefs to buffers whose ``free()`` was deferred because something still used them.
_pending_frees: list = []


class Releasable:
    """Mixin of objects whose raw release (their ``_fin``) waits for the graphs and execs
    that still use them: buffers (``free()``) and events (``close()``)."""

    __slots__ = ()

    def _holders(self, first: bool = False) -> list[str]:
        return holders_of(self, first)

    def _release(self) -> None:
        self._fin()

    def _release_when_unused(self) -> None:
        """Release now, or (something still uses this) as soon as the last user lets go."""
        if self._holders(first=True):
            defer_free(self)
        else:
            self._release()


def defer_free(buf) -> None:
    """Release ``buf`` (``buf._release()``) once ``buf._holders()`` is empty.

    Checked again whenever a ledger lets something go (a node removed, an update
    replacing a value, an exec synchronized or destroyed, a view collected).
    """
    _pending_frees.append(weakref.ref(buf))


def retry_frees() -> None:
    """Release every deferred buffer that nothing holds any more; never raises (nothing
    to do, the common case, returns at once)."""
    if not _pending_frees:
        return
    for ref in list(_pending_frees):
        buf = ref()
        try:
            if buf is not None and buf._holders(first=True):
                continue
            _pending_frees.remove(ref)
        except ValueError:  # another thread got there first
            continue
        except Exception:  # a finalizer path never raises
            continue
        if buf is not None:
            buf._release()


def deferred_frees() -> list:
    """The buffers whose ``free()`` is waiting for a graph or exec to let go."""
    return [b for b in (r() for r in list(_pending_frees)) if b is not None]


# ----------------------------------------------------------------------------------
# Captures

#: One list per open ``pcg.capture`` block: what work issued through pycudagraph inside
#: it points at (argument packs, buffers, host arrays). The captured graph's ledger takes it.
#: (The list is :data:`pycudagraph._cuda.check.capture_keeps`: the compiled launch feeds it.)
capture_keeps: list = check.capture_keeps


def keep_in_captures(*objs) -> None:
    """Work issued while a capture is open: the captured graph keeps ``objs`` alive.

    Every open capture takes them (the work may be on a stream forked into any of them);
    keeping a little too much is safe, too little is a use-after-free.
    """
    for kept in list(capture_keeps):
        kept.extend(objs)


def keep_launched(kernel, args) -> None:
    """A kernel launch made while a capture is open: every open capture keeps the kernel
    (its module, so ``cudaLibraryUnload`` waits for the graph and its execs) and, when
    there are any, the arguments as a tuple. A kernel that is one of a list's last two
    items is not added again: a loop launching one kernel keeps it once when it takes no
    arguments, every other launch when it does. The compiled launch (``keep_launched`` in
    ``_native_method.c``) follows the same rule."""
    t = tuple(args) if args else None
    for kept in list(capture_keeps):
        if not any(x is kernel for x in kept[-2:]):
            kept.append(kernel)
        if t is not None:
            kept.append(t)


# ----------------------------------------------------------------------------------
# Process exit

_exit_hooks: list = []


def on_exit(fn, order: int) -> None:
    """Run ``fn()`` at process exit, lower ``order`` first; errors are swallowed."""
    _exit_hooks.append((order, fn))


@atexit.register
def _at_exit() -> None:
    for _, fn in sorted(_exit_hooks, key=lambda item: item[0]):
        try:
            fn()
        except BaseException:  # noqa: BLE001 - exit stays quiet
            pass
