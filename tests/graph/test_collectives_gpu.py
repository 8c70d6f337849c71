"""GPU tests of ``pcg.capture(..., collectives=)`` on one GPU, without NCCL (a stand-in
communicator key): the second graph's launch on another stream waits for the first
(``"serialize"``) or is refused while it runs (``"refuse"``); graphs of other
communicators, and graphs captured plainly, are not held back."""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.capture.collectives import CollectiveGraphExec, CollectiveOrderError

pytestmark = pytest.mark.gpu

HOLD = 100_000_000  # clock64 cycles of the spin kernel: tens of milliseconds


def _graphs(helpers, x, y, mode, first_comm=0x11, second_comm=0x11):
    """The first graph spins, then writes x = 1; the second copies x into y."""
    a, b = pcg.Stream(), pcg.Stream()
    with pcg.capture(a, collectives=mode) as cap:
        cap.collective(first_comm)
        helpers["spin"].launch(1, 1, (HOLD,), stream=a)
        helpers["fill"].launch(1, 32, (x, 1.0, 1), stream=a)
    first = cap.graph.instantiate()
    with pcg.capture(b, collectives=mode) as cap:
        cap.collective(second_comm)
        helpers["copy"].launch(1, 32, (y, x, 1), stream=b)
    second = cap.graph.instantiate()
    return a, b, first, second


def _value(buf) -> float:
    return float(buf.to_numpy(np.float32, (1,))[0])


def test_serialize_orders_the_second_graph_after_the_first(helpers):
    x, y = pcg.DeviceBuffer(4), pcg.DeviceBuffer(4)
    x.zero()
    y.zero()
    a, b, first, second = _graphs(helpers, x, y, "serialize")
    assert isinstance(first, CollectiveGraphExec) and first.collectives.mode == "serialize"
    first.launch(a)
    second.launch(b)  # waits on the event recorded after the first's launch
    b.synchronize()
    assert _value(y) == 1.0
    a.synchronize()


def test_other_communicators_are_not_held_back(helpers):
    x, y = pcg.DeviceBuffer(4), pcg.DeviceBuffer(4)
    x.zero()
    y.zero()
    a, b, first, second = _graphs(helpers, x, y, "serialize", 0x11, 0x22)
    first.launch(a)
    second.launch(b)  # another communicator: runs at once, reading x before the fill
    b.synchronize()
    assert _value(y) == 0.0
    a.synchronize()


def test_refuse_names_both_graphs_then_launches_once_the_first_is_done(helpers):
    x, y = pcg.DeviceBuffer(4), pcg.DeviceBuffer(4)
    x.zero()
    y.zero()
    a, b, first, second = _graphs(helpers, x, y, "refuse")
    first.launch(a)
    with pytest.raises(CollectiveOrderError) as err:
        second.launch(b)
    text = str(err.value)
    assert text.count("graph 0x") == 2 and "may still run" in text and "test_collectives_gpu.py" in text
    a.synchronize()
    second.launch(b)  # the first is done: allowed
    b.synchronize()
    assert _value(y) == 1.0


def test_a_plain_capture_makes_an_ordinary_exec(helpers, stream):
    y = pcg.DeviceBuffer(4)
    with pcg.capture(stream) as cap:
        helpers["fill"].launch(1, 32, (y, 2.0, 1), stream=stream)
    exe = cap.graph.instantiate()
    assert type(exe) is pcg.GraphExec
    exe.launch(stream)
    stream.synchronize()
    assert _value(y) == 2.0
