"""Saved graphed callables on the CPU (pycudagraph/frameworks/graphed_*.py, kernel_probe.py):
the index's checks (every field, truncation, random damage with hypothesis), a model that
differs from the saved one, another GPU architecture, other framework versions, the key
templates, where each address of a graph is saved, and the kernel finder's probes."""

import hashlib
import json
import string
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pycudagraph as pcg
from pycudagraph.errors import ArgumentError, GraphFileError
from pycudagraph.frameworks import graphed_save, kernel_probe
from pycudagraph.frameworks.graphed_bind import Span, bindings, describe
from pycudagraph.frameworks.graphed_index import (FORMAT, INDEX, check_arch, check_index,
                                                  check_key_files, compare_bindings, read_index,
                                                  slot_kind, version_differences, write_index)
from pycudagraph.frameworks.graphed_load import load_graphed
from pycudagraph.frameworks.graphed_make import Maker
from pycudagraph.frameworks.graphed_save import KeySkipped, key_templates
from pycudagraph.frameworks.graphed_templates import describe_key
from pycudagraph.runtime.values import Progress
from pycudagraph.frameworks.owners import Owner

TORCH_ARRAY = {"framework": "torch", "shape": [2, 4], "strides": [4, 1], "dtype": "float32",
               "align": 256}


def sample() -> dict:
    """A valid index of one key (every kind of field present)."""
    out = dict(TORCH_ARRAY, at={"pool": 0, "segment": 1, "offset": 512})
    return json.loads(json.dumps({
        "format": FORMAT, "version": [1, 0], "writer": "pycudagraph 0.1.0", "function": "step",
        "arch": "sm_90", "gpu": "NVIDIA H100 80GB HBM3",
        "versions": {"torch": "2.11.0", "cupy": None},
        "bindings": {"param:w": {"shape": [4, 8], "dtype": "float32", "nbytes": 128},
                     "buffer:b": {"shape": [8], "dtype": "float32", "nbytes": 32}},
        "pools": [{"framework": "torch", "segments": [2097152, 1048576]}],
        "workspaces": [4096],
        "keys": [{"file": "key-000.pcgraph", "nbytes": 100, "sha256": "0" * 64, "device": 0,
                  "args": [{"array": dict(TORCH_ARRAY)}, {"value": 3}],
                  "kwargs": [["flag", {"value": True}]],
                  "outputs": {"tuple": [{"array": out}, {"value": None},
                                        {"dict": [["k", {"list": [{"value": 1.5}]}]]}]},
                  "slots": ["input:0", "param:w", "pool:0:0", "workspace:0"],
                  "kernels": ["_Z3fooPf", "cupy_tanh"], "variants": [["cupy_tanh", 1]],
                  "pool": 0, "outputs_pool": None}],
    }))  # nothing shared with TORCH_ARRAY or an earlier sample


def test_a_valid_index_is_written_and_read_back(tmp_path):
    write_index(tmp_path, sample())
    assert read_index(tmp_path) == sample()


# one wrong field at a time: (path into the index, wrong value, words the error names)
WRONG = [
    (("format",), "pycudagraph.graph", "format"),
    (("version",), [2, 0], "another major version"),
    (("version",), [1], "version"),
    (("arch",), "", "arch"),
    (("versions", "jax"), "0.4", "unknown field"),
    (("bindings", "w"), {"shape": [1], "dtype": "f", "nbytes": 4}, "starts with one of"),
    (("bindings", "param:w", "nbytes"), 0, "bindings['param:w'].nbytes"),
    (("bindings", "param:w", "shape"), [-1], "shape[0]"),
    (("pools", 0, "segments"), [], "at least one segment"),
    (("pools", 0, "framework"), "jax", "pools[0].framework"),
    (("workspaces", 0), -4, "workspaces[0]"),
    (("keys", 0, "file"), "../../etc/passwd", "not a key file name"),
    (("keys", 0, "file"), "key-000.pcgraph/x", "not a key file name"),
    (("keys", 0, "sha256"), "XYZ", "sha256"),
    (("keys", 0, "device"), 4096, "device"),
    (("keys", 0, "pool"), 3, "keys[0].pool"),
    (("keys", 0, "args", 0), {"array": dict(TORCH_ARRAY, align=3)}, "not a power of two"),
    (("keys", 0, "args", 0), {"array": dict(TORCH_ARRAY, strides=[1])}, "1 strides for 2"),
    (("keys", 0, "args", 0), {"code": "import os"}, "unknown template kind"),
    (("keys", 0, "args", 1), {"value": {"a": 1}}, "expected null"),
    (("keys", 0, "kwargs", 0), ["flag"], "expected [name, template]"),
    (("keys", 0, "outputs", "tuple", 0, "array", "at"), {"pool": 0, "segment": 2, "offset": 0},
     "segment"),
    (("keys", 0, "outputs", "tuple", 0, "array", "at"), {"pool": 0, "segment": 1,
                                                         "offset": 1048576}, "offset"),
    (("keys", 0, "outputs", "tuple", 0, "array", "at"), {"binding": "param:x", "offset": 0},
     "not among the bindings"),
    (("keys", 0, "slots", 0), "input:1", "does not have"),
    (("keys", 0, "slots", 0), "pool:0:5", "does not have"),
    (("keys", 0, "slots", 0), "workspace:1", "does not have"),
    (("keys", 0, "slots", 0), "param:missing", "does not have"),
    (("keys", 0, "slots", 0), "/dev/null", "names no input"),
    (("keys", 0, "kernels"), "_Z3foo", "expected a list"),
    (("keys", 0, "variants", 0), "cupy_tanh", "expected [kernel name, variant]"),
    (("keys", 0, "variants", 0), ["cupy_sum", 0], "a name of the key's kernels"),
    (("keys", 0, "variants", 0), ["cupy_tanh", -1], "variants[0][1]"),
    (("keys", 0, "variants"), [["cupy_tanh", 0], ["cupy_tanh", 1]], "once"),
]


