"""Kernel-node attributes (``cudaGraphKernelNodeSetAttribute`` / ``GetAttribute``).

Each attribute has a Python name, the ``cudaLaunchAttributeID`` it sets, the CUDA version
that added it, and two small functions that move a Python value into and out of a
``cudaKernelNodeAttrValue``:

==================== ================================================ ======== ===========================
name                 Python value                                     CUDA     raw attribute
==================== ================================================ ======== ===========================
``priority``         int (lower is higher priority; needs             11.7     ``cudaLaunchAttributePriority``
                     ``instantiate(use_node_priority=True)``)
``cluster``          (x, y, z) blocks per cluster, or an int          11.8     ``cudaLaunchAttributeClusterDimension``
``cooperative``      bool (grid-wide synchronisation allowed)         11.0     ``cudaLaunchAttributeCooperative``
``access_policy``    :class:`AccessPolicyWindow` or ``None``          11.0     ``cudaLaunchAttributeAccessPolicyWindow``
``mem_sync_domain``  ``"default"`` or ``"remote"``                    12.0     ``cudaLaunchAttributeMemSyncDomain``
``device_updatable`` bool (the node can be changed from device code)  12.4     ``cudaLaunchAttributeDeviceUpdatableKernelNode``
==================== ================================================ ======== ===========================
"""

from __future__ import annotations

from dataclasses import dataclass

from .._cuda import call, rt, versions
from ..errors import ArgumentError
from ..runtime.pointers import device_pointer

__all__ = ["AccessPolicyWindow", "ATTRIBUTES", "prepare", "get_attribute", "set_attribute",
           "device_node"]

_A = rt.cudaLaunchAttributeID
_PROPS = {"normal": rt.cudaAccessProperty.cudaAccessPropertyNormal,
          "streaming": rt.cudaAccessProperty.cudaAccessPropertyStreaming,
          "persisting": rt.cudaAccessProperty.cudaAccessPropertyPersisting}
_PROP_NAMES = {int(v): k for k, v in _PROPS.items()}
_DOMAINS = {"default": rt.cudaLaunchMemSyncDomain.cudaLaunchMemSyncDomainDefault,
            "remote": rt.cudaLaunchMemSyncDomain.cudaLaunchMemSyncDomainRemote}
_DOMAIN_NAMES = {int(v): k for k, v in _DOMAINS.items()}


@dataclass(frozen=True)
class AccessPolicyWindow:
    """An L2 access-policy window (``cudaAccessPolicyWindow``).

    Accesses to ``[base, base + nbytes)`` get ``hit`` with probability ``hit_ratio`` and
    ``miss`` otherwise; ``"persisting"`` lines stay in the L2 set-aside
    (``cudaLimitPersistingL2CacheSize``).
    """

    base: int
    nbytes: int
    hit_ratio: float = 1.0
    hit: str = "persisting"
    miss: str = "streaming"


def _choice(table: dict, value, what: str):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ArgumentError(f"{what} must be one of {sorted(table)}; got {value!r}") from None


def _cluster_in(v, value) -> None:
    given = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(given, (tuple, list)) or not 1 <= len(given) <= 3
            or any(isinstance(x, bool) or not isinstance(x, int) for x in given)):
        raise ArgumentError(f"cluster must be 1 to 3 positive ints, got {value!r}")
    dims = tuple(given) + (1,) * (3 - len(given))
    if min(dims) < 1 or max(dims) >= 1 << 32:
        raise ArgumentError(f"cluster must be 1 to 3 positive ints, got {value!r}")
    v.clusterDim.x, v.clusterDim.y, v.clusterDim.z = dims


def _window_in(v, value) -> None:
    w = v.accessPolicyWindow
    if value is None:
        w.base_ptr, w.num_bytes, w.hitRatio = 0, 0, 0.0
        return
    if not isinstance(value, AccessPolicyWindow):
        raise ArgumentError(f"access_policy takes an AccessPolicyWindow or None, got {type(value).__name__}")
    if not 0.0 <= value.hit_ratio <= 1.0:
        raise ArgumentError(f"hit_ratio must be in [0, 1], got {value.hit_ratio}")
    w.base_ptr = device_pointer(value.base)
    w.num_bytes = int(value.nbytes)
    w.hitRatio = float(value.hit_ratio)
    w.hitProp = _choice(_PROPS, value.hit, "hit")
    w.missProp = _choice(_PROPS, value.miss, "miss")


