"""The profiler's CUPTI method: activity records name the graph node that ran them.

CUPTI (the optional ``cupti-python`` package) writes one record per kernel, memcpy and
memset the GPU runs, with its start and end in nanoseconds and ``graph_node_id``: the id of
the node *of the executable graph*. Instantiation copies every node, so those ids are not
the ids of the graph's own nodes; CUPTI reports each copy as it is made
(``CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED``: the new node and the one it copies). This
module therefore instantiates a twin of the exec from its graph while subscribed to that
callback, maps each copy's id back to the graph's node (``cuptiGetGraphNodeId``), then
launches the twin with activity recording on and groups the records by the correlation id
of the ``cudaGraphLaunch`` that ran them.

Host, event, empty and allocation nodes leave no activity record. Records CUPTI gives no
node for are counted as unattributed time, never dropped silently.
"""

from __future__ import annotations

import threading
import time

from .profile_stamps import Samples

__all__ = ["CuptiUnusable", "unavailable", "measure"]

_lock = threading.Lock()
_state: dict = {"registered": False, "records": None}


class CuptiUnusable(Exception):
    """CUPTI is installed but could not profile this graph (the message says why)."""


def _cupti():
    from cupti import cupti  # the optional cupti-python package
    return cupti


def unavailable() -> str | None:
    """None when the ``cupti`` module imports and its library answers
    (``cuptiGetTimestamp``, which loads libcupti); else why not, in one sentence."""
    try:
        cupti = _cupti()
    except ImportError as exc:
        return (f"the cupti-python package is not importable ({exc}); "
                "pip install 'pycudagraph[profile]'")
    except Exception as exc:  # noqa: BLE001 - a broken install: say what it raised
        return f"importing cupti failed: {type(exc).__name__}: {exc}"
    try:
        cupti.get_timestamp()
    except Exception as exc:  # noqa: BLE001 - libcupti missing or too old for the binding
        return f"cupti-python imports but libcupti does not answer: {type(exc).__name__}: {exc}"
    return None


def _kinds(cupti) -> tuple:
    k = cupti.ActivityKind
    return (k.CONCURRENT_KERNEL, k.MEMCPY, k.MEMSET)


def _buffer_requested():
    return 8 << 20, 0


def _buffer_completed(activities) -> None:
    """Copy what we need out of each record (the buffer is reused after this returns)."""
    sink = _state["records"]
    if sink is None:
        return
    for a in activities:
        node_id = getattr(a, "graph_node_id", 0)
        if not node_id:
            continue
        sink.append((int(node_id), int(a.correlation_id), int(a.start), int(a.end)))


def _register(cupti) -> None:
    """``cuptiActivityRegisterCallbacks``, once per process."""
    if not _state["registered"]:
        cupti.activity_register_callbacks(_buffer_requested, _buffer_completed)
        _state["registered"] = True


def _graph_data(cupti, cbdata):
    """The ``CUpti_GraphData`` of a resource callback, however the binding hands it over."""
    rd = cbdata
    if not hasattr(rd, "resource_descriptor"):
        rd = cupti.ResourceData.from_ptr(int(cbdata))
    return cupti.GraphData.from_ptr(int(rd.resource_descriptor))


def _subscribe(cupti, callback) -> int:
    """``cuptiSubscribe_v2`` with a subscriber name where the binding has it (a refusal
    then names the profiler already subscribed), else ``cuptiSubscribe``."""
    if hasattr(cupti, "subscribe_v2") and hasattr(cupti, "SubscriberParams"):
        params = cupti.SubscriberParams()
        params.struct_size = cupti.SUBSCRIBER_PARAMS_SIZE
        params.subscriber_name = "pycudagraph profile"
        return cupti.subscribe_v2(callback, None, params.ptr)
    return cupti.subscribe(callback, None)


