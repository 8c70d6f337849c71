"""Misuse (CPU): wrong values given to constructors and options are refused before any CUDA
call, with an ArgumentError naming the parameter and the value.

A string where a bool belongs used to turn the flag on (``bool("no")`` is True), a float byte
count was truncated, and wrong types became bare internal errors. Each check here runs
before the first device use, so no GPU is needed (and none is touched)."""

import numpy as np
import pytest

import pycudagraph as pcg

from tests.support.fakes import fake_graph

NOT_BOOL = ["no", "yes", "", "False", None, 2, -1, 0.0, 1.5, [], {}, b"1", np.int64(2), object()]
NOT_SIZE = ["64", b"64", 1.0, 64.5, None, True, False, [64], {64: 1}, complex(64), np.float32(64),
            object()]
NOT_PRIORITY = ["0", 0.5, None, True, [], 2**40, -(2**40)]


@pytest.mark.parametrize("value", NOT_BOOL, ids=repr)
def test_stream_non_blocking_must_be_a_bool(value):
    with pytest.raises(pcg.ArgumentError, match="Stream: non_blocking must be True or False"):
        pcg.Stream(non_blocking=value)


@pytest.mark.parametrize("value", NOT_PRIORITY, ids=repr)
def test_stream_priority_must_be_an_int(value):
    with pytest.raises(pcg.ArgumentError, match="Stream: priority"):
        pcg.Stream(priority=value)


@pytest.mark.parametrize("field", ["timing", "blocking"])
@pytest.mark.parametrize("value", NOT_BOOL[:8], ids=repr)
def test_event_flags_must_be_bools(field, value):
    with pytest.raises(pcg.ArgumentError, match=f"Event: {field} must be True or False"):
        pcg.Event(**{field: value})


@pytest.mark.parametrize("cls", [pcg.DeviceBuffer, pcg.PinnedBuffer], ids=lambda c: c.__name__)
@pytest.mark.parametrize("nbytes", NOT_SIZE, ids=repr)
def test_buffer_size_must_be_an_int(cls, nbytes):
    with pytest.raises(pcg.ArgumentError, match=f"{cls.__name__}: nbytes must be an int"):
        cls(nbytes)


@pytest.mark.parametrize("cls", [pcg.DeviceBuffer, pcg.PinnedBuffer], ids=lambda c: c.__name__)
@pytest.mark.parametrize("nbytes", [0, -1, -(2**63)])
def test_buffer_size_must_be_positive(cls, nbytes):
    with pytest.raises(pcg.ArgumentError, match=f"{cls.__name__} needs a positive size.*{nbytes}"):
        cls(nbytes)


def test_a_numpy_integer_size_is_an_int():
    try:
        buf = pcg.DeviceBuffer(np.int64(64))
    except pcg.CudaNotAvailableError:
        return  # accepted: it got as far as the device, which this machine lacks
    assert buf.nbytes == 64 and type(buf.nbytes) is int
    buf.free()


@pytest.mark.parametrize("flag", ["auto_free_on_launch", "device_launch", "use_node_priority"])
@pytest.mark.parametrize("value", ["no", "yes", None, 2, 0.5, [], "False"], ids=repr)
def test_instantiate_flags_must_be_bools(cpu_device, flag, value):
    with pytest.raises(pcg.ArgumentError, match=f"instantiate: {flag} must be True or False"):
        fake_graph().instantiate(**{flag: value})


@pytest.mark.parametrize("mode", [3, None, ["global"], {"global": 1}, b"global", "Global",
                                  "thread-local", ""], ids=repr)
def test_capture_mode_must_be_a_known_name(mode):
    with pytest.raises(pcg.ArgumentError, match="capture mode must be one of"):
        pcg.capture(pcg.Stream.wrap(0x5000), mode=mode)


@pytest.mark.parametrize("mode", [None, ["relaxed"], 1, "RELAXED"], ids=repr)
def test_capture_mode_block_must_be_a_known_name(mode):
    with pytest.raises(pcg.ArgumentError, match="capture_mode must be one of"):
        pcg.capture_mode(mode)


