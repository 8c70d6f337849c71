"""Fake conditional nodes, kernel nodes and execs for the CPU tests of per-node exec
updates (conditional bodies, update twins), and a ``driver`` fixture that records the exec's
kernel-node updates. No raw call reaches CUDA.
"""

import pytest
from cuda.bindings import runtime as rt

import pycudagraph.graph.topology as topology_mod
import pycudagraph.nodes.kernel_node as kernel_node_mod
from pycudagraph._cuda import fast
from tests.support.fakes import fake_exec, fake_if_node, fake_kernel_node

SIG = "int a, int b"


def if_node(g):
    """A fake IfNode of ``g`` with one (fake) body graph."""
    return fake_if_node(g)


def kernel_node(g, a, b):
    """A kernel node of ``g`` taking ``(int a, int b)``, built with ``(a, b)``."""
    return fake_kernel_node(g, args=(a, b), sig=SIG)


@pytest.fixture
def driver(monkeypatch):
    """Records the exec's kernel-node updates; cudaGraphDestroyNode does nothing;
    cuGraphExecUpdate succeeds."""
    sent = []

    def set_arg(exec_h, h, hot, address, refs, key, value, pack, exe, node):
        pack.set(pack.layout.slot_index(key), value)
        sent.append((h, list(pack.values())))

    def set_args(exec_h, h, hot, address, refs, args, pack, exe, node):
        pack.apply(args)
        sent.append((h, list(pack.values())))

    monkeypatch.setattr(kernel_node_mod, "_set_arg", set_arg)
    monkeypatch.setattr(kernel_node_mod, "_set_args", set_args)
    monkeypatch.setattr(fast, "exec_kernel_node_set_params",
                        lambda exe, h, pack, node: sent.append((h, list(pack.values()))))
    monkeypatch.setattr(fast, "exec_update", lambda *_: 0)
    real_call = topology_mod.call
    monkeypatch.setattr(topology_mod, "call",
                        lambda fn, *a: None if fn is rt.cudaGraphDestroyNode else real_call(fn, *a))
    return sent


def exec_of(g):
    """A fake exec of ``g`` (made by the one constructor: it copies ``g``'s table)."""
    return fake_exec(g)