def _instantiate_mapped(cupti, graph) -> tuple:
    """(exec, {exec node id: graph node id}): ``graph.instantiate()`` while subscribed to
    ``CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED`` (``cuptiSubscribe``, ``cuptiEnableCallback``,
    ``cuptiUnsubscribe``)."""
    copied: dict = {}
    errors: list = []
    resource = int(cupti.CallbackDomain.RESOURCE)
    cloned = int(cupti.CallbackIdResource.GRAPHNODE_CLONED)

    def callback(userdata, domain, cbid, cbdata):
        if int(domain) != resource or int(cbid) != cloned:
            return
        try:
            gd = _graph_data(cupti, cbdata)
            copied[int(cupti.get_graph_node_id(int(gd.node)))] = \
                int(cupti.get_graph_node_id(int(gd.original_node)))
        except Exception as exc:  # noqa: BLE001 - never raise into CUPTI
            errors.append(exc)

    try:
        sub = _subscribe(cupti, callback)
    except Exception as exc:  # noqa: BLE001 - another subscriber (a profiler) holds CUPTI
        raise CuptiUnusable(f"cuptiSubscribe failed ({exc}); is another profiler attached?") \
            from None
    try:
        cupti.enable_callback(1, sub, resource, cloned)
        exe = graph.instantiate()
    finally:
        cupti.unsubscribe(sub)
    if errors and not copied:
        exe.close()
        raise CuptiUnusable(f"reading CUPTI's node-copy callbacks failed: {errors[0]!r}")
    # a copy of a copy (a child graph's nodes) maps to the first original
    for new, old in list(copied.items()):
        seen = 0
        while old in copied and seen < 8:
            old = copied[old]
            seen += 1
        copied[new] = old
    return exe, copied


def measure(graph, places, stream, repeats: int) -> Samples:
    """Per-launch times of every node of ``graph`` (see the module docstring)."""
    with _lock:
        return _measure(_cupti(), graph, places, stream, repeats)


def _measure(cupti, graph, places, stream, repeats: int) -> Samples:
    try:
        _register(cupti)
        ids = {int(cupti.get_graph_node_id(int(pl.node.handle))): pl.node for pl in places}
    except Exception as exc:  # noqa: BLE001 - cuptiError, a missing libcupti
        raise CuptiUnusable(f"{type(exc).__name__}: {exc}") from None
    exe, copied = _instantiate_mapped(cupti, graph)
    records: list = []
    try:
        exe.launch(stream)  # warm-up, not recorded
        exe.synchronize()
        _state["records"] = records
        for kind in _kinds(cupti):
            cupti.activity_enable(kind)
        try:
            for _ in range(repeats):
                exe.launch(stream)
            exe.synchronize()
        finally:
            for kind in _kinds(cupti):
                cupti.activity_disable(kind)
            cupti.activity_flush_all(1)
            for _ in range(20):  # in case the records come back on CUPTI's own thread
                if records:
                    break
                time.sleep(0.05)
                cupti.activity_flush_all(1)
            _state["records"] = None
    except CuptiUnusable:
        raise
    except Exception as exc:  # noqa: BLE001 - cuptiError from enable/flush
        if type(exc).__module__.startswith("pycudagraph"):
            raise
        raise CuptiUnusable(f"CUPTI activity recording failed: {exc}") from None
    finally:
        exe.close()
    return _samples(records, copied, ids, places)


def _samples(records, copied, ids, places) -> Samples:
    """Group ``records`` by launch (correlation id) and node; containers get the span of
    their inner nodes' records. Launches none of whose records names a node of the graph
    (other work on the GPU) are left out."""
    low: dict = {}
    for node_id, node in ids.items():
        low.setdefault(node_id & 0xFFFFFFFF, []).append(node)
    launches: dict = {}
    for node_id, corr, start, end in records:
        node = ids.get(copied.get(node_id, node_id))
        if node is None and not copied:  # no copy callbacks: the low 32 bits are a local id
            same = low.get(node_id & 0xFFFFFFFF, ())
            node = same[0] if len(same) == 1 else None
        launches.setdefault(corr, []).append((node, start, end))
    ours = [recs for recs in launches.values() if any(r[0] is not None for r in recs)]
    if records and not ours:
        raise CuptiUnusable(f"none of CUPTI's {len(records)} records named a node of the graph "
                            f"({len(copied)} node copies reported at instantiation)")
    out = Samples("cupti", "host, event, empty and allocation nodes")
    parents = {pl.node: pl.parent for pl in places}
    for recs in sorted(ours, key=lambda rs: min(r[1] for r in rs)):
        times: dict = {}
        spans: dict = {}
        lost = 0.0
        for node, start, end in recs:
            us = (end - start) / 1000.0
            if node is None:
                lost += us
                continue
            t, n = times.get(node, (0.0, 0))
            times[node] = (t + us, n + 1)
            up = parents.get(node)
            while up is not None:  # a child graph or conditional node spans its inner work
                a, b = spans.get(up, (start, end))
                spans[up] = (min(a, start), max(b, end))
                up = parents.get(up)
        for node, (a, b) in spans.items():
            times.setdefault(node, ((b - a) / 1000.0, 1))
        out.launches.append(times)
        out.unattributed.append(lost)
        out.seen.update(times)
    if not out.launches:  # nothing of the graph runs on the GPU
        out.launches, out.unattributed = [{}], [0.0]
    return out
