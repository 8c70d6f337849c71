"""Kernel nodes added with no object (a loaded graph's long runs: ``nodes/deferred_nodes.py``)
on the CPU, with stand-in graphs and execs: the table makes each node's ``KernelNode`` from
its record on first use, once; an exec made before the objects finds the parameters it
holds by the record; a node added after the exec is still refused by it; a removed node's
handle is forgotten; a dead table makes nothing. No CUDA call."""

import struct

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph._cuda import bulk
from pycudagraph.nodes.deferred_nodes import DeferredKernelNodes, deferrable
from tests.support.fakes import fake_exec, fake_graph, fake_kernel, fake_kernel_node

HANDLES = [0xD000, 0xD100, 0xD200]


def loaded(kernel):
    """A graph holding three nodes of ``kernel`` (float* y, float a, int n) as records, as
    ``add_run`` leaves them, and the record values."""
    g = fake_graph()
    n = bulk.arg_length(kernel)
    values = [(0x7F00_0000_1000 + 0x100 * i, 0.5 * (i + 1), 10 + i) for i in range(3)]
    args = np.frombuffer(b"".join(struct.pack("<Qfi", *v) for v in values), np.uint8).copy()
    recs = np.zeros(3, bulk.RECORD)
    recs["grid"], recs["block"] = (4, 1, 1), (128, 1, 1)
    recs["arg_offset"], recs["arg_length"] = [0, n, 2 * n], n
    store = DeferredKernelNodes((kernel,), {0: kernel.current_function()}, args)
    store.added(list(HANDLES), recs)
    g.table.deferred = store
    g.table.ledger.keep_also((kernel,))
    return g, values


def test_a_node_is_made_from_its_record_once_with_its_kernel_and_arguments_by_name(cpu_device):
    k = fake_kernel()
    g, values = loaded(k)
    assert not g.table.nodes
    node = g.table.node(HANDLES[1])
    assert type(node) is pcg.KernelNode and node.kernel is k
    assert node.params.args == {"y": values[1][0], "a": values[1][1], "n": values[1][2]}
    assert node.params.grid == (4, 1, 1) and node.params.block == (128, 1, 1)
    assert node.function == k.current_function()
    assert g.table.node(HANDLES[1]) is node and len(g.table.nodes) == 1
    assert g.table.built(node)  # registered: its pack in the ledger, as an add leaves it
    g.table.settle()
    assert [int(h) for h in g.table.nodes] == [HANDLES[1], HANDLES[0], HANDLES[2]]


def test_an_exec_made_before_the_objects_holds_what_the_records_say(cpu_device):
    k = fake_kernel()
    g, values = loaded(k)
    exe = fake_exec(g)  # taken before any node object existed
    node = g.table.node(HANDLES[2])
    rec = exe.exec_node(node)
    assert rec.args.values() == values[2] and rec.args is not node._pack  # its own copy
    assert g.table.as_added(node)[0].values() == values[2]
    later = fake_kernel_node(g)  # added after the exec: not one of its nodes
    with pytest.raises(pcg.PyCudaGraphError, match="nodes added since"):
        exe.exec_node(later)
    assert g.table.as_added(later) is None


def test_a_removed_handle_is_forgotten_and_a_dead_table_makes_nothing(cpu_device):
    g, _ = loaded(fake_kernel())
    g.table.forget(g.table.node(HANDLES[0]))
    assert HANDLES[0] not in g.table.deferred.handles()
    assert g.table.deferred.make(g.table, HANDLES[0]) is None
    g.table.kill("was destroyed")
    assert g.table.deferred is None and not g.table.nodes


def test_kernels_with_hidden_or_split_parameters_keep_their_objects():
    plain = fake_kernel()
    assert deferrable((plain,), [0])

    class Split:  # an argument spread over several kernel parameters: its own pointers
        layout = type("L", (), {"offsets": (80, 96), "pointer_offsets": (80, 88, 96)})()
        origin = None
    assert not deferrable((plain, Split()), [0, 1]) and deferrable((plain, Split()), [0])