@pytest.mark.parametrize("field, value, words", [
    ("deps", 5, "capture: deps must be a sequence"),
    ("deps", "n0", "capture: deps must be a sequence"),
    ("keep", 1.5, "capture: keep must be a sequence"),
    ("keep", {"a": 1}, "capture: keep must be a sequence"),
    ("graph", "g", "capture: graph must be a pycudagraph.Graph"),
    ("graph", 5, "capture: graph must be a pycudagraph.Graph"),
])
def test_capture_options_are_checked(field, value, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.capture(pcg.Stream.wrap(0x5000), **{field: value})


def _make(size):
    raise AssertionError("no step is made while the options are refused")


@pytest.mark.parametrize("kwargs, words", [
    (dict(buckets="abc"), "buckets must be a sequence"),
    (dict(buckets=5), "buckets must be a sequence"),
    (dict(buckets=[1.5, 2]), "a bucket size must be an int"),
    (dict(buckets=["8"]), "a bucket size must be an int"),
    (dict(buckets=[True]), "a bucket size must be an int"),
    (dict(buckets=[None]), "a bucket size must be an int"),
    (dict(buckets=[]), "buckets must be positive sizes"),
    (dict(buckets=[0, 8]), "buckets must be positive sizes"),
    (dict(buckets=[-8]), "buckets must be positive sizes"),
    (dict(make=None), "make must be callable"),
    (dict(make=42), "make must be callable"),
    (dict(warmup="1"), "warmup must be an int"),
    (dict(warmup=1.5), "warmup must be an int"),
    (dict(warmup=-1), "warmup must be >= 0"),
    (dict(stream="s"), "cannot use str as a CUDA stream"),
    (dict(stream=1.5), "cannot use float as a CUDA stream"),
])
def test_bucketed_graphs_options_are_checked(kwargs, words):
    args = dict(buckets=[8, 16], make=_make) | kwargs
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.BucketedGraphs(**args)


@pytest.mark.parametrize("size, words", [("4", "size must be an int"), (2.5, "size must be an int"),
                                         (None, "size must be an int"), (0, "size must be positive"),
                                         (-3, "size must be positive")])
def test_bucketed_graphs_call_size_is_checked(size, words):
    bg = pcg.BucketedGraphs([8, 16], _make, stream=pcg.Stream.wrap(0x5000))
    with pytest.raises(pcg.ArgumentError, match=words):
        bg(size)
    if words == "size must be an int":
        with pytest.raises(pcg.ArgumentError, match=words):
            bg.bucket_for(size)


@pytest.mark.parametrize("stream, words", [
    ("0", "cannot use str as a CUDA stream"),
    (1.0, "cannot use float as a CUDA stream"),
    (True, "cannot use bool as a CUDA stream"),
    ([1], "cannot use list as a CUDA stream"),
    (-1, "stream: an address must be in 0 .. 2\\*\\*64-1"),
    (2**64, "stream: an address must be in 0 .. 2\\*\\*64-1"),
])
def test_stream_wrap_refuses_what_is_not_a_stream(stream, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.Stream.wrap(stream)


class _BadProtocol:
    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        return self.value


@pytest.mark.parametrize("value", [5, (0,), (0, "x"), (0, -4), None, "ab"], ids=repr)
def test_stream_wrap_refuses_a_malformed_cuda_stream_protocol(value):
    with pytest.raises(pcg.ArgumentError, match="__cuda_stream__"):
        pcg.Stream.wrap(_BadProtocol(value))


def test_stream_wrap_takes_numpy_integers():
    assert pcg.Stream.wrap(np.uint64(0x5000)).ptr == 0x5000


@pytest.mark.parametrize("event", [None, "ev", 5, pcg.Stream.wrap(0x5000)], ids=repr)
def test_stream_wait_needs_an_event(event):
    with pytest.raises(pcg.ArgumentError, match="Stream.wait: event must be a pycudagraph.Event"):
        pcg.Stream.wrap(0x5000).wait(event)


def _flag_calls():
    from pycudagraph.compile import link as pcg_link
    g = fake_graph()
    return {
        "wait_value(flush=)": lambda v: pcg.wait_value(0x1000, 1, flush=v),
        "write_value(barrier=)": lambda v: pcg.write_value(0x1000, 1, barrier=v),
        "ExternalSemaphore.import_fd(timeline=)": lambda v: pcg.ExternalSemaphore.import_fd(
            3, timeline=v),
        "link(device_runtime=)": lambda v: pcg_link.link(object(), device_runtime=v),
        "graphed(copy_outputs=)": lambda v: pcg.graphed(print, copy_outputs=v),
        "graph_mem_reset_high(used=)": lambda v: pcg.graph_mem_reset_high(used=v),
        "debug_dot_print(verbose=)": lambda v: g.debug_dot_print("/tmp/x.dot", verbose=v),
        "host_pointer(writable=)": lambda v: pcg.host_pointer(np.zeros(4), writable=v),
        "trace(echo=)": lambda v: pcg.trace(echo=v),
    }


@pytest.mark.parametrize("where", sorted(_flag_calls()))
@pytest.mark.parametrize("value", ["no", None, 2, 0.0], ids=repr)
def test_every_flag_refuses_what_is_not_a_bool(cpu_device, where, value):
    """A string (``bool("no")`` is True), None, 2 or 0.0 where a flag belongs is refused,
    naming the flag, before any CUDA call."""
    flag = where.split("(")[1].rstrip("=)")
    with pytest.raises(pcg.ArgumentError, match=f"{flag} must be True or False"):
        _flag_calls()[where](value)
