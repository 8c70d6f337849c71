"""The compiled route of the hot calls (CPU): the extension builds from its C files and
imports, is the active route once built, is off with PYCUDAGRAPH_NO_NATIVE=1, ``pycudagraph
info`` names it, and its converters agree with the Python ones: grid/block (dims3) and each
argument kind (ArgPack.write). The calls themselves, with a driver stub:
tests/runtime/test_fast_layer.py.
"""

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph._cuda import _build, fast, plans
from pycudagraph.cli import info
from pycudagraph.compile.args import ArgPack, Layout, dims3
from pycudagraph.compile.signature import parse_params

from tests.support.native_driver import ROOT

PACKAGE = os.path.join(ROOT, "pycudagraph")


def _extension():
    try:
        return importlib.import_module("pycudagraph._cuda._native")
    except ImportError:
        return None


native = _extension()
needs_native = pytest.mark.skipif(native is None, reason="the extension is not built here")


def test_extension_builds_here(tmp_path):
    """The C files compile with this interpreter's headers into one importable module."""
    cmd = _build.command()
    out = tmp_path / os.path.basename(_build.target())
    cmd[cmd.index("-o") + 1] = str(out)
    done = subprocess.run(cmd + ["-Wextra", "-Werror", "-Wno-unused-parameter",
                                 "-Wno-missing-field-initializers"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("_native", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.K_OTHER == 12 and all(callable(getattr(mod, name)) for name in
                                     ("launch_graph", "launch_kernel", "add_kernel", "set_arg"))


def test_setup_builds_the_same_files():
    """setup.py takes _build.py's list; every _native*.c / .h of the package is on it."""
    on_disk = sorted(f for f in os.listdir(os.path.join(PACKAGE, "_cuda"))
                     if f.startswith("_native") and f.endswith((".c", ".h")))
    assert on_disk == sorted(_build.SOURCES + _build.HEADERS)
    assert all(p.startswith("pycudagraph/_cuda/") for p in _build.sources(relative=True))


def test_installed_extension_is_the_active_path():
    """`pip install -e .` builds it in place; without PYCUDAGRAPH_NO_NATIVE it is used."""
    if os.environ.get(fast.NATIVE_ENV, "") not in ("", "0"):
        pytest.skip("PYCUDAGRAPH_NO_NATIVE is set in this session")
    assert native is not None, (
        f"hot path: {fast.native_status()}; build it in place with `pip install -e .`, "
        "`python setup.py build_ext --inplace` or `python pycudagraph/_cuda/_build.py`")
    assert fast.native_status().startswith("compiled (pycudagraph._cuda._native")
    assert info.hot_path() == fast.native_status()
    assert fast.launch_graph is native.launch_graph and fast.set_arg is native.set_arg


def test_disabled_by_environment_variable():
    code = ("from pycudagraph._cuda import fast\n"
            "from pycudagraph.cli import info\n"
            "assert fast.launch_graph.__module__ == 'pycudagraph._cuda.routes'\n"
            "assert fast.add_kernel.__module__ == 'pycudagraph._cuda.routes'\n"
            "assert fast.ExecBase.__module__ == 'pycudagraph._cuda.hot_base'\n"
            "print(info.hot_path())\n")
    env = dict(os.environ, PYTHONPATH=ROOT, PYCUDAGRAPH_NO_NATIVE="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)"


def test_info_report_names_the_hot_path():
    data = {"pycudagraph": "0", "python": "3", "numpy": "2", "cuda_bindings": "13",
            "runtime": "13.0", "runtime_int": 13000, "driver": "13.0", "driver_int": 13000,
            "nvrtc": "13.0", "devices": [], "device_error": "none", "features": [],
            "hot_path": "ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)"}
    data["features"] = info._features(13000)
    assert "Hot path        ctypes (disabled by PYCUDAGRAPH_NO_NATIVE=1)" in info.report(data)


def _plan_head(plan: bytes) -> tuple:
    return plans.PLAN_HEAD.unpack_from(plan)


def test_plans():
    """A layout's plan: its slots and kinds; a kernel's names its function and limits."""
    layout = Layout("k", parse_params("float* y, double a, bool b, short s"))
    plan = layout.hot.plan
    func, block1, grid1, smem, n, size, simple = _plan_head(plan)
    assert (func, block1, n, size, simple) == (0, 0, 4, layout.size, 1)
    slots = [plans.PLAN_SLOT.unpack_from(plan, plans.PLAN_HEAD.size + 8 * i) for i in range(4)]
    assert slots == list(zip(layout.offsets, (plans.K_PTR, plans.K_F64, plans.K_BOOL, plans.K_I16)))
    kplan = fast.kernel_plan(plan, 0x77, 1024, 2**31 - 1, 49152)
    assert _plan_head(kplan) == (0x77, 1024, 2**31 - 1, 49152, 4, layout.size, 1)
    assert kplan[plans.PLAN_HEAD.size:] == plan[plans.PLAN_HEAD.size:]
    for sig in ("half h", "__nv_bfloat16 b", "float4 v", "cudaGraphConditionalHandle c"):
        assert _plan_head(Layout("k", parse_params(sig)).hot.plan)[6] == 0, sig


@needs_native
def test_kind_codes_and_plan_format_match_the_extension():
    names = ("K_I8", "K_U8", "K_I16", "K_U16", "K_I32", "K_U32", "K_I64", "K_U64", "K_F32",
             "K_F64", "K_BOOL", "K_PTR", "K_OTHER")
    assert [getattr(plans, n) for n in names] == [getattr(native, n) for n in names]
    assert plans.PLAN_HEAD.size == native.PLAN_HEAD_SIZE


# grid / block: (value, what dims3 gives, or the words of its error). numpy ints, bools,
# lists and values past 32 bits included.
DIMS = [
    (7, (7, 1, 1)), (1, (1, 1, 1)), (2**32 - 1, (2**32 - 1, 1, 1)),
    ((2, 3), (2, 3, 1)), ((2, 3, 4), (2, 3, 4)), ([5], (5, 1, 1)), ([2, 3, 4], (2, 3, 4)),
    ((1,), (1, 1, 1)), (np.int64(5), (5, 1, 1)), ((np.uint32(2), np.int16(3)), (2, 3, 1)),
    ([np.int32(4), 2], (4, 2, 1)),
    (0, "positive"), (-1, "positive"), (2**32, "32-bit"), (2**64, "32-bit"),
    ((1, 2**32), "32-bit"), ((4, 0), "positive"), (np.int64(2**40), "32-bit"),
    (True, "int or a tuple"), (False, "int or a tuple"), ((True, 1), "must be an int"),
    ((np.bool_(True),), "must be an int"), (2.0, "int or a tuple"), ((2.7, 1), "must be an int"),
    ("12", "int or a tuple"), (b"12", "int or a tuple"), (None, "int or a tuple"),
    ((), "1 to 3 dimensions"), ((1, 1, 1, 1), "1 to 3 dimensions"), ([], "1 to 3 dimensions"),
    ({"x": 1}, "int or a tuple"), (range(3), "int or a tuple"), ((1, None), "must be an int"),
]


@pytest.mark.parametrize("value, want", DIMS, ids=[repr(v) for v, _ in DIMS])
def test_dims3_and_its_c_twin_agree(value, want):
    """dims3 normalises or names what is wrong; the C twin gives the same result, or
    leaves the value to dims3 (None) where it is not a plain int, tuple or list of ints."""
    if isinstance(want, tuple):
        assert dims3(value, "grid") == want
    else:
        with pytest.raises(pcg.ArgumentError, match=want):
            dims3(value, "grid")
    if native is None:
        return
    got = native.dims(value)
    plain = (type(value) is int or (type(value) in (tuple, list)
                                    and all(type(v) is int for v in value)))
    if isinstance(want, tuple) and plain:
        assert got == want
    else:
        assert got is None  # the C twin converts nothing dims3 refuses, nor any numpy value


# argument values per C type: the C converter writes what ArgPack.write writes, or leaves
# the value to it (None); it never accepts what the Python packing refuses.
VALUES = {
    "signed char": (0, -128, 127, 128, -129, np.int8(-5), True, 1.0, "1"),
    "unsigned char": (0, 255, 256, -1, np.uint8(7), np.int64(300)),
    "short": (-32768, 32767, 32768, np.int16(-3)),
    "unsigned short": (65535, 65536, -1),
    "int": (0, -2**31, 2**31 - 1, 2**31, np.int32(-7), np.int64(2**40), 1.5, None, False),
    "unsigned int": (2**32 - 1, 2**32, -1, np.uint32(9)),
    "long long": (-2**63, 2**63 - 1, 2**63, np.int64(-9)),
    "unsigned long long": (2**64 - 1, 2**64, -1, np.uint64(2**64 - 1), True, np.bool_(True)),
    "float": (1.5, 3, np.float32(0.25), np.float64(1e300), 1e300, float("inf"), float("nan"),
              "1.0", None, True, np.bool_(False)),
    "double": (1e300, -0.0, 7, np.float64(2.5), np.float16(1.5), "x", False, np.bool_(True)),
    "bool": (True, False, 0, 1, 2, np.bool_(True), np.int32(1), 1.0, None),
    "float*": (0, 0x1000, 2**64 - 1, 2**64, -1, True, 1.5, "x", None),
}


@needs_native
@pytest.mark.parametrize("ctype", list(VALUES))
def test_slot_writer_and_its_c_twin_agree(ctype):
    layout = Layout("k", parse_params(f"{ctype} v"))
    kind = plans.PLAN_SLOT.unpack_from(layout.hot.plan, plans.PLAN_HEAD.size)[1]
    pack = ArgPack(layout, None, (VALUES[ctype][0],), 1, 1)
    conv = layout.hot.converters[0]  # what the compiled route calls: None for plain ints and floats
    assert native.convert(kind, VALUES[ctype][0], conv) is not None
    for value in VALUES[ctype]:
        got = native.convert(kind, value, conv)
        before = pack.raw()
        try:
            pack.write(0, value)
        except (pcg.ArgumentError, pcg.ClosedError):
            assert got is None, (ctype, value)
            assert pack.raw() == before  # a refused value leaves the slot as it was
            continue
        start = layout.offsets[0]
        written = pack.raw()[start:start + layout.params[0].size]
        assert got is None or got == written, (ctype, value, got, written)


def test_one_module_knows_the_extension():
    """Only _cuda/fast.py imports _native; nothing reads fast's compiled module."""
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == os.path.join(PACKAGE, "_cuda", "fast.py"):
                continue
            text = open(path, encoding="utf-8").read()
            assert not re.search(r"\bfast\.(_?native)\b", text), path
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
                    assert not any(n.split(".")[-1] == "_native" for n in names), path


def test_the_c_code_reads_no_attribute_and_makes_objects_only_in_add_node():
    """No attribute is read or written by name but two: the subclass's checked method a
    base type's method hands a call to (call_checked, _native_lookup.c) and a kernel class's
    _prepare_launch, the packing its ctypes route runs (_native_method.c); objects of ours (a
    node and its pack) are made only by add_node, in _native_nodes.c, of the types
    set_node_maker was handed."""
    by_name = {"PyObject_VectorcallMethod": "_native_lookup.c", "GetAttr": "_native_method.c"}
    for name in _build.SOURCES + _build.HEADERS:
        text = open(os.path.join(PACKAGE, "_cuda", name), encoding="utf-8").read()
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # comments may name things,
        code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', code)  # and docstrings
        for call in ("GetAttr", "SetAttr", "PyObject_Call(", "_PyObject_LookupAttr",
                     "PyObject_GenericSetAttr", "PyImport", "PyObject_VectorcallMethod"):
            assert (call in code) == (by_name.get(call) == name), (name, call)
        assert code.count("PyObject_GetAttr(") <= 1 and code.count("VectorcallMethod(") <= 1
        assert ("tp_alloc" in code) == (name == "_native_nodes.c"), name
        assert len(text.splitlines()) < 400, name
