"""Edge data: what kind of dependency an edge is (``cudaGraphEdgeData``, CUDA >= 12.3).

A plain edge makes the dependent node wait until the first node has finished. Between
two kernel nodes an edge can leave from another *port* of the first kernel:

=================== ============================================ ===========================
port                the dependent kernel may start when ...      raw values
=================== ============================================ ===========================
``None``            the first kernel has finished (the default)  ``cudaGraphKernelNodePortDefault``,
                                                                 ``cudaGraphDependencyTypeDefault``
``"programmatic"``  every block of the first kernel has called   ``cudaGraphKernelNodePortProgrammatic``,
                    ``cudaTriggerProgrammaticLaunchCompletion()`` ``cudaGraphDependencyTypeProgrammatic``
                    or exited
``"launch_completion"`` every block of the first kernel has       ``cudaGraphKernelNodePortLaunchCompletion``,
                    started                                      ``cudaGraphDependencyTypeProgrammatic``
=================== ============================================ ===========================

With a programmatic port the dependent kernel runs early: before it reads what the first
kernel wrote it calls ``cudaGridDependencySynchronize()`` (which waits for the first kernel
to finish and its memory to be visible). Both are declared for ``pcg.Program`` sources.
"""

from __future__ import annotations

from .._cuda import rt, versions
from ..errors import ArgumentError

__all__ = ["PORTS", "edge_data", "port_name", "port_hint"]

#: port name -> (from_port, dependency type); ``None`` is the plain edge.
PORTS = {
    None: (0, 0),
    "default": (0, 0),
    "programmatic": (int(rt.cudaGraphKernelNodePortProgrammatic),
                     int(rt.cudaGraphDependencyType.cudaGraphDependencyTypeProgrammatic)),
    "launch_completion": (int(rt.cudaGraphKernelNodePortLaunchCompletion),
                          int(rt.cudaGraphDependencyType.cudaGraphDependencyTypeProgrammatic)),
}
_NAMES = {v: k for k, v in PORTS.items() if k is not None}


def edge_data(port) -> list | None:
    """The one-element ``cudaGraphEdgeData`` list for ``port``, or ``None`` for a plain edge.

    Raises
    ------
    ArgumentError
        For a port name that is not one of :data:`PORTS`.
    NotSupportedError
        When the driver is older than CUDA 12.3 (edge data).
    """
    if not (port is None or isinstance(port, str)) or port not in PORTS:
        names = ", ".join(repr(k) for k in PORTS)
        raise ArgumentError(f"port must be one of {names}; got {port!r}")
    if PORTS[port] == (0, 0):
        return None
    versions.require(f"{port} edges (cudaGraphEdgeData)", 12030)
    from_port, kind = PORTS[port]
    data = rt.cudaGraphEdgeData()
    data.from_port = from_port
    data.type = kind
    return [data]


def port_name(data) -> str:
    """``"default"``, ``"programmatic"``, ``"launch_completion"`` (or a description of
    another combination) for one ``cudaGraphEdgeData``."""
    key = (int(data.from_port), int(data.type))
    name = _NAMES.get(key)
    if name is None:
        return f"from_port={key[0]} type={key[1]} to_port={int(data.to_port)}"
    return name


def port_hint(exc, graph, a, b, port):
    """``exc`` (a failed ``cudaGraphRemoveDependencies``) saying the edge's port when the
    ``port`` given is not it (``cudaGraphGetEdges`` with edge data)."""
    try:
        have = graph.edge_data.get((a, b))
    except Exception:  # no edge data to read: the error stays as it is
        return exc
    if have is not None and have != (port or "default"):
        exc.set_hint(f"{a!r} -> {b!r} is a {have} edge: remove it with port={have!r}")
    return exc
