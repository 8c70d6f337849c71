"""A second capture of a saved key's call, to tell a number a library left in a by-value
argument from an address its graph reads.

PyTorch passes much of a kernel's launch state by value: a struct of sizes, strides and
data addresses, of which a launch fills only the parts its tensors need. The rest keeps
whatever the host stack held, which can be the address of some other live tensor. A graph
file cannot say where such a value lies (it is no weight, buffer, input, pool or
workspace), so :func:`~.graphed_save.save_graphed` would leave the key out.

An address the graph reads is the same in every capture of the call with the same inputs:
the array it names has not moved. A left-over is whatever the stack held at that capture.
:func:`left_overs` captures the call once more, in a new thread, after one eager run on
copies of the inputs as any capture's warm-up (``cudaStreamBeginCapture`` /
``cudaStreamEndCapture`` on a side stream, into a throwaway pool; nothing instantiated)
and answers which values hold another value at every place in the second graph. Those
are no address the graph uses, and a file keeps them as the numbers they are. The two
graphs need not have the same nodes: a graphed key's own capture ends with copies of its
outputs, and a library may choose another kernel; nodes are paired by the longest runs of
the same node type and function (:func:`paired`). A value equal at any place, a place
whose node has no counterpart, or a call that cannot be captured again proves nothing:
the key is left out, as before.
"""

from __future__ import annotations

import difflib
import threading

from ..capture.capture import capture
from ..runtime.device import Device, device as device_scope
from ..runtime.stream import Stream
from .arrays import substitute
from .ops import framework_streams, twin
from .pools import CapturePool

__all__ = ["left_overs", "differing", "paired", "fresh_stack_thread"]


def paired(nodes: list, second: list) -> dict:
    """Node index in ``nodes`` -> the index of its counterpart in ``second`` (another
    capture of the same call), by the longest matching runs of node type and launched
    function (``difflib.SequenceMatcher``): nodes the second capture has not (the copies of
    a key's outputs into its outputs pool, which a graphed key captures last), or has in
    place of others (a library that chose another kernel), pair with nothing. Reads each
    kernel node's function (``cuGraphKernelNodeGetParams``)."""
    def signature(graph: list) -> list:
        return [(type(n), _function(n)) for n in graph]

    match = difflib.SequenceMatcher(None, signature(nodes), signature(second), autojunk=False)
    return {a + k: b + k for a, b, size in match.get_matching_blocks() for k in range(size)}


def differing(found: dict, nodes: list, second: list, why: dict | None = None) -> set:
    """The values of ``found`` (``{value: [(node index, place), ...]}``, read in the graph
    whose nodes are ``nodes``) that hold another value at every one of their places in a
    second capture of the same call (``second``: its nodes in walk order, paired with
    ``nodes`` by :func:`paired`). A place whose node has no counterpart proves nothing:
    ``why[value]`` (a dict) then says so. Reads each node's sites
    (``cuGraphKernelNodeGetParams``)."""
    pairs = paired(nodes, second)
    values: dict = {}  # node index -> {place: value} at its counterpart

    def value_at(i: int, place: str):
        if i not in values:
            j = pairs.get(i)
            values[i] = None if j is None else {s.place: s.address for s in second[j].sites()}
        there = values[i]
        return None if there is None else there.get(place, 0)

    out = set()
    for v, places in found.items():
        seen = [value_at(i, place) for i, place in places]
        if all(w is not None and w != v for w in seen):
            out.add(v)
        elif None in seen and why is not None:
            why[v] = (f"a second capture of the call has no node like the one holding it "
                      f"({len(second)} nodes against the key's {len(nodes)})")
    return out


_STACK = threading.Lock()
_stack_size = [0]  # the stack size the last second capture's thread asked for


def fresh_stack_thread(target, name: str) -> threading.Thread:
    """``target`` started in a new thread whose stack no earlier thread used.

    glibc keeps the stacks of finished threads and gives a new thread one at least as
    large as it asks for and at most four times larger, unwiped: the stack of the
    previous key's second capture, with that key's addresses left in it. Each call asks for
    more than the last (``threading.stack_size``, set back at once), so the stack is a new
    mapping, zeroed by the kernel."""
    with _STACK:
        size = _stack_size[0] = max(_stack_size[0] + (64 << 10), 32 << 20)
        before = threading.stack_size(size)
        try:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
        finally:
            threading.stack_size(before)
    return t


def _function(node):
    """The function a kernel node launches, or None for other nodes."""
    params = getattr(node, "driver_params", None)
    if params is None:
        return None
    p = params()
    return int(getattr(p, "func", 0) or 0) or int(getattr(p, "kern", 0) or 0)


def left_overs(fn, entry, graph_nodes: list, found: dict, why: dict | None = None) -> set:
    """The values of ``found`` (``{value: [(node index, place), ...]}`` in ``entry``'s
    graph, whose walk gave ``graph_nodes``) that a second capture of ``fn`` on the key's
    latest inputs (``entry.bound``) holds another value at, everywhere (:func:`differing`).
    The second capture runs in a new thread on a stack no thread used before
    (:func:`fresh_stack_thread`): it holds none of this one's left-overs (a left-over
    written once, long before, stays put in one thread's stack through every later
    capture), nor those of an earlier key's second capture. Empty when the call cannot be
    captured again; then ``why`` (a dict) gets the reason at ``why[None]``, and a value
    whose node the second capture has not at ``why[value]`` (:func:`differing`).
    ``cudaStreamBeginCapture`` / ``cudaStreamEndCapture``, then ``cudaGraphDestroy`` of the
    second graph."""
    if not found or not entry.bound:
        if found and why is not None:
            why[None] = "no inputs of the key are kept to capture its call again with"
        return set()
    args, kwargs = entry.bound
    box: dict = {}

    def second() -> None:
        try:
            with device_scope(entry.device):
                Device(entry.device).synchronize()  # the inputs are ready for the copies
                side = Stream(non_blocking=True)
                pool = CapturePool()
                with framework_streams(side.ptr, entry.device):
                    # one eager run on copies first, as a capture's warm-up: this thread's
                    # library handles (cuBLAS ...) are made outside the capture
                    warm_args, warm_kwargs = substitute((args, kwargs), twin)
                    fn(*warm_args, **warm_kwargs)
                    side.synchronize()
                    del warm_args, warm_kwargs
                    with capture(side, mode="thread_local", pool=pool) as cap:
                        fn(*args, **kwargs)
                graph = cap.graph
                try:
                    box["stale"] = differing(found, graph_nodes,
                                             [node for node, _, _ in graph.table.walk()], why)
                finally:
                    graph.close()
        except Exception as exc:  # noqa: BLE001 - proves nothing: the key stays out
            box["error"] = exc

    t = fresh_stack_thread(second, "pycudagraph-save-second-capture")
    t.join()
    if "error" in box and why is not None:
        err = box["error"]
        why[None] = (f"capturing the call again failed ({type(err).__name__}: "
                     f"{str(err).splitlines()[0][:200] if str(err) else ''})")
    return box.get("stale", set())
