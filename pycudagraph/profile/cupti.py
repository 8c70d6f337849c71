"""The profiler's CUPTI method: activity records name the graph node that ran them.

CUPTI (the optional ``cupti-python`` package) writes one record per kernel, memcpy and
memset the GPU runs, with its start and end in nanoseconds and ``graph_node_id``: the id of
the node *of the executable graph*. Instantiation copies every node, so those ids are not
the ids of the graph's own nodes; CUPTI reports each copy as it is made
(``CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED``: the new node and the one it copies). This
module therefore instantiates a twin of the exec from its graph while subscribed to that
callback, maps each copy's id back to the graph's node (``cuptiGetGraphNodeId``), then
launches the twin with activity recording on and groups the records by the correlation id
of the ``cudaGraphLaunch`` that ran them (:mod:`.profile_records`).

CUDA allows only one executable graph at a time of a graph that holds conditional nodes
(as it documents for memory-allocation and device-updatable kernel nodes): the exec being
profiled is that one, so the twin is refused (``cudaErrorNotSupported``). Then the exec
itself is launched with recording on; no copy was reported for its nodes, so each record's
node is found by what it did (kernel name, size), where only one node fits.

Host, event, empty and allocation nodes leave no activity record. Records CUPTI gives no
node for are counted as unattributed time, never dropped silently.
"""

from __future__ import annotations

import threading
import time

from ..errors import CudaError
from ..graph.exec_reuse import paused
from .records import ONE_EXEC, CuptiUnusable, Samples, samples

__all__ = ["CuptiUnusable", "unavailable", "measure"]

_lock = threading.Lock()
_state: dict = {"registered": False, "records": None, "kinds": {}}


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


def _record_name(a) -> str:
    return str(getattr(a, "name", "") or "")


def _record_bytes(a) -> int:
    return int(getattr(a, "bytes", 0))


def _kind_names(cupti) -> dict:
    """``{activity kind value: (kind, reader)}``: what a record did (``"kernel"``,
    ``"memcpy"``, ``"memset"``, as :meth:`Node.work` names it) and what it shows of it (a
    kernel's name, the bytes)."""
    k = cupti.ActivityKind
    return {int(k.CONCURRENT_KERNEL): ("kernel", _record_name),
            int(k.MEMCPY): ("memcpy", _record_bytes), int(k.MEMSET): ("memset", _record_bytes)}


def _buffer_requested():
    return 8 << 20, 0


def _buffer_completed(activities) -> None:
    """Copy what we need out of each record (the buffer is reused after this returns)."""
    sink = _state["records"]
    if sink is None:
        return
    kinds = _state["kinds"]
    for a in activities:
        node_id = getattr(a, "graph_node_id", 0)
        if not node_id:
            continue
        kind = kinds.get(getattr(a, "kind", None))
        sig = None if kind is None else (kind[0], kind[1](a))
        sink.append((int(node_id), int(a.correlation_id), int(a.start), int(a.end), sig))


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
        with paused():  # a real instantiate: its node copies are what CUPTI reports
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


def measure(graph, places, stream, repeats: int, exe=None) -> Samples:
    """Per-launch times of every node of ``graph`` (see the module docstring). ``exe``,
    the exec being profiled, is launched itself where CUDA refuses a twin."""
    with _lock:
        return _measure(_cupti(), graph, places, stream, repeats, exe)


def _measure(cupti, graph, places, stream, repeats: int, exe) -> Samples:
    try:
        _register(cupti)
        ids = {int(cupti.get_graph_node_id(int(pl.node.handle))): pl.node for pl in places}
    except Exception as exc:  # noqa: BLE001 - cuptiError, a missing libcupti
        raise CuptiUnusable(f"{type(exc).__name__}: {exc}") from None
    refused = None
    try:
        run, copied = _instantiate_mapped(cupti, graph)
    except CudaError as exc:  # one exec at a time of this graph (conditional nodes ...)
        if exe is None:
            raise CuptiUnusable(f"CUDA refused a twin of the exec: {exc}", about_graph=True) \
                from None
        run, copied, refused = exe, {}, exc
    try:
        records = _record(cupti, run, stream, repeats)
    finally:
        if refused is None:
            run.close()
    out = samples(records, copied, ids, places, launches=repeats)
    out.detail.update(mode="twin" if refused is None else "exec itself", ids=ids,
                      copied=copied)
    if refused is not None:
        out.notes.insert(0, f"CUPTI timed the exec itself: CUDA refused a second executable "
                            f"graph of its graph ({refused.name}; {ONE_EXEC}), so no node "
                            "copies were reported and records were matched to nodes by kernel "
                            "name and size")
        if any(getattr(pl.node, "kind", "") == "while" for pl in places):
            out.notes.append(WHILE_ONE_PASS)
            out.detail["while_one_pass"] = True
    return out


#: Seen on an H100 (CUDA 13.0 driver, cupti-python 13.0.1): timing the exec itself, CUPTI
#: reported one record per launch for each node of a ``while`` body that ran 5 passes.
WHILE_ONE_PASS = ("while bodies: timing the exec itself, CUPTI was seen to record one pass "
                  "of a while body per launch, so the body's times and runs here may be one "
                  "pass's, not the loop's (close the exec's twin-blocking siblings, or time "
                  "the loop as a whole from its conditional node's row)")


def _record(cupti, run, stream, repeats: int) -> list:
    """Launch ``run`` once to warm up, then ``repeats`` times with kernel, memcpy and
    memset recording on (``cuptiActivityEnable``, ``cudaGraphLaunch``,
    ``cuptiActivityFlushAll``); the records as (exec node id, correlation id, start ns,
    end ns, what it did)."""
    records: list = []
    try:
        run.launch(stream)  # warm-up, not recorded
        run.synchronize()
        _state["records"] = records
        _state["kinds"] = _kind_names(cupti)
        for kind in _kinds(cupti):
            cupti.activity_enable(kind)
        try:
            for _ in range(repeats):
                run.launch(stream)
            run.synchronize()
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
    except Exception as exc:  # noqa: BLE001 - cuptiError from enable/flush
        if type(exc).__module__.startswith("pycudagraph"):
            raise
        raise CuptiUnusable(f"CUPTI activity recording failed: {exc}") from None
    return records
