"""Devices: which GPU an object lives on, and switching the current one.

``pcg.device_count()`` counts the GPUs (``cudaGetDeviceCount``; 0 without a driver).
``pcg.Device(i)`` describes one and can make it current; ``with pcg.device(i): ...``
makes device ``i`` current for the block (``cudaSetDevice``) and restores the previous
device afterwards. Streams, events, device buffers and kernel launches are created on
the current device and remember it (``.device``); mixing objects of two devices where
CUDA forbids it raises :class:`DeviceMismatchError` naming both devices before the raw
call is made.

Peer access (``Device.enable_peer_access``, ``cudaDeviceEnablePeerAccess``) lets kernels
running on one device read and write memory of another; pycudagraph remembers which
pairs were enabled through it and allows exactly those.
"""

from __future__ import annotations

import operator

from .. import _cuda
from .._cuda import call, rt
from .._cuda.context import current_device, seen, switch_device
from ..errors import ArgumentError, PyCudaGraphError

__all__ = ["Device", "device", "device_count", "DeviceMismatchError", "check_same_device",
           "known_device", "trusted_scope",
           "check_access", "peer_pairs", "devices_seen"]

_ATTR = rt.cudaDeviceAttr
_PEER_ALREADY = rt.cudaError_t.cudaErrorPeerAccessAlreadyEnabled

#: (accessor, owner) pairs whose peer access was enabled through pycudagraph.
_peers: set[tuple[int, int]] = set()


class DeviceMismatchError(PyCudaGraphError, ValueError):
    """Objects of two devices were combined where CUDA does not allow it."""


def device_count() -> int:
    """Number of CUDA devices this process can use (``cudaGetDeviceCount``).

    Returns 0, and raises nothing, when there is no driver or no device.
    """
    try:
        err, count = rt.cudaGetDeviceCount()
    except Exception:  # no driver library at all
        return 0
    if err:
        rt.cudaGetLastError()  # leave no sticky error behind
        return 0
    return int(count)


def _ordinal(dev) -> int:
    """The ordinal of a :class:`Device` or an int, checked against the device count."""
    if isinstance(dev, Device):
        return dev._ordinal
    try:
        if isinstance(dev, bool):
            raise TypeError
        dev = operator.index(dev)
    except TypeError:
        raise ArgumentError(f"a device is a pycudagraph.Device or an int ordinal, "
                            f"got {type(dev).__name__}") from None
    count = device_count()
    if not 0 <= dev < count:
        have = f"devices 0..{count - 1}" if count else "no usable CUDA device"
        raise ArgumentError(f"there is no CUDA device {dev}: this process sees {have}")
    return int(dev)


class Device:
    """One CUDA device, by ordinal (what ``cudaSetDevice`` takes).

    Parameters
    ----------
    ordinal : int
        ``0 <= ordinal < device_count()``.

    Notes
    -----
    Creating a ``Device`` calls ``cudaGetDeviceCount`` only; the properties call
    ``cudaDeviceGetAttribute`` / ``cudaGetDeviceProperties`` when read.
    """

    __slots__ = ("_ordinal",)

    def __init__(self, ordinal: int):
        self._ordinal = _ordinal(ordinal)

    @classmethod
    def _of(cls, ordinal: int) -> "Device":
        """A Device for an ordinal already known to be valid (no count check)."""
        self = cls.__new__(cls)
        self._ordinal = ordinal
        return self

    @property
    def handle(self) -> int:
        """The raw device ordinal (an int, as the runtime API takes it). No CUDA call."""
        return self._ordinal

    ordinal = handle

    def __int__(self) -> int:
        return self._ordinal

    __index__ = __int__

    @property
    def name(self) -> str:
        """The product name (``cudaGetDeviceProperties``)."""
        props = call(rt.cudaGetDeviceProperties, self._ordinal)
        raw = props.name
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return text.split("\0", 1)[0]

    @property
    def compute_capability(self) -> tuple[int, int]:
        """(major, minor) (``cudaDeviceGetAttribute``)."""
        major = call(rt.cudaDeviceGetAttribute, _ATTR.cudaDevAttrComputeCapabilityMajor, self._ordinal)
        minor = call(rt.cudaDeviceGetAttribute, _ATTR.cudaDevAttrComputeCapabilityMinor, self._ordinal)
        return int(major), int(minor)

    @property
    def arch(self) -> str:
        """``"sm_XY"``, what :meth:`Program.compile <pycudagraph.Program.compile>` takes
        (``cudaDeviceGetAttribute``, through :attr:`compute_capability`)."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def total_memory(self) -> int:
        """Device memory in bytes (``cudaGetDeviceProperties``)."""
        return int(call(rt.cudaGetDeviceProperties, self._ordinal).totalGlobalMem)

    def set_current(self) -> "Device":
        """Make this the current device of the calling thread (``cudaSetDevice``)."""
        _cuda.set_device(self._ordinal)
        return self

    def synchronize(self) -> None:
        """Wait for all work on this device (``cudaDeviceSynchronize`` with it current)."""
        with device(self):
            call(rt.cudaDeviceSynchronize)

    def can_access_peer(self, other) -> bool:
        """Whether kernels on this device can use ``other``'s memory once peer access is
        enabled (``cudaDeviceCanAccessPeer``).

        Parameters
        ----------
        other : int or Device
        """
        peer = _ordinal(other)
        if peer == self._ordinal:
            return True
        return bool(call(rt.cudaDeviceCanAccessPeer, self._ordinal, peer))

    def enable_peer_access(self, other) -> None:
        """Let kernels and copies on this device use ``other``'s memory
        (``cudaDeviceEnablePeerAccess`` with this device current).

        Enabling a pair that is already enabled is not an error. Access is one-way:
        enable it on both devices for both directions.

        Parameters
        ----------
        other : int or Device
        """
        peer = _ordinal(other)
        if peer == self._ordinal or (self._ordinal, peer) in _peers:
            return
        with device(self):
            err, = rt.cudaDeviceEnablePeerAccess(peer, 0)
            if err == _PEER_ALREADY:
                rt.cudaGetLastError()
            elif err:
                raise _cuda.error_for(
                    "cudaDeviceEnablePeerAccess", err,
                    f"device {self._ordinal} cannot map device {peer}'s memory "
                    f"(cudaDeviceCanAccessPeer says {self.can_access_peer(peer)})")
        _peers.add((self._ordinal, peer))

    def peer_access_enabled(self, other) -> bool:
        """True when this device may use ``other``'s memory (same device, or enabled
        through :meth:`enable_peer_access`). No CUDA call: it reads what that recorded."""
        peer = int(other)
        return peer == self._ordinal or (self._ordinal, peer) in _peers

    @classmethod
    def current(cls) -> "Device":
        """The calling thread's current device (``cudaGetDevice``)."""
        return cls._of(current_device())

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and other._ordinal == self._ordinal

    def __hash__(self) -> int:
        return hash(("device", self._ordinal))

    def __repr__(self) -> str:
        return f"<pycudagraph.Device {self._ordinal}>"


