"""Capture control: what a capture has built so far, editing its dependency set, the
thread's capture mode (:class:`~pycudagraph.capture.capture.recapture`, recapture into an existing
graph, is with :class:`~pycudagraph.capture.capture.capture`).

The "capture, then patch one node by hand" pattern::

    with pcg.capture(stream) as cap:
        step_a()
        info = cap.info                       # cudaStreamGetCaptureInfo
        node = info.graph.add_kernel(k, grid, block, args, deps=info.dependencies)
        cap.update_dependencies([node], mode="set")   # cudaStreamUpdateCaptureDependencies
        step_b()                              # captured after the hand-made node
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._cuda import call, ensure_device, rt, versions
from ..nodes.edges import edge_data, port_name
from ..errors import ArgumentError
from ..graph.graph import Graph
from ..nodes.table import node_list
from ..runtime.stream import Stream
from ..runtime.values import choice_arg, seq_arg

__all__ = ["CaptureInfo", "capture_info", "update_capture_dependencies", "capture_mode",
           "CAPTURE_MODES", "RECAPTURE_VERSION"]

#: CUDA version of ``cudaStreamBeginRecaptureToGraph`` (cuda-bindings 13.2 lacks it).
RECAPTURE_VERSION = 13030

_M = rt.cudaStreamCaptureMode
#: Capture mode names -> ``cudaStreamCaptureMode``.
CAPTURE_MODES = {"global": _M.cudaStreamCaptureModeGlobal,
                 "thread_local": _M.cudaStreamCaptureModeThreadLocal,
                 "relaxed": _M.cudaStreamCaptureModeRelaxed}
_S = rt.cudaStreamCaptureStatus
_STATUS = {int(_S.cudaStreamCaptureStatusNone): "none",
           int(_S.cudaStreamCaptureStatusActive): "active",
           int(_S.cudaStreamCaptureStatusInvalidated): "invalidated"}

_FLAGS = {"add": rt.cudaStreamUpdateCaptureDependenciesFlags.cudaStreamAddCaptureDependencies,
          "set": rt.cudaStreamUpdateCaptureDependenciesFlags.cudaStreamSetCaptureDependencies}
_MODE_NAMES = {int(v): k for k, v in CAPTURE_MODES.items()}


@dataclass
class CaptureInfo:
    """What ``cudaStreamGetCaptureInfo`` says about a stream.

    Attributes
    ----------
    status : str
        ``"none"``, ``"active"`` or ``"invalidated"``.
    id : int
        The capture sequence's ID, unique in the process (0 when not capturing).
    graph : Graph or None
        The graph being captured into (not owned: the capture owns it until it ends).
    dependencies : list of Node
        The nodes the next captured work will depend on.
    ports : list of str or None
        The edge data of each dependency (``"default"``, ``"programmatic"``, ...);
        ``None`` where the bindings cannot tell (cuda-bindings 12.x before 12.3).
    """

    status: str
    id: int
    graph: Graph | None
    dependencies: list = field(default_factory=list)
    ports: list | None = None


def capture_info(stream, graph: Graph | None = None) -> CaptureInfo:
    """The capture state of ``stream`` (``cudaStreamGetCaptureInfo``).

    Parameters
    ----------
    stream : Stream or stream-like
    graph : Graph, optional
        The Graph object to report when the capture goes into it (a capture into an
        existing graph); otherwise a non-owned Graph is made for the capture's graph.

    Returns
    -------
    CaptureInfo
    """
    s = Stream.wrap(stream)
    ensure_device()
    status, cid, raw, deps, data = versions.stream_capture_info(s.ptr)
    name = _STATUS.get(int(status), "unknown")
    if name != "active" or raw is None or not int(raw):
        return CaptureInfo(name, int(cid or 0), None, [], None if data is None else [])
    g = graph if graph is not None and graph.table.h == int(raw) else Graph.wrap(raw, owner=s)
    nodes = [g.table.node(d) for d in deps]
    ports = None if data is None else [port_name(d) for d in data]
    return CaptureInfo(name, int(cid), g, nodes, ports)


def _edge_list(ports, n: int):
    if ports is None:
        return None
    ports = list(seq_arg(ports, "update_capture_dependencies: ports"))
    if len(ports) != n:
        raise ArgumentError(f"update_capture_dependencies: {len(ports)} ports for {n} nodes")
    lists = [edge_data(p) for p in ports]
    if all(x is None for x in lists):
        return None
    return [x[0] if x is not None else rt.cudaGraphEdgeData() for x in lists]


def update_capture_dependencies(stream, nodes, mode: str = "add", ports=None) -> None:
    """Add to, or replace, the nodes the next captured work depends on
    (``cudaStreamUpdateCaptureDependencies``).

    Parameters
    ----------
    stream : Stream or stream-like
        A stream being captured.
    nodes : sequence of Node
        Nodes of the graph being captured into (made with its ``add_*`` builders or
        captured earlier).
    mode : {"add", "set"}
        ``cudaStreamAddCaptureDependencies`` or ``cudaStreamSetCaptureDependencies``.
    ports : sequence of str, optional
        Edge data per node (``"programmatic"``, ...; CUDA 12.3+).
    """
    choice_arg(mode, _FLAGS, "update_capture_dependencies: mode")
    nodes = node_list(nodes, "update_capture_dependencies")
    s = Stream.wrap(stream)
    data = _edge_list(ports, len(nodes))
    ensure_device()
    versions.stream_update_capture_dependencies(s.ptr, [n.handle for n in nodes], data,
                                                int(_FLAGS[mode]))


class capture_mode:
    """Set this thread's stream-capture mode inside a ``with`` block
    (``cudaThreadExchangeStreamCaptureMode``), restoring the previous one after.

    Parameters
    ----------
    mode : {"global", "thread_local", "relaxed"}

    Attributes
    ----------
    previous : str
        The mode the block replaced (set on entry).
    """

    def __init__(self, mode: str):
        choice_arg(mode, CAPTURE_MODES, "capture_mode")
        self.mode = mode
        self.previous: str | None = None
        self._old = None

    def __enter__(self) -> "capture_mode":
        ensure_device()
        self._old = call(rt.cudaThreadExchangeStreamCaptureMode, CAPTURE_MODES[self.mode])
        self.previous = _MODE_NAMES.get(int(self._old), str(self._old))
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        call(rt.cudaThreadExchangeStreamCaptureMode, self._old)
        return False
