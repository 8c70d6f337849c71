"""Fake conditional nodes, kernel nodes and execs for the CPU tests of per-node exec
updates (conditional bodies, update twins), and a ``driver`` fixture that records the exec's
kernel-node updates. No raw call reaches CUDA.
"""

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
import pycudagraph.graph.exec as exec_mod
import pycudagraph.graph.graph as graph_mod
from pycudagraph._lifetime import Ledger
from tests.support.fakes import _ids, fake_exec, fake_kernel

SIG = "int a, int b"


def if_node(g):
    """A fake IfNode of ``g`` with one (fake) body graph."""
    node = pcg.IfNode(g, next(_ids), pcg.ConditionalHandle(g, 1))
    node._bodies = (g._wrap_child(rt.cudaGraph_t(next(_ids)), owner=node),)
    g._nodes[node._h] = node
    return node


def kernel_node(g, a, b):
    pack = fake_kernel(SIG).pack((a, b), 1, 32)
    node = pcg.KernelNode(g, next(_ids), pack)
    g._nodes[node._h] = node
    return node


@pytest.fixture
def driver(monkeypatch):
    """Records the exec's kernel-node updates; cudaGraphDestroyNode does nothing."""
    sent = []
    monkeypatch.setattr(exec_mod, "_native_set_arg", None)
    monkeypatch.setattr(exec_mod, "_exec_set",
                        lambda exe, h, pack, node: sent.append((h, list(pack.values()))))
    real_call = graph_mod.call
    monkeypatch.setattr(graph_mod, "call", lambda fn, *a: None if fn is rt.cudaGraphDestroyNode
                        else real_call(fn, *a))
    return sent


def exec_of(g):
    """A fake exec of ``g``, holding the packs of the kernel nodes it was made from."""
    exe = fake_exec(g)
    exe._ledger = Ledger(owner=exe)
    exe._src = {n._h: n._pack for n in g._all_nodes() if type(n) is pcg.KernelNode}
    g._execs.add(exe)
    return exe
