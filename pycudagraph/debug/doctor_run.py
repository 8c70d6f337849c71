"""``pcg.doctor(fn, *args, **kwargs)``: every call in ``fn`` that would break a stream
capture, each with the line of your code that made it, what it does and how to avoid it.

``fn`` runs eagerly: ``warmup`` times unobserved (first-use work such as cuBLAS handles,
caching-allocator growth and module loading is not what a capture of a warmed-up function
meets, and ``pcg.graphed`` warms up the same way), then once under CUPTI's API callbacks
(:mod:`.doctor_watch`). PyTorch and CuPy (when imported) run it on a side stream of the
doctor's own, as a capture would: work that still lands on the legacy default stream is
then work the code puts there itself.

Needs the optional ``cupti-python`` package (``pip install cupti-python``), and CUPTI free:
one subscriber at a time (a profiler such as Nsight Systems, PyTorch's profiler or
``exe.profile`` holding it makes the doctor refuse, saying so).
"""

from __future__ import annotations

import contextlib
import threading
import time

from .. import _cuda
from ..errors import ArgumentError, PyCudaGraphError
from ..capture.breakers import base_name
from ..frameworks import loaded
from ..frameworks.ops import cupy_stream
from ..inspect.ranges import pointer_info
from ..runtime.device import Device
from ..runtime.stream import Stream
from .doctor_report import DoctorReport, Problem, group_events
from .doctor_watch import DRIVER_CALLS, Watch

__all__ = ["doctor", "DoctorReport", "Problem", "DoctorUnavailable"]

_INSTALL = "pip install cupti-python (or pip install 'pycudagraph[profile]')"


class DoctorUnavailable(PyCudaGraphError):
    """``pcg.doctor`` cannot observe CUDA calls here: cupti-python is missing or broken, or
    another tool holds CUPTI's callbacks (the message says which)."""


_sides: dict = {}
_sides_lock = threading.Lock()
_run_lock = threading.RLock()  # a doctor inside fn is refused by CUPTI, not deadlocked


