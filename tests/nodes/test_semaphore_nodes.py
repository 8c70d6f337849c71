"""External-semaphore nodes on the CPU: the node params structs built from wrapped
semaphores, arguments checked before CUDA, the add / get / set / exec-set calls recorded
(no real external semaphore can be made without Vulkan or D3D: the gap is stated in
docs/API_MAP.md). On the GPU (marker ``gpu``): importing a file that is no semaphore
raises cleanly."""

from __future__ import annotations

import pytest
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from tests.support.fakes import fake_graph, fake_node

_OK = rt.cudaError_t.cudaSuccess
S1, S2 = 0x4900_0000, 0x4900_1000


@pytest.fixture
def rec(monkeypatch, cpu_device):
    seen = []
    stored = {}

    def patch(cls, attr, name, ret=None):
        def fn(*args):
            seen.append((name,) + args)
            if attr == "_SET":
                stored[int(args[0])] = args[1]
            if attr == "_GET":
                return _OK, stored[int(args[0])]
            if attr == "_ADD":
                stored[0x4A00_0000] = args[3]
                return _OK, rt.cudaGraphNode_t(0x4A00_0000)
            return (_OK,)
        fn.__name__ = name
        monkeypatch.setattr(cls, attr, staticmethod(fn))
    for cls, kind in ((pcg.ExtSemaphoreSignalNode, "Signal"), (pcg.ExtSemaphoreWaitNode, "Wait")):
        patch(cls, "_ADD", f"cudaGraphAddExternalSemaphores{kind}Node")
        patch(cls, "_GET", f"cudaGraphExternalSemaphores{kind}NodeGetParams")
        patch(cls, "_SET", f"cudaGraphExternalSemaphores{kind}NodeSetParams")
        patch(cls, "_EXEC_SET", f"cudaGraphExecExternalSemaphores{kind}NodeSetParams")
    return seen


def test_signal_node_params_and_calls(rec):
    g = fake_graph()
    a = fake_node(g)
    s1, s2 = pcg.ExternalSemaphore.wrap(S1), pcg.ExternalSemaphore.wrap(S2)
    node = g.add_ext_semaphore_signal([s1, s2], values=[5, 7], deps=[a])
    assert isinstance(node, pcg.ExtSemaphoreSignalNode) and node.type == "ext_semaphore_signal"
    name, graph, deps, n, p = rec[-1]
    assert (name, int(graph), [int(d) for d in deps], n) == (
        "cudaGraphAddExternalSemaphoresSignalNode", g.table.h, [a._h], 1)
    assert int(p.numExtSems) == 2
    assert node.params == [(S1, 5), (S2, 7)]
    node.set_params(s2, values=9)
    assert rec[-1][0] == "cudaGraphExternalSemaphoresSignalNodeSetParams"
    assert node.params == [(S2, 9)]
    assert g.table.kept(node)[0] == (s2,)  # the graph keeps the semaphore alive
    exe = pcg.GraphExec.wrap(0x4B00_0000, graph=g)
    exe.set_params(node, semaphores=[s1], values=3)
    name, e, target, p = rec[-1]
    assert (name, int(e), int(target), int(p.numExtSems)) == (
        "cudaGraphExecExternalSemaphoresSignalNodeSetParams", 0x4B00_0000, node._h, 1)


def test_wait_node_default_values(rec):
    g = fake_graph()
    node = g.add_ext_semaphore_wait(pcg.ExternalSemaphore.wrap(S1))
    assert isinstance(node, pcg.ExtSemaphoreWaitNode)
    assert node.params == [(S1, 0)]


@pytest.mark.parametrize("sems,values,text", [
    ([], None, "needs at least one ExternalSemaphore"),
    ([S1], None, "expected ExternalSemaphore objects, got int"),
    ("one", None, "expected ExternalSemaphore objects, got str"),
    (None, [1, 2], "2 values for 1 semaphores"),
    (None, -1, r"an int in \[0, 2\*\*64\)"),
    (None, 1 << 64, r"an int in \[0, 2\*\*64\)"),
    (None, 1.5, r"an int in \[0, 2\*\*64\)"),
])
def test_arguments_are_checked_before_any_call(rec, sems, values, text):
    g = fake_graph()
    sems = [pcg.ExternalSemaphore.wrap(S1)] if sems is None else sems
    with pytest.raises(pcg.ArgumentError, match=text):
        g.add_ext_semaphore_signal(sems, values)
    assert rec == []


def test_exec_set_needs_semaphores(rec):
    g = fake_graph()
    node = g.add_ext_semaphore_wait(pcg.ExternalSemaphore.wrap(S1))
    exe = pcg.GraphExec.wrap(0x4B00_1000, graph=g)
    with pytest.raises(pcg.ArgumentError, match="needs semaphores="):
        exe.set_params(node, values=3)


def test_import_fd_checks_and_calls(monkeypatch, cpu_device):
    seen = []

    def imp(desc):
        seen.append((int(desc.type), desc.handle.fd))
        return _OK, rt.cudaExternalSemaphore_t(0x4C00_0000)
    imp.__name__ = "cudaImportExternalSemaphore"
    destroyed = []

    def destroy(h):
        destroyed.append(int(h))
        return (_OK,)
    monkeypatch.setattr(rt, "cudaImportExternalSemaphore", imp)
    monkeypatch.setattr(rt, "cudaDestroyExternalSemaphore", destroy)
    with pytest.raises(pcg.ArgumentError, match="fd must be a non-negative int"):
        pcg.ExternalSemaphore.import_fd(-1)
    sem = pcg.ExternalSemaphore.import_fd(7)
    assert seen == [(int(rt.cudaExternalSemaphoreHandleType.cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd), 7)]
    pcg.ExternalSemaphore.import_fd(8, timeline=False)
    assert seen[-1][0] == int(rt.cudaExternalSemaphoreHandleType.cudaExternalSemaphoreHandleTypeOpaqueFd)
    sem.close()
    with pytest.raises(pcg.ClosedError, match="was closed"):
        sem.handle


# On the GPU (no real semaphore there either) ------------------------------------------

@pytest.mark.gpu
def test_import_of_a_non_semaphore_fd_raises_cleanly():
    """In a subprocess (a driver crash must not take the run down): importing /dev/null as
    a timeline semaphore raises CudaError naming cudaImportExternalSemaphore."""
    import subprocess
    import sys
    code = ("import os, pycudagraph as pcg\n"
            "fd = os.open('/dev/null', os.O_RDONLY)\n"
            "try:\n"
            "    pcg.ExternalSemaphore.import_fd(fd)\n"
            "    print('IMPORTED')\n"
            "except pcg.CudaError as e:\n"
            "    print('CUDAERROR', e.api)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CUDAERROR cudaImportExternalSemaphore" in proc.stdout, proc.stdout