def _set(ix, path, value):
    for k in path[:-1]:
        ix = ix[k]
    ix[path[-1]] = value


@pytest.mark.parametrize("path,value,words", WRONG, ids=[".".join(map(str, w[0])) for w in WRONG])
def test_each_wrong_field_is_named(path, value, words):
    ix = sample()
    _set(ix, path, value)
    with pytest.raises(GraphFileError, match="index") as err:
        check_index(ix)
    assert words in str(err.value), str(err.value)


class TorchVersion(str):
    """Like ``torch.__version__``: a str subclass."""


#: version strings as frameworks spell them (local versions, release candidates, git builds)
REAL_VERSIONS = ["2.11.0+cu130", "14.2.0", "13.3.0rc1", "2.6.0a0+git1234abc", "2.5.1",
                 "1.0.0.post1", "0.1.dev5+g1a2b3c4.d20240101", "14.0.0b1"]


@pytest.mark.parametrize("text", REAL_VERSIONS)
def test_real_version_strings_are_written_and_read_back(tmp_path, text):
    ix = sample()
    ix["versions"] = {"torch": TorchVersion(text), "cupy": text}
    write_index(tmp_path, ix)  # the writer checks first: a TorchVersion is its plain text
    back = read_index(tmp_path)
    assert back["versions"] == {"torch": text, "cupy": text}
    assert type(back["versions"]["torch"]) is str
    assert version_differences(back, {"torch": text, "cupy": text}) == []


def test_any_printable_text_within_limits_passes_and_control_characters_do_not():
    ix = sample()
    printable = "".join(chr(c) for c in range(0x20, 0x7F))  # every printable ASCII character
    ix["versions"]["torch"] = printable
    ix["gpu"] = "NVIDIA H200 (141 GB) #1 [MIG 1g.18gb] ~ 100% & <ok>"
    ix["function"] = "Model.forward.<locals>.step"
    check_index(ix)
    for bad, words in [("2.11.0\n", "'\\n' at 6"), ("2.11\x00", "'\\x00' at 4"),
                       ("a\tb", "'\\t' at 1"), ("\x7f", "'\\x7f' at 0"),
                       ("", "got 0 characters"), ("9" * 129, "got 129 characters"),
                       (2.11, "got a number"), (["2.11"], "got a list")]:
        ix = sample()
        ix["versions"]["torch"] = bad
        with pytest.raises(GraphFileError, match="versions.torch") as err:
            check_index(ix)
        assert words in str(err.value), (bad, str(err.value))


def test_framework_versions_are_plain_strings(monkeypatch):
    import sys
    import types
    fake = types.SimpleNamespace(cuda=object(), __version__=TorchVersion("2.11.0+cu130"))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=object(),
                                                                   __version__="14.2.0"))
    from pycudagraph.frameworks.graphed_bind import versions
    got = versions()
    assert got == {"torch": "2.11.0+cu130", "cupy": "14.2.0"}
    assert type(got["torch"]) is str and type(got["cupy"]) is str


def test_two_keys_naming_one_file_are_refused():
    ix = sample()
    ix["keys"].append(json.loads(json.dumps(ix["keys"][0])))
    with pytest.raises(GraphFileError, match="named by two keys"):
        check_index(ix)


def test_a_truncated_or_foreign_index_is_refused(tmp_path):
    write_index(tmp_path, sample())
    data = (tmp_path / INDEX).read_bytes()
    for n in sorted({0, 1, 10, len(data) // 2, len(data) - 3}):
        (tmp_path / INDEX).write_bytes(data[:n])
        with pytest.raises(GraphFileError, match="not a JSON index"):
            read_index(tmp_path)
    (tmp_path / INDEX).write_text('{"format": NaN}')
    with pytest.raises(GraphFileError, match="not a JSON index"):
        read_index(tmp_path)
    (tmp_path / INDEX).write_text('{"format": 1, "format": 2}')
    with pytest.raises(GraphFileError, match="appears twice"):
        read_index(tmp_path)
    with pytest.raises(GraphFileError, match="not a saved graphed callable"):
        read_index(tmp_path / "nowhere")
    (tmp_path / INDEX).unlink()
    with pytest.raises(GraphFileError, match="cannot read"):
        read_index(tmp_path)


def _paths(v, here=()):
    yield here
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, here + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, here + (i,))


PATHS = [p for p in _paths(sample()) if p]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
                    | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON), min_size=1, max_size=4))