def load_cupti():
    """cupti-python's ``cupti`` module, or :class:`DoctorUnavailable` naming the package
    and how to install it. No CUDA call."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise DoctorUnavailable(f"pcg.doctor needs the cupti-python package (module 'cupti'), "
                                f"which is not importable here ({exc}): {_INSTALL}") from None
    except Exception as exc:  # noqa: BLE001 - a broken install: say what it raised
        raise DoctorUnavailable(f"pcg.doctor: importing cupti-python failed "
                                f"({type(exc).__name__}: {exc}); reinstall it: {_INSTALL}") \
            from None
    return cupti


def _side(device: int) -> Stream:
    """The doctor's side stream of ``device``, kept for the process (PyTorch and CuPy cache
    memory per stream: the warm-up's blocks serve the observed run). ``cudaStreamCreateWithFlags``
    on first use."""
    with _sides_lock:
        s = _sides.get(device)
        if s is None:
            s = _sides[device] = Stream(non_blocking=True)
        return s


@contextlib.contextmanager
def _frameworks_on(side: Stream, device: int):
    """Make ``side`` the current stream of PyTorch (once its CUDA state exists) and CuPy
    (when imported); autograd is left as it is. No CUDA call of ours."""
    with contextlib.ExitStack() as stack:
        torch = loaded.torch()
        if torch is not None and loaded.torch_cuda_ready(torch):
            stack.enter_context(torch.cuda.device(device))
            stack.enter_context(torch.cuda.stream(
                torch.cuda.ExternalStream(side.ptr, device=device)))
        cupy = loaded.cupy()
        if cupy is not None:
            stack.enter_context(cupy.cuda.Device(device))
            stack.enter_context(cupy_stream(cupy, side.ptr))
        yield


def _params_offset(cupti) -> int:
    """Where ``functionParams`` lies in ``CUpti_CallbackData`` (the binding's struct dtype
    says, else 16: an enum and a pointer before it)."""
    dtype = getattr(cupti, "callback_data_dtype", None)
    fields = getattr(dtype, "fields", None) or {}
    for name in ("function_params", "functionParams"):
        if name in fields:
            return int(fields[name][1])
    return 16


def _subscribe(cupti, callback) -> int:
    """``cuptiSubscribe_v2`` (named "pycudagraph doctor") or ``cuptiSubscribe``;
    :class:`DoctorUnavailable` naming the subscriber in the way when CUPTI refuses."""
    params = None
    try:
        if hasattr(cupti, "subscribe_v2") and hasattr(cupti, "SubscriberParams"):
            params = cupti.SubscriberParams()
            params.struct_size = cupti.SUBSCRIBER_PARAMS_SIZE
            params.subscriber_name = "pycudagraph doctor"
            return cupti.subscribe_v2(callback, None, params.ptr)
        return cupti.subscribe(callback, None)
    except Exception as exc:  # noqa: BLE001 - cuptiError: another subscriber, no libcupti
        holder = getattr(params, "old_subscriber_name", None) if params is not None else None
        who = f" ({holder!r} holds it)" if holder else ""
        raise DoctorUnavailable(
            f"pcg.doctor could not subscribe to CUPTI's callbacks ({type(exc).__name__}: "
            f"{exc}); CUPTI takes one subscriber at a time{who}: stop the profiler (Nsight "
            f"Systems, torch.profiler, exe.profile in another thread) and run it again") \
            from None


def _enable(cupti, sub: int) -> None:
    """``cuptiEnableDomain`` for the runtime API; ``cuptiEnableCallback`` for each driver
    call of :data:`~.doctor_watch.DRIVER_CALLS` (the whole driver domain where the binding
    lists no callback ids). :class:`DoctorUnavailable` when CUPTI refuses."""
    try:
        _enable_calls(cupti, sub)
    except Exception as exc:  # noqa: BLE001 - cuptiError
        raise DoctorUnavailable(f"pcg.doctor: CUPTI refused to enable its API callbacks "
                                f"({type(exc).__name__}: {exc})") from None


def _enable_calls(cupti, sub: int) -> None:
    domains = cupti.CallbackDomain
    cupti.enable_domain(1, sub, domains.RUNTIME_API)
    ids = getattr(cupti, "driver_api_trace_cbid", None)
    if ids is None:
        cupti.enable_domain(1, sub, domains.DRIVER_API)
        return
    seen = set()
    for name, member in ids.__members__.items():
        if base_name(name)[0] in DRIVER_CALLS and int(member) not in seen:
            seen.add(int(member))
            cupti.enable_callback(1, sub, domains.DRIVER_API, int(member))


def _is_pinned(address: int) -> bool:
    """Whether the driver knows host ``address`` (pinned or device memory), now
    (``cuPointerGetAttributes``); an error counts as known (no false report)."""
    try:
        return pointer_info(address).memory != "unregistered"
    except Exception:  # noqa: BLE001 - a query that fails claims nothing
        return True


def doctor(fn, *args, warmup: int = 1, **kwargs) -> DoctorReport:
    """Run ``fn(*args, **kwargs)`` and list every call it makes that would break a stream
    capture, each with the line of your code that made it.

    Parameters
    ----------
    fn : callable
        The function to check; it runs ``warmup + 1`` times, eagerly.
    *args, **kwargs
        Its arguments (keywords other than ``warmup`` go to ``fn``).
    warmup : int
        Runs before the observed one, not observed (default 1): first-use work (cuBLAS
        handles, the caching allocators growing, modules loading) happens there, as it does
        in ``pcg.graphed``'s warm-up. 0 observes the very first run.

    Returns
    -------
    DoctorReport
        ``problems`` (one :class:`Problem` per line: ``call``, ``file``, ``line``,
        ``what``, ``fix``, ``count``), ``ok``, and ``str()`` a table of them.

    Raises
    ------
    DoctorUnavailable
        cupti-python is missing (the message says how to install it), or another tool
        holds CUPTI's callbacks.

    Notes
    -----
    Calls ``cudaDeviceSynchronize`` before the runs and ``cudaStreamSynchronize`` on its
    side stream after them (made once per device: ``cudaStreamCreateWithFlags``);
    ``cuptiSubscribe_v2``, ``cuptiEnableDomain`` / ``cuptiEnableCallback`` and
    ``cuptiUnsubscribe`` around the observed run; ``cuPointerGetAttributes`` for the host
    memory of each async copy afterwards. Cost: ``fn`` runs ``warmup + 1`` times; the
    observed run pays one Python callback on entry and exit of every runtime API call (a
    few microseconds each).
    """
    if not callable(fn):
        raise ArgumentError(f"doctor: fn must be callable, got {type(fn).__name__}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ArgumentError(f"doctor: warmup must be an int >= 0, got {warmup!r}")
    cupti = load_cupti()
    device = _cuda.ensure_device()
    side = _side(device)
    Device.current().synchronize()  # the inputs are ready before the side stream reads them
    for _ in range(warmup):
        with _frameworks_on(side, device):
            fn(*args, **kwargs)
    with _run_lock:  # one observed run at a time in this process
        watch = Watch(int(cupti.CallbackDomain.RUNTIME_API), _params_offset(cupti),
                      getattr(getattr(cupti, "CallbackData", None), "from_ptr", None))
        with _frameworks_on(side, device):
            sub = _subscribe(cupti, watch.callback)
            try:
                _enable(cupti, sub)
                start = time.perf_counter()
                fn(*args, **kwargs)
                seconds = time.perf_counter() - start
            finally:
                try:
                    cupti.unsubscribe(sub)
                except Exception as exc:  # noqa: BLE001 - fn's own error must not be lost
                    watch.errors.append(exc)
    side.synchronize()
    return report(watch, warmup, seconds, _is_pinned)


def report(watch: Watch, warmup: int, seconds: float, is_pinned) -> DoctorReport:
    """The :class:`DoctorReport` of an observed run: the copies whose host memory was
    pinned left out (``is_pinned(address)`` for memory the run did not pin or release
    itself), the rest grouped by line. No CUDA call of its own."""
    kept = []
    for ev in watch.events:
        if ev.category == "copy":
            if all(watch.pinned_at(h, ev.seq, is_pinned) for h in ev.hosts):
                continue
            ev.category, ev.label = "pageable_copy", f"{ev.name} (pageable host memory)"
        kept.append(ev)
    notes = []
    if watch.unread:
        names = ", ".join(f"{n} x{c}" for n, c in sorted(watch.unread.items()))
        notes.append(f"launches not checked for the legacy default stream (their parameters "
                     f"are not read here): {names}")
    if watch.errors:
        notes.append(f"{len(watch.errors)} error(s) while observing (a call the callback "
                     f"could not read, or CUPTI's unsubscribe); the first: "
                     f"{type(watch.errors[0]).__name__}: {watch.errors[0]}")
    return DoctorReport(group_events(kept), watch.calls, warmup, seconds, notes)