def _window_out(v):
    w = v.accessPolicyWindow
    if not int(w.num_bytes):
        return None
    return AccessPolicyWindow(int(w.base_ptr), int(w.num_bytes), float(w.hitRatio),
                              _PROP_NAMES[int(w.hitProp)], _PROP_NAMES[int(w.missProp)])


def _priority_in(v, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(f"priority takes an int, got {value!r}")
    if not -(1 << 31) <= value < 1 << 31:
        raise ArgumentError(f"priority takes a 32-bit int, got {value}")
    v.priority = value


def _flag_in(field):
    def fill(v, value):
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise ArgumentError(f"{field} takes True or False, got {value!r}")
        setattr(v, field, int(value))
    return fill


def _updatable_in(v, value) -> None:
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise ArgumentError(f"device_updatable takes True or False, got {value!r}")
    v.deviceUpdatableKernelNode.deviceUpdatable = int(value)


#: name -> (cudaLaunchAttributeID, CUDA version, value -> struct, struct -> value)
ATTRIBUTES = {
    "priority": (_A.cudaLaunchAttributePriority, 11070, _priority_in, lambda v: int(v.priority)),
    "cluster": (_A.cudaLaunchAttributeClusterDimension, 11080, _cluster_in,
                lambda v: (int(v.clusterDim.x), int(v.clusterDim.y), int(v.clusterDim.z))),
    "cooperative": (_A.cudaLaunchAttributeCooperative, 11000, _flag_in("cooperative"),
                    lambda v: bool(v.cooperative)),
    "access_policy": (_A.cudaLaunchAttributeAccessPolicyWindow, 11000, _window_in, _window_out),
    "mem_sync_domain": (_A.cudaLaunchAttributeMemSyncDomain, 12000,
                        lambda v, value: setattr(v, "memSyncDomain", _choice(_DOMAINS, value, "mem_sync_domain")),
                        lambda v: _DOMAIN_NAMES.get(int(v.memSyncDomain), str(v.memSyncDomain))),
    "device_updatable": (_A.cudaLaunchAttributeDeviceUpdatableKernelNode, 12040, _updatable_in,
                         lambda v: bool(v.deviceUpdatableKernelNode.deviceUpdatable)),
}


def _entry(name: str):
    try:
        return ATTRIBUTES[name]
    except (KeyError, TypeError):  # an unknown name, or not a str at all
        raise ArgumentError(f"no kernel-node attribute {name!r}; known: {', '.join(ATTRIBUTES)}") from None


def prepare(name: str, value):
    """(raw attribute, filled ``cudaKernelNodeAttrValue``) for one named attribute:
    the value is checked, then the driver's version."""
    attr, version, fill, _ = _entry(name)
    v = rt.cudaKernelNodeAttrValue()
    fill(v, value)
    versions.require(f"the kernel-node attribute {name!r}", version)
    return attr, v


def set_attribute(node_handle, name: str, value) -> None:
    """``cudaGraphKernelNodeSetAttribute`` of one named attribute, checked first."""
    call(rt.cudaGraphKernelNodeSetAttribute, node_handle, *prepare(name, value))


def get_attribute(node_handle, name: str):
    """``cudaGraphKernelNodeGetAttribute`` of one named attribute, as a Python value."""
    attr, version, _, read = _entry(name)
    versions.require(f"the kernel-node attribute {name!r}", version)
    return read(call(rt.cudaGraphKernelNodeGetAttribute, node_handle, attr))


def device_node(node_handle) -> int:
    """The ``cudaGraphDeviceNode_t`` of a device-updatable node (from its attribute)."""
    v = call(rt.cudaGraphKernelNodeGetAttribute, node_handle,
             _A.cudaLaunchAttributeDeviceUpdatableKernelNode)
    return int(v.deviceUpdatableKernelNode.devNode)