def test_random_field_damage_is_refused_or_valid(changes):
    """Any value anywhere: the check accepts or raises GraphFileError, nothing else."""
    ix = sample()
    for path, value in changes:
        try:
            _set(ix, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed the place
    try:
        check_index(ix)
    except GraphFileError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6))
def test_random_byte_damage_is_refused_or_valid(tmp_path, flips):
    data = bytearray(json.dumps(sample()).encode())
    for at, value in flips:
        data[at % len(data)] = value
    (tmp_path / INDEX).write_bytes(bytes(data))
    try:
        read_index(tmp_path)
    except GraphFileError:
        pass


def test_slot_names_say_what_they_bind():
    assert slot_kind("input:3") == ("input", 3)
    assert slot_kind("pool:1:2") == ("pool", 1, 2)
    assert slot_kind("workspace:0") == ("workspace", 0)
    assert slot_kind("param:transformer.h.0.attn.c_attn.weight")[0] == "binding"
    for bad in ("input:-1", "input:01", "pool:1", "workspace:x", "weights", "", "param:\n"):
        assert slot_kind(bad) == (), bad


# what must match the loading process --------------------------------------------------

def test_a_model_that_differs_is_named():
    saved = sample()["bindings"]
    here = {"param:w": {"shape": [4, 9], "dtype": "float32", "nbytes": 144}}
    with pytest.raises(GraphFileError) as err:
        compare_bindings(saved, here, "gpt2.graphs")
    text = str(err.value)
    assert "buffer:b is missing (saved (8,) float32" in text
    assert "param:w is (4, 9) float32, 144 bytes, saved (4, 8) float32, 128 bytes" in text
    compare_bindings(saved, dict(saved, extra={"shape": [1], "dtype": "int8", "nbytes": 1}), "x")
    many = {f"param:{i}": {"shape": [1], "dtype": "int8", "nbytes": 1} for i in range(9)}
    with pytest.raises(GraphFileError, match="and 4 more"):
        compare_bindings(many, {}, "x")


def test_another_architecture_is_named():
    with pytest.raises(GraphFileError, match=r"saved on sm_90 \(NVIDIA H100 80GB HBM3\); "
                                             r"this GPU is sm_80 \(NVIDIA A100\)"):
        check_arch(sample(), "sm_80", "NVIDIA A100", "gpt2.graphs")
    check_arch(sample(), "sm_90", "NVIDIA H100 PCIe", "x")  # another board, same architecture


def test_framework_versions_that_differ_are_said():
    assert version_differences(sample(), {"torch": "2.11.0", "cupy": "14.2"}) == []
    assert version_differences(sample(), {"torch": "2.10.0"}) == ["PyTorch 2.11.0 saved, 2.10.0 here"]
    assert version_differences(sample(), {}) == ["PyTorch 2.11.0 saved, none here"]


class Arr(Span):
    """A device array stand-in (``__cuda_array_interface__``)."""


def test_load_refuses_a_model_that_differs_before_any_cuda_call(tmp_path):
    ix = sample()
    ix["bindings"] = {"bind:w": {"shape": [16], "dtype": "|u1", "nbytes": 16}}
    ix["keys"][0]["slots"] = ["input:0", "bind:w"]
    ix["keys"][0]["outputs"] = {"value": None}
    write_index(tmp_path, ix)
    with pytest.raises(GraphFileError, match=r"bind:w is \(32,\) \|u1, 32 bytes, saved \(16,\)"):
        load_graphed(tmp_path, lambda x: x, bind={"w": Arr(0x7F00_0000_0000, 32)})
    with pytest.raises(GraphFileError, match="bind:w is missing"):
        load_graphed(tmp_path, lambda x: x)
    (tmp_path / INDEX).write_bytes((tmp_path / INDEX).read_bytes()[:-40])
    with pytest.raises(GraphFileError, match="truncated"):
        load_graphed(tmp_path, lambda x: x)


