"""The compile cache: what goes into the key, and damaged entries (CPU, arch="sm_90")."""

import pytest

import pycudagraph as pcg
from pycudagraph.compile import cache as compile_cache
from pycudagraph.compile import program
from pycudagraph.runtime.trace import trace

SRC = '#include "{header}"\nextern "C" __global__ void k(int* x) {{ x[0] = VALUE; }}\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(folder))
    return folder


def _compiles(fn) -> int:
    """How many times NVRTC compiled while fn ran."""
    with trace() as t:
        fn()
    return sum("nvrtcCompileProgram" in c for c in t.calls)


def _entries(folder):
    return sorted(folder.glob("*.cubin"))


def test_quoted_header_change_recompiles(tmp_path, cache):
    (tmp_path / "value.h").write_text("#define VALUE 1\n")
    cu = tmp_path / "k.cu"
    cu.write_text(SRC.format(header="value.h"))
    first = pcg.Module.from_file(cu, arch="sm_90")
    assert _compiles(lambda: pcg.Module.from_file(cu, arch="sm_90")) == 0
    (tmp_path / "value.h").write_text("#define VALUE 2\n")
    mod = None

    def again():
        nonlocal mod
        mod = pcg.Module.from_file(cu, arch="sm_90")
    assert _compiles(again) == 1
    assert mod.cubin != first.cubin
    assert len(_entries(cache)) == 2


def test_nested_header_in_include_path_changes_key(tmp_path, cache):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "outer.h").write_text('#include "inner.h"\n')
    (inc / "inner.h").write_text("#define VALUE 3\n")
    prog = pcg.Program(SRC.format(header="outer.h"), name="n.cu", options=(f"-I{inc}",))
    prog.compile(arch="sm_90")
    assert _compiles(lambda: prog.compile(arch="sm_90")) == 0
    (inc / "inner.h").write_text("#define VALUE 4\n")
    assert _compiles(lambda: prog.compile(arch="sm_90")) == 1


def test_key_covers_options_arch_name_and_nvrtc_version(monkeypatch):
    base = compile_cache.cache_key("s", "a.cu", ("-O3", "--gpu-architecture=sm_90"), (13, 0))
    assert base != compile_cache.cache_key("s", "a.cu", ("-O3", "--gpu-architecture=sm_80"), (13, 0))
    assert base != compile_cache.cache_key("s", "a.cu", ("--gpu-architecture=sm_90",), (13, 0))
    assert base != compile_cache.cache_key("s", "b.cu", ("-O3", "--gpu-architecture=sm_90"), (13, 0))
    assert base != compile_cache.cache_key("s", "a.cu", ("-O3", "--gpu-architecture=sm_90"), (13, 1))
    assert base != compile_cache.cache_key("t", "a.cu", ("-O3", "--gpu-architecture=sm_90"), (13, 0))


def _damage_cases():
    return {
        "empty": lambda b: b"",
        "truncated": lambda b: b[: len(b) // 2],
        "flipped byte": lambda b: b[:-100] + bytes([b[-100] ^ 0xFF]) + b[-99:],
        "old format": lambda b: b[b.index(b"\x7fELF"):],
        "garbage": lambda b: b"\x00" * 4096,
    }


@pytest.mark.parametrize("how", sorted(_damage_cases()))
def test_damaged_entry_is_detected_and_rebuilt(cache, how):
    prog = pcg.Program('extern "C" __global__ void d(float* y) { y[0] = 1.0f; }', name="d.cu")
    good = prog.compile(arch="sm_90")
    (path,) = _entries(cache)
    path.write_bytes(_damage_cases()[how](path.read_bytes()))
    assert compile_cache.load(path) is None
    mod = None

    def again():
        nonlocal mod
        mod = prog.compile(arch="sm_90")
    assert _compiles(again) == 1
    assert mod.cubin == good.cubin and mod.kernel_names() == ["d"]
    assert compile_cache.load(path).cubin == good.cubin  # the entry was rewritten


def test_entry_keeps_ptx_so_a_hit_has_compiled_facts(cache):
    prog = pcg.Program('extern "C" __global__ void f(double a, char c) {}', name="f.cu")
    prog.compile(arch="sm_90")
    mod = prog.compile(arch="sm_90")  # from the cache
    assert [(p.size, p.cls) for p in mod.entries["f"]] == [(8, "float"), (1, "int")]


def test_read_only_cache_folder_still_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(blocker / "sub"))
    mod = pcg.Program('extern "C" __global__ void r() {}').compile(arch="sm_90")
    assert mod.kernel_names() == ["r"]
    assert program.nvrtc_version()[0] >= 12
