"""The trace names the runtime function a reader looks up next to the driver call made
(CPU): ``cuGraphAddKernelNode(...)  -> CUDA_SUCCESS    # runtime: cudaGraphAddKernelNode``."""

import pytest

import pycudagraph as pcg
from pycudagraph._cuda import check
from pycudagraph.runtime.trace import TracedCall, runtime_twin


@pytest.mark.parametrize("api, twin", [
    ("cuGraphAddKernelNode", "cudaGraphAddKernelNode"),
    ("cuGraphAddKernelNode_v2", "cudaGraphAddKernelNode"),
    ("cuGraphLaunch", "cudaGraphLaunch"),
    ("cuLaunchKernel", "cudaLaunchKernel"),
    ("cuGraphExecKernelNodeSetParams", "cudaGraphExecKernelNodeSetParams"),
    ("cuGraphKernelNodeSetParams", "cudaGraphKernelNodeSetParams"),
    ("cuGraphInstantiateWithFlags", "cudaGraphInstantiateWithFlags"),
    ("cuGraphExecUpdate", "cudaGraphExecUpdate"),
    ("cuFuncGetAttribute", "cudaFuncGetAttributes"),
    ("cuFuncSetAttribute", "cudaFuncSetAttribute"),
    ("cuKernelGetFunction", None),
    ("cuCtxPushCurrent", None),
    ("cudaGraphCreate", None),
    ("nvrtcCompileProgram", None),
])
def test_runtime_twin(api, twin):
    assert runtime_twin(api) == twin


def test_a_traced_driver_call_shows_both_names():
    with pcg.trace() as t:
        check.report("cuGraphLaunch", 0, (0x10, 0))
        check.report("cuKernelGetFunction", 0, ())
    launch, func = t.records
    assert launch.api == "cuGraphLaunch" and launch.runtime == "cudaGraphLaunch"
    text = str(launch)
    assert text.startswith("cuGraphLaunch(") and "# runtime: cudaGraphLaunch; " in text
    assert func.runtime is None and "runtime:" not in str(func)


def test_traced_call_without_twin_reads_as_before():
    rec = TracedCall("cudaGraphCreate", "cudaGraphCreate(&g0, 0)", "cudaSuccess", "x.py:1")
    assert str(rec) == "cudaGraphCreate(&g0, 0)  -> cudaSuccess    # x.py:1"


@pytest.mark.parametrize("kwargs, words", [(dict(echo="yes"), "trace: echo must be True or False"),
                                           (dict(echo=None), "trace: echo must be True or False"),
                                           (dict(file="out.txt"), "trace: file must have a write"),
                                           (dict(file=5), "trace: file must have a write")])
def test_trace_options_are_checked(kwargs, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.trace(**kwargs)


def test_a_graph_is_named_by_its_handle_in_every_call():
    """A Graph argument reads as g0 wherever it appears, as its raw handle does (int(g))."""
    from tests.support.fakes import fake_graph
    g, other = fake_graph(), fake_graph()
    with pcg.trace() as t:
        check.tracer("cudaGraphCreate", (0,), (0, g.handle))
        check.report("cuGraphAddKernelNode", 0, (0x10, g, [], None))
        check.report("cuGraphAddKernelNode", 0, (0x11, other, [], None))
    assert int(g) == g.table.h
    create, add, add2 = (str(r) for r in t.records)
    assert "g0" in create and "cuGraphAddKernelNode(16, g0, {}, NULL)" in add, (create, add)
    assert "(17, g1, {}, NULL)" in add2 and "pycudagraph.Graph" not in add + add2
