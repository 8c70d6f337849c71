"""pcg.graph_mem_info / graph_mem_trim / graph_mem_reset_high on the CPU: the raw calls are
replaced by recorders; the device argument is checked before any call. On the GPU (marker
``gpu``): the figures move as documented around a graph allocation."""

from __future__ import annotations

import gc
import importlib

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg

device_mod = importlib.import_module("pycudagraph.runtime.device")


@pytest.fixture
def pool(monkeypatch, cpu_device):
    calls = []
    values = {0: 1 << 20, 1: 3 << 20, 2: 2 << 21, 3: 5 << 21}

    def get(dev, attr):
        calls.append(("get", dev, int(attr)))
        return rt.cudaError_t.cudaSuccess, values[int(attr)]
    get.__name__ = "cudaDeviceGetGraphMemAttribute"

    def set_(dev, attr, value):
        calls.append(("set", dev, int(attr), int(value)))
        return (rt.cudaError_t.cudaSuccess,)
    set_.__name__ = "cudaDeviceSetGraphMemAttribute"

    def trim(dev):
        calls.append(("trim", dev))
        return (rt.cudaError_t.cudaSuccess,)
    trim.__name__ = "cudaDeviceGraphMemTrim"
    monkeypatch.setattr(rt, "cudaDeviceGetGraphMemAttribute", get)
    monkeypatch.setattr(rt, "cudaDeviceSetGraphMemAttribute", set_)
    monkeypatch.setattr(rt, "cudaDeviceGraphMemTrim", trim)
    monkeypatch.setattr(device_mod, "device_count", lambda: 2)
    return calls


def test_info_reads_the_four_attributes(pool):
    assert pcg.graph_mem_info() == {"used": 1 << 20, "used_high": 3 << 20,
                                    "reserved": 2 << 21, "reserved_high": 5 << 21}
    assert pool == [("get", 0, 0), ("get", 0, 1), ("get", 0, 2), ("get", 0, 3)]
    pcg.graph_mem_info(pcg.Device(1))
    assert pool[-1] == ("get", 1, 3)


def test_trim_and_reset(pool):
    pcg.graph_mem_trim(1)
    pcg.graph_mem_reset_high()
    pcg.graph_mem_reset_high(reserved=False)
    assert pool == [("trim", 1), ("set", 0, 1, 0), ("set", 0, 3, 0), ("set", 0, 1, 0)]


@pytest.mark.parametrize("dev,exc,text", [(2, ValueError, "no CUDA device 2"),
                                          ("0", TypeError, "got str"),
                                          (True, TypeError, "got bool")])
def test_bad_devices_make_no_call(pool, dev, exc, text):
    with pytest.raises(exc, match=text):
        pcg.graph_mem_info(dev)
    with pytest.raises(exc, match=text):
        pcg.graph_mem_trim(dev)
    assert pool == []


def test_a_failed_call_names_it(pool, monkeypatch):
    def get(dev, attr):
        return rt.cudaError_t.cudaErrorInvalidDevice, 0
    get.__name__ = "cudaDeviceGetGraphMemAttribute"
    monkeypatch.setattr(rt, "cudaDeviceGetGraphMemAttribute", get)
    with pytest.raises(pcg.CudaError, match="cudaDeviceGetGraphMemAttribute"):
        pcg.graph_mem_info()


# On the GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_graph_memory_figures_move_as_documented(stream):
    pcg.graph_mem_trim()
    pcg.graph_mem_reset_high()
    base = pcg.graph_mem_info()
    g = pcg.Graph()
    alloc = g.add_mem_alloc(64 << 20)
    g.add_mem_free(alloc, deps=[alloc])
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    after = pcg.graph_mem_info()
    assert after["reserved"] >= base["reserved"] + (64 << 20)  # the pool grew
    assert after["used_high"] >= 64 << 20  # the allocation was live during the launch
    # the exec keeps its allocation's memory mapped for the next launch, though the
    # graph freed it (cudaGraphMemAttrUsedMemCurrent: memory associated with graphs)
    assert after["used"] >= base["used"] + (64 << 20)
    exe.close()
    g.close()
    gc.collect()
    pcg.graph_mem_trim()
    trimmed = pcg.graph_mem_info()
    assert trimmed["used"] <= base["used"]  # the exec is gone: nothing is mapped for it
    assert trimmed["reserved"] < after["reserved"]  # trim gave the unused memory back
    pcg.graph_mem_reset_high()
    assert pcg.graph_mem_info()["used_high"] == trimmed["used"]
