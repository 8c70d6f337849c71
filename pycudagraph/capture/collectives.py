"""Graphs with collectives that cannot deadlock: ``pcg.capture(stream, collectives=...)``.

NCCL runs the operations of one communicator in the order they were issued, the same
order on every rank. A graph replays the collectives it captured whenever it is
launched, so two graphs that share a communicator and are launched on two streams of
one process may run their collectives at the same time, in an order that differs
between the ranks: both ranks then wait for each other forever (a hang, not an error).

A capture made with ``collectives="serialize"`` or ``collectives="refuse"`` marks its
graph as one that uses communicators; :meth:`Graph.instantiate
<pycudagraph.graph.graph.Graph.instantiate>` then makes a :class:`CollectiveGraphExec`,
whose :meth:`~CollectiveGraphExec.launch` (Python, around the compiled launch that every
other exec keeps) knows, per communicator, the last launch of any graph using it:

* ``"serialize"``: a launch on another stream than that last one waits for it first
  (``cudaStreamWaitEvent`` on the event recorded after it, ``cudaEventRecord``), so the
  graphs' collectives run one graph after the other, in launch order, on every rank;
* ``"refuse"``: such a launch while that last one may still run (``cudaEventQuery``
  says not done) raises :class:`CollectiveOrderError` naming both graphs; nothing is
  launched.

Which communicators: those named with ``cap.collective(comm, ...)`` inside the block
(a CuPy ``NcclCommunicator``, an nccl4py communicator, a raw ``ncclComm_t`` as an int, or
any object standing for one, e.g. a ``torch.distributed`` process group); with none
named, every such graph of the process counts as sharing one communicator (safe, maybe
more ordering than needed). The capture also finds the NCCL kernels it captured by name
(``ncclDevKernel_*``, ``ncclKernel_*``): :func:`collective_use` lists them. Ordering is
within one process; NCCL orders the ranks.

NCCL inside a conditional body (``cap.if_``, ``cap.while_``): CUDA allows only kernel,
empty, memset, memcpy, child-graph and conditional nodes in a body (recursively). A body
whose capture made another kind of node (NCCL adds event record nodes unless
``NCCL_GRAPH_MIXING_SUPPORT=0``; host nodes where its proxy is needed) is refused when
the body ends, naming the limit and the node: :func:`check_body`.
"""

from __future__ import annotations

import inspect
import re
import threading
import weakref

from .._cuda import call, rt
from ..errors import ArgumentError, CaptureError, PyCudaGraphError
from ..graph.exec import GraphExec
from ..runtime.device import device
from ..runtime.stream import Event, Stream, stream_handle

__all__ = ["COLLECTIVE_MODES", "CollectiveGraphExec", "CollectiveOrderError", "CollectiveUse",
           "LaunchOrder", "check_body", "collective_use", "communicator_key",
           "is_nccl_kernel", "mark_collectives"]

#: What ``pcg.capture(..., collectives=)`` takes (None: a graph like any other).
COLLECTIVE_MODES = ("serialize", "refuse")

#: NCCL's device kernels: ncclDevKernel_* (2.19+), ncclKernel_* (before), ncclSymkDevKernel_*.
_NCCL_KERNEL = re.compile(r"nccl\w*Kernel", re.IGNORECASE)

#: The one communicator every marked graph shares when the capture named none.
ANY_COMMUNICATOR = ("any", "every NCCL communicator of this process (none was named)")

#: Node types CUDA allows in a conditional body (cudaConditionalNodeParams).
BODY_LIMIT = ("CUDA allows only kernel, empty, memset, memcpy, child-graph and conditional "
              "nodes in the body of a conditional node, recursively (cudaConditionalNodeParams)")


class CollectiveOrderError(PyCudaGraphError):
    """A graph using a communicator was launched on one stream while another graph using
    it, launched on another stream, may still run (``collectives="refuse"``).

    Attributes
    ----------
    graphs : tuple of str
        The graph being launched and the one that may still run, in words.
    """

    def __init__(self, message: str, graphs: tuple = ()):
        self.graphs = graphs
        super().__init__(message)


def is_nccl_kernel(name: str) -> bool:
    """Whether a kernel name (mangled or not) is one of NCCL's device kernels. No CUDA call."""
    return bool(_NCCL_KERNEL.search(name or ""))


