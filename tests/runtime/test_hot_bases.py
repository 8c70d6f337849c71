"""The hot path as base types (CPU): ``GraphExec``, ``ExecNode``, ``ArgPack``, ``Layout``,
``Kernel`` and ``Graph`` extend ``fast.ExecBase``, ``ExecNodeBase``, ``ArgPackBase``,
``LayoutBase``, ``KernelBase`` and ``GraphBase``: the C extension's types as built, their
pure-Python twins (``_cuda/hot_base.py``) with PYCUDAGRAPH_NO_NATIVE=1. The hot methods are
inherited (nothing is replaced at import), and both families have the same attribute names
and methods."""

import json
import os
import subprocess
import sys

import pytest

import pycudagraph as pcg
from pycudagraph._cuda import fast, hot_base
from pycudagraph.compile.args import ArgPack, Layout
from pycudagraph.compile.signature import parse_params
from pycudagraph.nodes.exec_node import ExecNode

from tests.support.native_driver import ROOT

#: (class, its base's name in fast, the methods it inherits from the base)
FAMILY = ((pcg.GraphExec, "ExecBase", ("launch", "set_arg", "set_params")),
          (ExecNode, "ExecNodeBase", ()), (ArgPack, "ArgPackBase", ()), (Layout, "LayoutBase", ()),
          (pcg.Kernel, "KernelBase", ("launch",)), (pcg.Graph, "GraphBase", ("add_kernel",)))

COMPILED = fast.native_status().startswith("compiled")


def test_each_class_extends_its_base_and_inherits_the_hot_methods():
    for cls, base_name, methods in FAMILY:
        base = getattr(fast, base_name)
        assert base in cls.__mro__, (cls, base)
        expected = "pycudagraph._cuda._native" if COMPILED else "pycudagraph._cuda.hot_base"
        assert base.__module__ == expected and base.__name__ == base_name
        for name in methods:
            assert name not in cls.__dict__, f"{cls.__name__} defines {name} itself"
            assert getattr(cls, name) is base.__dict__[name]  # resolved through the MRO
            kind = type(base.__dict__[name]).__name__
            assert kind == ("method_descriptor" if COMPILED else "function"), (name, kind)


def test_nothing_replaces_a_method_at_import():
    assert not [n for n in dir(fast) if n.startswith("method_")]
    # the checked methods a base hands a call to are the subclasses' own Python functions
    for cls, name in ((pcg.GraphExec, "_launch_checked"), (pcg.GraphExec, "_set_arg_checked"),
                      (pcg.GraphExec, "_set_params_checked"), (pcg.Kernel, "_launch_checked"),
                      (pcg.Graph, "_add_kernel_checked")):
        assert type(cls.__dict__[name]).__name__ == "function", (cls, name)
    # a method no class of ours overrides resolves to the base for a subclass too
    sub = type("Sub", (pcg.GraphExec,), {"__slots__": ()})
    assert sub.launch is fast.ExecBase.__dict__["launch"]


_SHAPE = """
import json
from pycudagraph._cuda import fast
out = {}
for name in ("ExecBase", "ExecNodeBase", "ArgPackBase", "LayoutBase", "KernelBase", "GraphBase",
             "Plan"):
    base = getattr(fast, name)
    slots = getattr(base, "__slots__", None)
    if slots is None:  # the C type: its members and getsets are its fields
        fields = [n for n, v in vars(base).items() if type(v).__name__ in
                  ("member_descriptor", "getset_descriptor") and not n.startswith("__")]
    else:
        fields = list(slots)
    methods = [n for n, v in vars(base).items() if callable(v) and not n.startswith("_")]
    out[name] = [base.__module__, sorted(fields), sorted(methods)]
print(json.dumps(out))
"""


def _shape(native: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop(fast.NATIVE_ENV, None)
    if not native:
        env[fast.NATIVE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", _SHAPE], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_both_routes_have_the_same_fields_and_methods():
    if not COMPILED:
        pytest.skip(f"hot path: {fast.native_status()}")
    compiled, python = _shape(True), _shape(False)
    for name in compiled:
        assert compiled[name][0] == "pycudagraph._cuda._native", name
        assert python[name][0] == "pycudagraph._cuda.hot_base", name
        assert compiled[name][1:] == python[name][1:], (name, compiled[name], python[name])
    assert python["ExecBase"][1] == ["_block", "_h", "_last_stream", "_nodes"]
    assert python["ExecBase"][2] == ["launch", "set_arg", "set_params"]
    assert python["ArgPackBase"][1] == ["address", "buf", "kernel", "layout", "refs"]
    assert python["ExecNodeBase"][1] == ["args", "exec_h", "exec_raw", "node", "node_h",
                                         "retire"]
    assert python["Plan"][1] == ["converters", "layout", "names", "plan"]


def test_the_python_twins_are_what_no_native_hands_out():
    assert set(hot_base.__all__) == ({name for _, name, _ in FAMILY} |
                                     {"Plan", "register_node", "node_live", "live_rule"})
    for _, name, methods in FAMILY:
        twin = getattr(hot_base, name)
        assert twin.__slots__ and all(callable(twin.__dict__[m]) for m in methods)


def test_block_is_none_until_set_and_kept_as_given():
    """``_block`` reads None while launches are not blocked (the C type keeps NULL), on a
    bare exec of either family."""
    for base in {fast.ExecBase, hot_base.ExecBase}:
        cls = type("E", (base,), {"__slots__": ()})
        exe = cls.__new__(cls)
        if base is hot_base.ExecBase:  # a Python slot has no value until one is set
            exe._block = None
        assert exe._block is None
        exe._block = "asleep"
        assert exe._block == "asleep"
        exe._block = None
        assert exe._block is None


def test_plans_have_named_read_only_members_on_both_routes():
    """A layout's and a kernel's compiled-route view is a Plan read by member name (no
    order of items shared with C), made once by keyword, its members read-only."""
    layout = Layout("k", parse_params("float* x, int n, float a"))
    hot = layout.hot
    assert type(hot) is fast.Plan
    assert hot.names == {"x": 0, "n": 1, "a": 2} and hot.layout is None
    assert hot.converters is layout.fast_converters and type(hot.plan) is bytes
    kh = layout.kernel_hot(0x1234)
    assert kh.layout is layout and kh.names is None and kh.converters is hot.converters
    assert kh.plan[:8] == (0x1234).to_bytes(8, "little") and kh.plan[20:] == hot.plan[20:]
    for plan_cls in {fast.Plan, hot_base.Plan}:
        p = plan_cls(plan=b"xyz", converters=(None,), names={"a": 0})
        assert (p.plan, p.converters, p.names, p.layout) == (b"xyz", (None,), {"a": 0}, None)
        for name in ("plan", "converters", "names", "layout"):
            with pytest.raises(AttributeError):
                setattr(p, name, None)
        with pytest.raises(TypeError):
            p.__init__(plan=b"", converters=())  # made once
        with pytest.raises(TypeError):
            plan_cls(b"xyz", (None,))  # by keyword only
        with pytest.raises(TypeError):
            plan_cls(plan="xyz", converters=(None,))  # bytes
        with pytest.raises(TypeError):
            plan_cls(plan=b"xyz", converters=[None])  # a tuple
        with pytest.raises(TypeError):
            plan_cls(plan=b"xyz")
