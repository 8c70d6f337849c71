"""Python callables run by CUDA host nodes.

One C trampoline (a ctypes callback, which takes the GIL itself) serves every host
node; its ``userData`` is the id of a :class:`HostCall` in a registry. An exception
raised by the callable is caught in the trampoline (nothing may unwind into the
driver), kept, and raised as :class:`HostCallbackError` by the next
``GraphExec.launch`` / ``synchronize`` or ``Stream.synchronize``.

Threads: the registry and the pending list are shared by every thread; registering and
taking a pending error hold a lock, and the trampoline runs on CUDA's own host thread
under the GIL. At process exit, while host calls exist, the device is synchronized
(``cudaDeviceSynchronize``) before Python shuts down, so no callback fires into a
finalizing interpreter.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import weakref

from .. import _lifetime
from .._cuda.routes import host_errors
from ..errors import HostCallbackError

__all__ = ["HostCall", "raise_pending", "trampoline_address", "hostcall_ids"]

_HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_registry: "weakref.WeakValueDictionary[int, HostCall]" = weakref.WeakValueDictionary()
_ids = itertools.count(1)
_lock = threading.Lock()
#: (HostCall id, exception) in the order they happened; read by launch/synchronize.
pending: list = host_errors  # the list a graph launch checks (both routes)


class HostCall:
    """A Python callable registered for host nodes; graphs and execs hold it alive."""

    __slots__ = ("fn", "id", "args", "__weakref__")

    def __init__(self, fn, args=()):
        if not callable(fn):
            raise TypeError(f"a host node needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.args = tuple(args)
        with _lock:
            self.id = next(_ids)
            _registry[self.id] = self

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)


def _dispatch(user_data) -> None:
    call = _registry.get(user_data or 0)
    if call is None:
        return
    try:
        call.fn(*call.args)
    except BaseException as exc:  # noqa: BLE001 - nothing may escape into the driver
        pending.append((call.id, call.name, exc))


_trampoline = _HOSTFN(_dispatch)


def trampoline_address() -> int:
    """Address of the C function every host node calls."""
    return ctypes.cast(_trampoline, ctypes.c_void_p).value


def raise_pending(ids=None) -> None:
    """Raise the first kept host-node exception (of ``ids`` when given), dropping it.

    The error is :class:`HostCallbackError` whose ``__cause__`` is the original. Two
    threads never take the same one.
    """
    with _lock:
        for k, (cid, name, exc) in enumerate(pending):
            if ids is None or cid in ids:
                del pending[k]
                break
        else:
            return
    raise HostCallbackError(f"the host node callable {name} raised "
                            f"{type(exc).__name__}: {exc}") from exc


def hostcall_ids(obj, out: set | None = None) -> set:
    """Ids of every :class:`HostCall` inside ``obj`` (nested tuples, as ledgers keep them),
    added to ``out`` when given."""
    out = set() if out is None else out
    out.update(v.id for v in _lifetime.contents(obj) if type(v) is HostCall)
    return out


def _drain_at_exit() -> None:
    """At exit: let queued host nodes run now, not into a finalizing interpreter."""
    if len(_registry):
        from .._cuda import context, rt
        if context.process_checked():
            rt.cudaDeviceSynchronize()


_lifetime.register_contents(HostCall, lambda hc: (hc.fn,) + hc.args)
_lifetime.on_exit(_drain_at_exit, 20)