def communicator_key(comm) -> tuple:
    """``(key, text)`` for a communicator: the ``ncclComm_t`` address where the object
    gives it (CuPy's ``.comm``, nccl4py's ``.ptr`` or ``int()``, a raw int), else the
    object itself (kept by the graph). No CUDA call."""
    if comm is None or isinstance(comm, (bool, str, bytes, float)):
        raise ArgumentError(f"collective: a communicator must be an NCCL communicator object "
                            f"or an ncclComm_t address, got {comm!r}")
    if isinstance(comm, int):
        return ("comm", comm), f"ncclComm_t 0x{comm:x}"
    for attr in ("comm", "ptr"):
        value = getattr(comm, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value:
            return ("comm", value), f"{type(comm).__name__} (ncclComm_t 0x{value:x})"
    try:
        value = int(comm)
    except (TypeError, ValueError):
        return ("object", id(comm)), f"{type(comm).__name__} at 0x{id(comm):x}"
    return ("comm", value), f"{type(comm).__name__} (ncclComm_t 0x{value:x})"


def _kernel_name(node) -> str:
    """The name of the function a kernel node launches; "" for other nodes."""
    if getattr(type(node), "mangled_name", None) is None:
        return ""  # not a kernel node
    try:
        return node.mangled_name
    except Exception:  # noqa: BLE001 - a name that cannot be read is not NCCL's here
        return ""


def nccl_nodes(graph) -> list:
    """The kernel nodes of ``graph`` and its bodies and child graphs that are NCCL's
    (``cuGraphKernelNodeGetParams``, ``cuFuncGetName`` per captured kernel node)."""
    return [n for n, _depth, _owner in graph.table.walk()
            if is_nccl_kernel(_kernel_name(n))]


def _caller() -> str:
    """``file:line`` of the first frame outside pycudagraph (where the capture was made)."""
    frame = inspect.currentframe().f_back
    while frame is not None and frame.f_globals.get("__name__", "").startswith("pycudagraph"):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


class LaunchOrder:
    """Per communicator, the last launch of a marked graph: ``(exec, stream handle, event,
    label)``. What a launch waits for or is refused by; the CUDA calls are the methods
    :meth:`wait`, :meth:`done` and :meth:`record` (stand-ins replace them in tests)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.last: dict = {}  # key -> (weakref to exec, stream handle, event, label)

    def wait(self, stream_h: int, event) -> None:
        """``cudaStreamWaitEvent``: work after this on ``stream_h`` waits for ``event``."""
        call(rt.cudaStreamWaitEvent, stream_h, event.handle, 0)

    def done(self, event) -> bool:
        """``cudaEventQuery``: whether the work before ``event`` is done."""
        return event.query()

    def record(self, exe, stream, stream_h: int):
        """``cudaEventRecord`` of ``exe``'s event for the stream's device on the stream."""
        return exe.collective_event(stream, stream_h)

    def launch(self, exe, use, stream, stream_h: int, base) -> None:
        """Order (or refuse) the launch of ``exe`` (of a graph noted by ``use``) on
        ``stream``, call ``base(exe, stream)``, then note it as the last launch of each of
        its communicators."""
        with self.lock:
            waits = []
            for key, text in use.communicators:
                last = self.last.get(key)
                if last is None or last[1] == stream_h or last[0]() is exe:
                    continue  # stream order (or CUDA, for one exec) orders them already
                if use.mode == "refuse":
                    if not self.done(last[2]):
                        raise _refusal(use, exe, last, text, stream_h)
                elif all(w is not last[2] for w in waits):
                    waits.append(last[2])
            for event in waits:
                self.wait(stream_h, event)
            base(exe, stream)
            event = self.record(exe, stream, stream_h)
            entry = (weakref.ref(exe), stream_h, event, use.label)
            for key, _text in use.communicators:
                self.last[key] = entry


def _refusal(use, exe, last, text: str, stream_h: int) -> CollectiveOrderError:
    other = last[3]
    message = (f"refused to launch {use.label} on stream 0x{stream_h:x}: {other}, launched "
               f"on stream 0x{last[1]:x}, may still run, and both use {text}; two graphs "
               "running collectives of one communicator at once can hang every rank "
               "(collectives='refuse'). Launch it on the same stream, wait for the other "
               "(stream.wait(event), synchronize), or capture with collectives='serialize'")
    return CollectiveOrderError(message, (use.label, other))


#: The launches of every marked graph of this process.
ORDER = LaunchOrder()
_USES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class CollectiveUse:
    """What a capture with ``collectives=`` noted on its graph.

    Attributes
    ----------
    mode : str
        ``"serialize"`` or ``"refuse"``.
    communicators : tuple of (key, text)
        The communicators named (:func:`communicator_key`), or :data:`ANY_COMMUNICATOR`.
    nccl_nodes : tuple of str
        NCCL kernel nodes found in the graph, described.
    label : str
        The graph in words (its handle and where it was captured), for error messages.
    """

    def __init__(self, mode: str, communicators, nccl_nodes=(), label: str = "a graph"):
        self.mode = mode
        self.communicators = tuple(communicators) or (ANY_COMMUNICATOR,)
        self.nccl_nodes = tuple(nccl_nodes)
        self.label = label

    def __repr__(self) -> str:
        comms = ", ".join(text for _key, text in self.communicators)
        return (f"<CollectiveUse {self.mode}: {self.label}; {comms}; "
                f"{len(self.nccl_nodes)} NCCL kernel node(s)>")


class CollectiveGraphExec(GraphExec):
    """The exec of a graph captured with ``collectives=``: :meth:`launch` orders (or
    refuses) it against other such graphs sharing a communicator. Everything else is
    :class:`~pycudagraph.graph.exec.GraphExec`'s."""

    __slots__ = ("collectives", "events")

    @classmethod
    def instantiate(cls, graph, *args, **kwargs) -> "CollectiveGraphExec":
        """:meth:`GraphExec.instantiate <pycudagraph.graph.exec.GraphExec.instantiate>`
        (``cuGraphInstantiateWithFlags``), the exec knowing its graph's collectives."""
        exe = super().instantiate(graph, *args, **kwargs)
        #: What the capture noted (a CollectiveUse: mode, communicators, NCCL nodes).
        exe.collectives = _USES.get(graph) or CollectiveUse("serialize", (), label=f"{graph!r}")
        exe.events = {}  # stream handle -> this exec's event recorded there after a launch
        return exe

    def launch(self, stream=None) -> None:
        """Launch the graph on ``stream`` (``cuGraphLaunch``), first waiting for the last
        launch of another graph sharing a communicator on another stream
        (``cudaStreamWaitEvent``; ``"serialize"``) or raising
        :class:`CollectiveOrderError` while that one may still run (``cudaEventQuery``;
        ``"refuse"``); after it, ``cudaEventRecord`` on the stream."""
        ORDER.launch(self, self.collectives, stream, stream_handle(stream), GraphExec.launch)

    def collective_event(self, stream, stream_h: int) -> Event:
        """This exec's event for the stream's device, recorded on it (``cudaEventCreateWithFlags``
        once per device, ``cudaEventRecord``)."""
        event = self.events.get(stream_h)
        if event is None:
            ordinal = Stream.wrap(stream).device.handle if stream is not None else None
            if ordinal is None:
                event = Event(timing=False)
            else:
                with device(ordinal):
                    event = Event(timing=False)
            self.events[stream_h] = event
        call(rt.cudaEventRecord, event.handle, stream_h)
        return event


def mark_collectives(graph, mode: str, comms=(), nccl=None, where: str | None = None) -> CollectiveUse:
    """Note on ``graph`` that its work uses the communicators ``comms`` (none: any), so its
    execs are :class:`CollectiveGraphExec` with ``mode``. ``nccl``: the NCCL kernel nodes
    already found (by default found here: :func:`nccl_nodes`). Returns the note."""
    if mode not in COLLECTIVE_MODES:
        raise ArgumentError(f"collectives must be one of {', '.join(map(repr, COLLECTIVE_MODES))} "
                            f"or None, got {mode!r}")
    keys, seen = [], set()
    for comm in comms:
        key, text = communicator_key(comm)
        if key not in seen:
            seen.add(key)
            keys.append((key, text))
    found = nccl_nodes(graph) if nccl is None else nccl
    label = f"graph 0x{int(graph):x} (captured at {where or _caller()})"
    use = CollectiveUse(mode, keys, [n.describe() for n in found], label)
    _USES[graph] = use
    graph.exec_type = CollectiveGraphExec
    if comms:
        graph.table.ledger.keep_also(*comms)  # an object key stays that object
    return use


def collective_use(graph) -> CollectiveUse | None:
    """What a capture with ``collectives=`` noted on ``graph``, or None. No CUDA call."""
    return _USES.get(graph)


def check_body(body, conditional) -> None:
    """Refuse a conditional node's body holding a node CUDA does not allow there
    (:data:`BODY_LIMIT`): :class:`CaptureError` naming the limit, the node and the
    conditional node (``cudaGraphGetNodes`` over the body and what it holds)."""
    for node, _depth, _owner in body.table.walk():
        if not node.in_conditional_body:
            raise CaptureError(body_refusal(conditional, f"it holds {node.describe()}"))


def body_refusal(conditional, what: str) -> str:
    """The words of a refused conditional body: the node, what is wrong, the CUDA limit,
    and what NCCL adds to a capture."""
    return (f"the body of {conditional!r} cannot be captured: {what}. {BODY_LIMIT}. NCCL "
            "adds event record nodes to a capture unless NCCL_GRAPH_MIXING_SUPPORT=0 is set "
            "before it is loaded, and host nodes where its proxy thread is needed (between "
            "nodes); issue such collectives outside the body")