def test_key_files_are_read_once_and_checked_against_the_index(tmp_path):
    ix = sample()
    data = b"graph file bytes"
    ix["keys"][0].update(nbytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    with pytest.raises(GraphFileError, match="key-000.pcgraph: cannot read it"):
        check_key_files(ix, tmp_path)
    (tmp_path / "key-000.pcgraph").write_bytes(data)
    assert check_key_files(ix, tmp_path) == {"key-000.pcgraph": data}
    (tmp_path / "key-000.pcgraph").write_bytes(data[:-1])
    with pytest.raises(GraphFileError, match="15 bytes, the index says 16 .truncated or replaced"):
        check_key_files(ix, tmp_path)
    (tmp_path / "key-000.pcgraph").write_bytes(data.upper())
    with pytest.raises(GraphFileError, match="SHA-256 differs from the index's"):
        check_key_files(ix, tmp_path)


def test_progress_that_is_not_callable_is_refused_before_anything_is_read(tmp_path):
    with pytest.raises(ArgumentError, match="load_graphed: progress must be None or a callable"):
        load_graphed(tmp_path / "absent", lambda x: x, progress=3)
    f = pcg.graphed(lambda x: x)
    with pytest.raises(ArgumentError, match="save: progress must be None or a callable"):
        f.save(tmp_path / "new", progress="yes")


def test_progress_lines_name_the_step_and_its_time():
    lines = []
    tell = Progress(lines.append, "load_graphed")
    tell("key 1/2 loaded: key-000.pcgraph ((4, 1) int64)", 0.0123)
    tell("2 of 2 key(s) loaded", 2.5)
    tell("no time")
    Progress(None, "save")("nothing is made")  # no callable: no line, no error
    assert lines == ["load_graphed: key 1/2 loaded: key-000.pcgraph ((4, 1) int64) (12 ms)",
                     "load_graphed: 2 of 2 key(s) loaded (2.50 s)", "load_graphed: no time"]


def test_a_key_is_described_by_its_file_and_arrays():
    rec = {"file": "key-002.pcgraph",
           "args": [{"array": {"shape": [4, 1], "dtype": "int64"}},
                    {"tuple": [{"value": 3}, {"array": {"shape": [8], "dtype": "float32"}}]}],
           "kwargs": [["mask", {"dict": [["m", {"array": {"shape": [2, 2], "dtype": "bool"}}]]}]]}
    assert describe_key(rec) == "key-002.pcgraph ((4, 1) int64, (8,) float32, (2, 2) bool)"
    assert describe_key({"file": "k.pcgraph", "args": [{"value": 1}], "kwargs": []}) == \
        "k.pcgraph (no arrays)"


def test_bindings_of_a_function_are_found_by_name():
    w, b = Arr(0x7F00_0000_0000, 64), Arr(0x7F00_0001_0000, 32)
    table = [Arr(0x7F00_0002_0000, 8), Arr(0x7F00_0003_0000, 8)]

    def step(x):
        return w, table, x

    found = bindings(step, bind={"extra": b})
    assert set(found) == {"bind:extra", "closure:w", "closure:table[0]", "closure:table[1]"}
    assert describe(found["closure:w"]) == {"shape": [64], "dtype": "|u1", "nbytes": 64}
    assert set(bindings(step, bind={"same": w})) == {"bind:same", "closure:table[0]",
                                                     "closure:table[1]"}  # once, first name
    with pytest.raises(ArgumentError, match="not a device array"):
        bindings(step, bind={"x": np.zeros(3)})
    with pytest.raises(ArgumentError, match="module= must be a torch.nn.Module"):
        bindings(step, module=object())


def test_save_refuses_nothing_to_save_and_a_foreign_folder(tmp_path):
    f = pcg.graphed(lambda x: x)
    with pytest.raises(ArgumentError, match="no captured key yet"):
        f.save(tmp_path / "new")
    (tmp_path / "other").mkdir()
    with pytest.raises(ArgumentError, match="is not a saved graphed callable"):
        f.save(tmp_path / "other")


# templates ---------------------------------------------------------------------------

class TorchDtype:
    def __str__(self):
        return "torch.bfloat16"


def test_keys_become_templates():
    arr = ("torch", (2, 8), (8, 1), TorchDtype(), 0, 16)
    cp = ("cupy", (4,), (-4,), np.dtype(np.float32), 0, 256)
    key = ((arr, (int, 3), ("tuple", ((str, "a"), (type(None), None))), ("dict", (("x", cp),))),
           (("flag", (bool, True)),), ())
    args, kwargs = key_templates(key)
    assert args[0] == {"array": {"framework": "torch", "shape": [2, 8], "strides": [8, 1],
                                 "dtype": "bfloat16", "align": 16}}
    assert args[1:3] == [{"value": 3}, {"tuple": [{"value": "a"}, {"value": None}]}]
    assert args[3] == {"dict": [["x", {"array": {"framework": "cupy", "shape": [4],
                                                 "strides": [-4], "dtype": "<f4", "align": 256}}]]}
    assert kwargs == [["flag", {"value": True}]]
    for bad, words in [(((arr, arr), (), ((0, 1, 0),)), "share memory"),
                       (((("buffer", (4,), (1,), "|u1", 0, 256),), (), ()), "DeviceBuffer"),
                       ((((complex, 1j),), (), ()), "complex"),
                       ((((float, float("nan")),), (), ()), "float"),
                       (((("dict", ((1, (int, 2)),)),), (), ()), "not strings")]:
        with pytest.raises(KeySkipped, match=words):
            key_templates(bad)


def test_made_arrays_are_checked_before_any_allocation():
    m = Maker(0, "gpt2.graphs/key-000.pcgraph")
    cupy_t = {"framework": "cupy", "shape": [3, 2], "strides": [-8, 4], "dtype": "<f4", "align": 256}
    assert m.span(cupy_t, 4) == (16, 8)
    with pytest.raises(GraphFileError, match="negative strides"):
        m.span(dict(TORCH_ARRAY, strides=[-4, 1]), 4)
    with pytest.raises(GraphFileError, match="an array of"):
        m.span(dict(TORCH_ARRAY, shape=[1 << 30, 1 << 30], strides=[1 << 30, 1]), 4)
    with pytest.raises(GraphFileError, match="not a numeric dtype"):
        m.dtype(dict(cupy_t, dtype="O"))
    with pytest.raises(GraphFileError, match="not a numpy dtype"):
        m.dtype(dict(cupy_t, dtype="no such"))
    if "torch" not in __import__("sys").modules:
        with pytest.raises(GraphFileError, match="import torch"):
            m.dtype(TORCH_ARRAY)


# where addresses go --------------------------------------------------------------------

class FakePool:
    def __init__(self, *ranges):
        self._ranges = ranges

    def ranges(self):
        return [(a, b, "PyTorch graph pool") for a, b in self._ranges]


class FakeEntry:
    def __init__(self, *pools):
        self._pools = pools
        self.plan = SimpleNamespace(captured=[])  # the inputs it was captured with

    def pools(self):
        return self._pools


W = 0x7F00_0000_0000


@pytest.fixture
def saver(monkeypatch):
    """A save's address places: one binding, two pools (one shared), a workspace lookup."""
    owners = {W + 0x9000: Owner("unknown", "no live tensor"),
              W + 0xA000: Owner("live", "torch.Tensor (4,) float32")}

    class Owners:
        def __init__(self, kept):
            pass

        def find(self, v):
            return owners[v]

    class Dr:
        class CUresult:
            CUDA_SUCCESS = 0

        @staticmethod
        def cuMemGetAddressRange(v):
            return (0, W + 0x9000, 0x800) if v in owners else (1, 0, 0)

    monkeypatch.setattr(graphed_save, "OwnerIndex", Owners)
    monkeypatch.setattr(graphed_save, "dr", Dr)
    fn = pcg.graphed(lambda x: x)
    s = graphed_save._Saver(fn, None, {"w": Arr(W, 0x100)})
    shared = FakePool((W + 0x1000, W + 0x2000), (W + 0x2000, W + 0x2800), (W + 0x4000, W + 0x5000))
    s.add_pools([FakeEntry(shared), FakeEntry(shared, FakePool((W + 0x6000, W + 0x7000)))])
    return s


def test_each_address_is_placed_by_what_holds_it(saver):
    inputs = [(W + 0x8000, W + 0x8000, W + 0x8100)]
    allocs = [(W + 0xB000, W + 0xC000)]
    assert saver.segments.pools == [{"framework": "torch", "segments": [0x1800, 0x1000]},
                                    {"framework": "torch", "segments": [0x1000]}]
    assert saver.place(W + 0x8010, inputs, allocs) == ("input", 0, W + 0x8000)
    assert saver.place(W + 0x8100, inputs, allocs) != ("input", 0, W + 0x8000)  # one past: not
    assert saver.place(W + 0x10, inputs, allocs) == ("binding", "bind:w", W)
    assert saver.place(W + 0x2400, inputs, allocs) == ("pool", 0, 0, W + 0x1000)
    assert saver.place(W + 0x4010, inputs, allocs) == ("pool", 0, 1, W + 0x4000)
    assert saver.place(W + 0x6000, inputs, allocs) == ("pool", 1, 0, W + 0x6000)
    assert saver.place(W + 0xB100, inputs, allocs) == ()  # graph memory: the file's own
    assert saver.place(12345, inputs, allocs) == ()  # a number
    assert saver.place(W + 0x9000, inputs, allocs) == ("workspace", 0, W + 0x9000)
    assert saver.workspaces == [[W + 0x9000, W + 0x9800]]
    with pytest.raises(KeySkipped, match=r"torch.Tensor \(4,\) float32 \(live\).*bind="):
        saver.place(W + 0xA000, inputs, allocs)


def test_a_value_in_another_keys_input_is_named_as_such(saver):
    """A left-out key's message says when the value lies in an input another key of the
    callable was captured with (and says nothing for its own inputs or other memory)."""
    first, second = saver.entries
    first.plan = SimpleNamespace(captured=[(W + 0x8000, W + 0x8000, W + 0x8040)])
    second.plan = SimpleNamespace(captured=[(W + 0xA000, W + 0xA000, W + 0xA100),
                                            (W + 0xA200, W + 0xA200, W + 0xA300)])
    assert saver.other_input(W + 0xA210, first) == " (input 1 of the callable's key 2)"
    assert saver.other_input(W + 0x8010, second) == " (input 0 of the callable's key 1)"
    assert saver.other_input(W + 0x8010, first) == ""  # its own input
    assert saver.other_input(W + 0xA300, first) == ""  # one past the end


def test_a_workspace_a_load_made_is_a_workspace_again(saver, monkeypatch):
    made = (W + 0xD000, W + 0xE000)
    monkeypatch.setattr(graphed_save, "loaded_workspace",
                        lambda v: made if made[0] <= v < made[1] else None)
    monkeypatch.setattr(graphed_save.dr, "cuMemGetAddressRange",
                        staticmethod(lambda v: (0, W + 0xD000, 0x1000)))
    # no owner lookup (the fake one would not know the address): the load's record decides
    assert saver.place(W + 0xD010, [], []) == ("workspace", 0, W + 0xD000)
    assert saver.workspaces == [[W + 0xD000, W + 0xE000]]


def test_outputs_a_file_cannot_make_are_named(saver):
    class ModelOutput(dict):
        pass

    with pytest.raises(KeySkipped, match="ModelOutput.*logits"):
        saver.outputs(ModelOutput(logits=1))
    with pytest.raises(KeySkipped, match="not a PyTorch tensor or CuPy array"):
        saver.outputs((Arr(W + 0x1000, 16),))
    assert saver.outputs({"n": [1, None, "s"]}) == {
        "dict": [["n", {"list": [{"value": 1}, {"value": None}, {"value": "s"}]}]]}


# the kernel finder ---------------------------------------------------------------------

class FakeKernelNode:
    kernel = None

    def __init__(self, name, func):
        self.mangled_name, self.function = name, func


class FakeGraph:
    def __init__(self, names):
        self.table = self
        self._nodes = [FakeKernelNode(n, FUNCS[n]) for n in names] + [object()]

    def walk(self):
        return [(n, 0, None) for n in self._nodes]


#: name -> function; function // 100 is its module
FUNCS = {"gemm_a": 101, "gemm_b": 102, "gemm_c": 103, "ln": 201, "softmax": 202, "other": 301}


@pytest.fixture
def driver(monkeypatch):
    lookups = []

    class Dr:
        class CUresult:
            CUDA_SUCCESS = 0

        CUfunction = int

        @staticmethod
        def cuFuncGetModule(f):
            return (0, f // 100) if f != 301 else (201, 0)  # 301: its module is not given

        @staticmethod
        def cuModuleGetFunction(mod, raw):
            lookups.append((mod, raw))
            f = FUNCS.get(raw.decode(), 0)
            return (0, f) if f and f // 100 == mod else (500, 0)

        @staticmethod
        def cuFuncGetName(f):
            return next(n for n, v in FUNCS.items() if v == f).encode()

    monkeypatch.setattr(kernel_probe, "dr", Dr)
    monkeypatch.setattr(kernel_probe, "call", lambda fn, *a: fn(*a))
    monkeypatch.setattr(kernel_probe, "kernel_for_function", lambda f: None)
    return lookups


def test_one_probe_and_the_modules_find_every_kernel(driver):
    needs = [{"gemm_a", "ln"}, {"gemm_b", "ln", "softmax"}, {"gemm_c", "ln", "softmax"},
             {"gemm_b", "ln", "softmax"}]
    probed = []

    def probe(i):
        probed.append(i)
        return FakeGraph(sorted(needs[i]))

    finder = kernel_probe.KernelFinder(needs, probe).run()
    assert probed == [1] and finder.probes == 1  # the key covering most names, once
    assert finder.table == {n: FUNCS[n] for n in set().union(*needs)}
    assert finder.module_hits == 2 and finder.missing(needs[2]) == []
    assert finder.resolve("gemm_c") == 103


def test_a_name_in_no_module_seen_takes_one_more_probe_and_never_two_per_set(driver):
    needs = [{"gemm_a"}, {"other"}, {"other"}]
    probed = []

    def probe(i):
        probed.append(i)
        if i == 1:
            raise RuntimeError("capture failed")
        return FakeGraph(sorted(needs[i]))

    finder = kernel_probe.KernelFinder(needs, probe).run()
    assert probed == [0, 1]  # key 2 has key 1's set: not probed again
    assert finder.probes == 2 and finder.failures == {1: "RuntimeError: capture failed"}
    assert finder.missing(needs[2]) == ["other"]
    with pytest.raises(KeyError):
        finder.resolve("other")


def test_no_library_kernel_needs_no_probe(driver):
    finder = kernel_probe.KernelFinder([set(), set()], lambda i: pytest.fail("probed")).run()
    assert finder.probes == 0 and finder.table == {}


def test_names_are_printable_everywhere():
    assert all(c in string.printable for c in json.dumps(sample()))


def test_a_name_of_several_functions_is_found_per_variant(driver):
    """CuPy's cupy_tanh for float and double: one name, the same parameter sizes."""
    needs = [{"cupy_tanh", "ln"}, {"cupy_tanh", "ln"}, {"cupy_tanh"}]
    variants = [{"cupy_tanh": 0}, {"cupy_tanh": 1}, {"cupy_tanh": 0}]
    funcs = {0: 401, 1: 402}
    probed = []

    def probe(i):
        probed.append(i)
        g = FakeGraph(["ln"])
        g._nodes.insert(0, FakeKernelNode("cupy_tanh", funcs[variants[i]["cupy_tanh"]]))
        return g

    finder = kernel_probe.KernelFinder(needs, probe, variants).run()
    assert probed == [0, 1]  # key 2 uses key 0's variant: no probe of its own
    assert [finder.resolver(v)("cupy_tanh") for v in variants] == [401, 402, 401]
    assert finder.resolver({})("ln") == 201 and finder.resolve("ln") == 201
    assert finder.missing(needs[1], variants[1]) == []
    assert not any(raw == b"cupy_tanh" for _, raw in driver)  # never by a module lookup
    lone = kernel_probe.KernelFinder([{"cupy_tanh"}], lambda i: pytest.fail("probed"),
                                     [{"cupy_tanh": 1}])
    lone.learn(FakeGraph(["ln"]))  # a variant name is never learned without its variant
    assert lone.missing({"cupy_tanh"}, {"cupy_tanh": 1}) == ["cupy_tanh"]


def test_variants_are_marked_for_extern_c_names_that_ran_as_several_functions():
    keys = [{}, {}, {}]
    kernel_probe.mark_variants(keys, [{"cupy_tanh": 1, "_Z3addPf": 5, "ln": 7},
                                      {"cupy_tanh": 2, "_Z3addPf": 6, "ln": 7},
                                      {"cupy_tanh": 1}])
    assert [k["variants"] for k in keys] == [[["cupy_tanh", 0]], [["cupy_tanh", 1]],
                                             [["cupy_tanh", 0]]]
    assert kernel_probe.mangled("_Z3addPf") and not kernel_probe.mangled("cupy_tanh")


def test_a_graph_running_two_functions_of_one_extern_c_name_is_not_saved(saver, monkeypatch,
                                                                       tmp_path):
    class Plan:
        captured = []

    class E:
        plan, outputs, device, pool = Plan(), None, 0, None

        class graph:
            class table:
                walk = staticmethod(lambda: [])

    monkeypatch.setattr(graphed_save, "save_graph", lambda *a, **k: pytest.fail("saved"))
    monkeypatch.setattr(graphed_save, "library_functions",
                        lambda g: {"cupy_tanh": {401, 402}, "_Z3addPf": {5}})
    with pytest.raises(KeySkipped, match="2 different kernels named cupy_tanh"):
        saver.key(((), (), ()), E(), tmp_path / "key-000.pcgraph")
    monkeypatch.setattr(graphed_save, "library_functions",
                        lambda g: {"_Z3addPf": {5, 6}})  # a mangled name: its code is named
    with pytest.raises(pytest.fail.Exception, match="saved"):
        saver.key(((), (), ()), E(), tmp_path / "key-000.pcgraph")


def test_a_key_left_out_says_which_node_holds_the_address(saver, tmp_path, monkeypatch):
    """A key whose graph holds an address of another live array is left out, and the
    reason names the node and the argument slot that holds it."""
    from pycudagraph.nodes.facets import Site

    class Node:
        kernel_name = "gemm_kernel"

        def sites(self):
            return [Site("arg 2 +48", 48, W + 0xA000, arg=2)]

    class Plan:
        captured = []

    class E:
        plan, outputs, device, pool, bound = Plan(), None, 0, None, ()

        class graph:
            class table:
                walk = staticmethod(lambda: [(Node(), 0, None)])

    saved = []

    def save_graph(graph, path, slots, numbers):
        saved.append(numbers)
        path.write_bytes(b"graph")

    monkeypatch.setattr(graphed_save, "save_graph", save_graph)
    # no inputs kept to capture the call again with: nothing tells a left-over apart
    with pytest.raises(KeySkipped, match=r"\(live\).*sits in arg 2 \+48 of gemm_kernel; no "
                                         r"inputs of the key are kept"):
        saver.key(((), (), ()), E(), tmp_path / "key-000.pcgraph")
    # a second capture holds another value there: a left-over, saved as the number it is
    asked = []
    monkeypatch.setattr(graphed_save, "left_overs",
                        lambda fn, e, nodes, found, why: asked.append(found) or set(found))
    monkeypatch.setattr(graphed_save, "library_functions", lambda g: {})
    saver.key(((), (), ()), E(), tmp_path / "key-000.pcgraph")
    assert asked == [{W + 0xA000: [(0, "arg 2 +48")]}]
    assert saver.left_overs == ["arg 2 +48 of gemm_kernel"]
    assert saved == [{W + 0xA000}]  # saved as a number, though device memory holds it
    # the same value there: an address the graph reads, and the key stays out
    monkeypatch.setattr(graphed_save, "left_overs", lambda fn, e, nodes, found, why: set())
    with pytest.raises(KeySkipped, match=r"sits in arg 2 \+48 of gemm_kernel; a second capture "
                                         r"of the call holds it there too"):
        saver.key(((), (), ()), E(), tmp_path / "key-000.pcgraph")


class _WitnessKernel:
    """A kernel node as the second capture's judge reads one: its function and its sites
    (``arg_1=0x7000`` is the site "arg 1" holding 0x7000)."""

    def __init__(self, func, **values):
        self.func, self.values = func, values

    def driver_params(self):
        return SimpleNamespace(func=self.func, kern=0)

    def sites(self):
        from pycudagraph.nodes.facets import Site
        return [Site(p.replace("_", " "), 0, v, arg=0) for p, v in self.values.items()]


class _WitnessCopy(_WitnessKernel):
    """A node of another type (a copy)."""


def test_a_left_over_differs_at_every_place_in_a_second_capture():
    """:func:`graphed_witness.differing`: a value counts as a library's left-over only when
    the node at each of its places, of the same type and function, holds another value
    there in the second capture."""
    from pycudagraph.frameworks.graphed_witness import differing

    K, Copy = _WitnessKernel, _WitnessCopy
    first = [K(1, arg_1=0x7000), K(2, arg_0=0x7000, arg_1=0x8000), Copy(0, src=0x9000)]
    found = {0x7000: [(0, "arg 1"), (1, "arg 0")], 0x8000: [(1, "arg 1")],
             0x9000: [(2, "src")]}
    second = [K(1, arg_1=0x1234), K(2, arg_0=0x5678, arg_1=0x8000), Copy(0, src=0)]
    assert differing(found, first, second) == {0x7000, 0x9000}
    second[1] = K(2, arg_0=0x7000, arg_1=0x1)  # equal at one of its places: it is read
    assert differing(found, first, second) == {0x8000, 0x9000}
    second[1] = K(3, arg_0=0x5678, arg_1=0x1)  # another function there: proves nothing
    assert differing(found, first, second) == {0x9000}
    second[2] = K(0, src=0)  # another type of node
    why: dict = {}
    assert differing(found, first, second, why) == set()
    assert why[0x9000] == ("a second capture of the call has no node like the one holding "
                           "it (3 nodes against the key's 3)")
    assert 0x8000 in why and 0x7000 in why  # their node 1 launches another function there
    assert differing(found, first, second[:2]) == set()  # a graph of another shape


def test_a_second_capture_pairs_nodes_though_the_key_ends_with_its_output_copies():
    """A graphed key with the shared pool ends its graph with copies of its outputs into
    the outputs pool, which a second capture of the bare call has not; a library may also
    choose another kernel. :func:`graphed_witness.paired` pairs the other nodes by the
    longest runs of type and function, and :func:`differing` judges the values by them."""
    from pycudagraph.frameworks.graphed_witness import differing, paired

    K, Copy = _WitnessKernel, _WitnessCopy
    key = [K(1, arg_0=0x10), K(5, arg_1=0x7000), K(2, arg_1=0x20), K(3, arg_1=0x8000),
           Copy(0, src=0x30), Copy(0, src=0x40)]
    second = [K(1, arg_0=0x10), K(6, arg_1=0x7000), K(2, arg_1=0x20), K(3, arg_1=0x1234)]
    assert paired(key, second) == {0: 0, 2: 2, 3: 3}
    why: dict = {}
    assert differing({0x8000: [(3, "arg 1")], 0x7000: [(1, "arg 1")]}, key, second, why) \
        == {0x8000}
    assert list(why) == [0x7000] and "(4 nodes against the key's 6)" in why[0x7000]
    # the same value at the paired node: an address the graph reads, no reason needed
    second[3] = K(3, arg_1=0x8000)
    why.clear()
    assert differing({0x8000: [(3, "arg 1")]}, key, second, why) == set() and not why


def test_the_second_capture_runs_in_a_new_thread_after_a_warm_up(monkeypatch):
    """:func:`graphed_witness.left_overs` on fakes: the warm-up runs on copies of the key's
    inputs and the capture on the inputs themselves, both in one new thread; the second
    graph's nodes go to :func:`differing` and the graph is closed; a failure is said in
    ``why`` and proves nothing; no kept inputs: nothing is run."""
    import contextlib
    import threading
    from types import SimpleNamespace as NS
    from pycudagraph.frameworks import graphed_witness as w

    seen = []

    class Graph:
        closed = False
        table = NS(walk=lambda: [("n0", 0, None), ("n1", 0, None)])

        def close(self):
            Graph.closed = True

    @contextlib.contextmanager
    def capture(side, mode, pool):
        seen.append(("capture", mode, threading.current_thread().name))
        yield NS(graph=Graph())

    monkeypatch.setattr(w, "capture", capture)
    monkeypatch.setattr(w, "Stream", lambda non_blocking: NS(ptr=0x51, synchronize=lambda: None))
    monkeypatch.setattr(w, "CapturePool", lambda: object())
    monkeypatch.setattr(w, "Device", lambda d: NS(synchronize=lambda: seen.append("sync")))
    monkeypatch.setattr(w, "device_scope", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(w, "framework_streams", lambda ptr, d: contextlib.nullcontext())
    monkeypatch.setattr(w, "twin", lambda a: ("copy", a))
    monkeypatch.setattr(w, "substitute", lambda v, f: (tuple(map(f, v[0])),
                                                       {k: f(x) for k, x in v[1].items()}))
    monkeypatch.setattr(w, "differing", lambda found, first, second, why:
                        seen.append(("differing", first, second)) or set(found))

    def fn(x, scale=1):
        seen.append(("fn", x, scale, threading.current_thread().name))

    entry = NS(device=0, bound=(("X",), {"scale": 2}))
    found = {0x7000: [(1, "arg 1")]}
    assert w.left_overs(fn, entry, ["a", "b"], found) == {0x7000}
    here = threading.current_thread().name
    names = {s[-1] for s in seen if isinstance(s, tuple) and s[0] in ("fn", "capture")}
    assert len(names) == 1 and here not in names  # both in one thread, not this one
    calls = [s for s in seen if isinstance(s, tuple) and s[0] == "fn"]
    assert [c[1:3] for c in calls] == [(("copy", "X"), ("copy", 2)), ("X", 2)]
    assert seen.index("sync") < seen.index(calls[0])  # the inputs are ready for the copies
    assert ("differing", ["a", "b"], ["n0", "n1"]) in seen and Graph.closed

    def broken(x, scale=1):
        raise RuntimeError("operation not permitted when stream is capturing")
    why: dict = {}
    assert w.left_overs(broken, entry, ["a", "b"], found, why) == set()
    assert why == {None: "capturing the call again failed (RuntimeError: operation not "
                         "permitted when stream is capturing)"}
    why.clear()
    assert w.left_overs(fn, NS(device=0, bound=()), ["a"], found, why) == set()
    assert why == {None: "no inputs of the key are kept to capture its call again with"}
