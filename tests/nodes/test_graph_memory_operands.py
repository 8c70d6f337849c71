"""CPU test: a copy or memset may name memory of a graph allocation (``MemAllocNode``) by its
address or by the node, though ``cudaPointerGetAttributes`` cannot place such an address
(graph memory is mapped only while the graph runs). No raw call reaches CUDA."""

import pytest

import pycudagraph as pcg
from pycudagraph.nodes import copy_params
from tests.support.fakes import _ids, fake_graph


@pytest.fixture
def alloc():
    g = fake_graph()
    node = pcg.MemAllocNode(g.table, next(_ids))
    node.nbytes_at_build = 4096
    start = 0x7F00_1000_0000
    copy_params.GRAPH_ALLOCATIONS[start] = node
    yield g.table.register(node), start
    copy_params.GRAPH_ALLOCATIONS.pop(start, None)


def test_an_address_inside_a_graph_allocation_is_device_memory_sized_to_its_end(alloc):
    node, start = alloc
    assert copy_params.locate(start + 1000, "memset dst") == (start + 1000, True, 3096)
    assert copy_params.graph_allocation(start + 4096) is None  # one past the end: not inside


def test_the_allocation_node_itself_is_a_device_operand(alloc, monkeypatch):
    node, start = alloc
    monkeypatch.setattr(pcg.MemAllocNode, "ptr", property(lambda self: start))
    assert copy_params.locate(node, "memcpy src") == (start, True, 4096)


def test_a_memset_past_the_allocation_is_refused(alloc):
    node, start = alloc
    with pytest.raises(pcg.ArgumentError, match="does not fit the destination"):
        copy_params.memset_params(None, start + 4000, 0, 100, 4)