class device:
    """Make a device current for a ``with`` block; the previous one is restored after.

    Parameters
    ----------
    dev : int or Device

    Notes
    -----
    Calls ``cudaSetDevice`` on entry and again on exit, only when the device changes.
    Objects created inside the block (streams, events, buffers, graph nodes) belong to
    ``dev``. ``as`` gives the :class:`Device`.
    """

    __slots__ = ("_target", "_previous")

    def __init__(self, dev):
        self._target = _ordinal(dev)
        self._previous: list[int] = []

    @classmethod
    def _trusted(cls, ordinal: int) -> "device":
        """The same for an ordinal already known to be valid (no ``cudaGetDeviceCount``)."""
        self = cls.__new__(cls)
        self._target = ordinal
        self._previous = []
        return self

    def __enter__(self) -> Device:
        prev = current_device()
        self._previous.append(prev)
        if prev != self._target:
            switch_device(self._target)
        return known_device(self._target)

    def __exit__(self, *exc) -> bool:
        prev = self._previous.pop()
        if prev != self._target:
            switch_device(prev)
        return False


def known_device(ordinal: int) -> Device:
    """The :class:`Device` of an ordinal already known to be valid (no
    ``cudaGetDeviceCount``): what a stream, event, buffer or kernel says it belongs to.
    No CUDA call."""
    return Device._of(ordinal)


def trusted_scope(ordinal: int) -> device:
    """``with device(ordinal):`` for an ordinal already known to be valid (no
    ``cudaGetDeviceCount``; ``cudaSetDevice`` on entering only when another is current)."""
    return device._trusted(ordinal)


# ----------------------------------------------------------------------------------
# Mixing checks: cheap enough for hot paths (callers test ``seen.multi`` first)

def check_same_device(what: str, a_label: str, a_dev: int, b_label: str, b_dev: int,
                      fix: str = "") -> None:
    """Raise :class:`DeviceMismatchError` when two objects that must share a device do not."""
    if a_dev != b_dev and a_dev >= 0 and b_dev >= 0:
        raise DeviceMismatchError(
            f"{what}: {a_label} belongs to device {a_dev} but {b_label} to device {b_dev}; "
            f"CUDA needs both on one device" + (f". {fix}" if fix else ""))


def check_access(what: str, run_dev: int, buf_dev: int, label: str) -> None:
    """Raise unless work running on ``run_dev`` may use memory of ``buf_dev``."""
    if run_dev == buf_dev or (run_dev, buf_dev) in _peers:
        return
    raise DeviceMismatchError(
        f"{what} runs on device {run_dev} but {label} is memory of device {buf_dev}, and "
        f"peer access from device {run_dev} to device {buf_dev} is not enabled: call "
        f"pcg.Device({run_dev}).enable_peer_access({buf_dev}) first, or run it on device "
        f"{buf_dev} (with pcg.device({buf_dev}): ..., or a stream of that device)")


def peer_pairs() -> frozenset:
    """The (accessor, owner) pairs enabled through :meth:`Device.enable_peer_access`."""
    return frozenset(_peers)


def devices_seen() -> frozenset:
    """Ordinals pycudagraph has made current in this process so far."""
    return frozenset(seen.ordinals)
