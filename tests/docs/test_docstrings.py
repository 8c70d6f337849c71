"""CPU test: every public method and property of the public classes says which raw call
it makes, or that it makes none, so the documentation cannot drift from the code.

A docstring passes when it names at least one function that exists in cuda.bindings
(runtime, driver, nvrtc, nvjitlink: ``cudaGraphLaunch``, ``cuGraphAddKernelNode``,
``nvrtcCompileProgram`` ...), or says "No CUDA call". Type names (``cudaGraph_t``) and
device-side functions do not count: they are not calls the method makes. A graph function
newer than the installed bindings (``cudaGraphNodeGetParams`` under 12.9) counts when
docs/API_MAP.md lists it, so the test passes with cuda-bindings 12.9 to 13.x alike.
"""

import inspect
import re
import types
from pathlib import Path

import pytest
from cuda.bindings import driver, nvrtc, runtime

import pycudagraph as pcg

try:
    from cuda.bindings import nvjitlink
except ImportError:  # older bindings
    nvjitlink = None

RAW_MODULES = [m for m in (runtime, driver, nvrtc, nvjitlink) if m is not None]
RAW_NAME = re.compile(r"\b((?:cuda|cu|nvrtc|nvJitLink)[A-Z]\w*)")
#: Every graph function of cuda-bindings 12.x and 13.x (the API map's first column).
MAPPED = set(re.findall(r"^\| `(\w+)` \|",
                        (Path(__file__).resolve().parents[2] / "docs" / "API_MAP.md").read_text(),
                        re.M))

CLASSES = [pcg.Graph, pcg.GraphExec, pcg.Profile, pcg.Stream, pcg.Event, pcg.DeviceBuffer, pcg.PinnedBuffer,
           pcg.Program, pcg.Module, pcg.Kernel, pcg.Device, pcg.capture, pcg.trace,
           pcg.Node, pcg.KernelNode, pcg.MemcpyNode, pcg.MemsetNode, pcg.HostNode,
           pcg.ChildGraphNode, pcg.EmptyNode, pcg.EventRecordNode, pcg.EventWaitNode,
           pcg.MemAllocNode, pcg.MemFreeNode, pcg.ConditionalNode, pcg.IfNode, pcg.IfElseNode,
           pcg.WhileNode, pcg.SwitchNode, pcg.ConditionalHandle, pcg.BucketedGraphs,
           pcg.AccessPolicyWindow, pcg.GraphedCallable, pcg.CapturePool]

#: classes whose constructor users call: the class docstring documents it
CONSTRUCTED = [pcg.Graph, pcg.Stream, pcg.Event, pcg.DeviceBuffer, pcg.PinnedBuffer,
               pcg.Program, pcg.Device, pcg.capture, pcg.trace]


def is_raw_call(name: str) -> bool:
    if name in MAPPED:
        return True
    for module in RAW_MODULES:
        obj = getattr(module, name, None)
        if callable(obj) and not isinstance(obj, type):
            return True
    return False


def names_a_raw_call(doc: str) -> bool:
    return "No CUDA call" in " ".join(doc.split()) or any(is_raw_call(n) for n in RAW_NAME.findall(doc))


def public_members():
    """(qualified name, function or property) for each public method and property,
    once per defining class."""
    seen = {}
    for cls in CLASSES:
        for owner in cls.__mro__:
            if owner is object:
                continue
            for name, raw in vars(owner).items():
                if name.startswith("_"):
                    continue
                if isinstance(raw, (staticmethod, classmethod)):
                    raw = raw.__func__
                if (inspect.isfunction(raw) or isinstance(raw, property)
                        or isinstance(raw, types.MethodDescriptorType)):  # a method made in C
                    seen.setdefault(f"{owner.__module__}.{owner.__qualname__}.{name}", raw)
    return sorted(seen.items())


MEMBERS = public_members()


def test_the_walk_finds_the_api():
    names = {q.rsplit(".", 2)[-2] + "." + q.rsplit(".", 1)[-1] for q, _ in MEMBERS}
    for expected in ("GraphBase.add_kernel", "Graph.add_while", "ExecBase.set_arg", "ExecBase.launch",
                     "ExecUpdate.update", "Stream.synchronize", "Event.record",
                     "DeviceBuffer.copy_from", "KernelBase.launch", "Module.get_kernel",
                     "Device.synchronize", "KernelNode.set_attribute", "Node.dependencies",
                     "ConditionalNode.bodies", "GraphFeatures.to_dot"):
        assert expected in names, expected
    assert len(MEMBERS) > 100


@pytest.mark.parametrize("qualname, member", MEMBERS, ids=[q for q, _ in MEMBERS])
def test_member_names_its_raw_call(qualname, member):
    doc = inspect.getdoc(member.fget if isinstance(member, property) else member) or ""
    assert doc, f"{qualname} has no docstring"
    assert names_a_raw_call(doc), (
        f"{qualname}: its docstring names no raw call (a cuda*/cu*/nvrtc* function of "
        f"cuda.bindings) and does not say 'No CUDA call.':\n{doc}")


@pytest.mark.parametrize("cls", CONSTRUCTED, ids=lambda c: c.__name__)
def test_constructor_names_its_raw_call(cls):
    assert names_a_raw_call(inspect.getdoc(cls) or ""), cls.__name__


def test_the_check_can_fail():
    assert not names_a_raw_call("The raw ``cudaGraph_t`` handle.")  # a type, not a call
    assert not names_a_raw_call("Calls ``cudaGraphSetConditional`` in device code.")
    assert names_a_raw_call("Launch it (``cudaGraphLaunch``).")
    assert names_a_raw_call("Compile (``nvrtcCompileProgram``).")
    assert names_a_raw_call("No CUDA call.")
