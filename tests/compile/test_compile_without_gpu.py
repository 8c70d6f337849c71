"""Compiling and checking kernels on a machine with no GPU (CPU; NVRTC only).

``compile(arch=...)`` needs no GPU, and the module it makes knows every parameter's size and
offset, so kernels whose source the parser cannot read (parenthesised declarators, function
pointers, ``decltype``, ``[[attributes]]``) still get their parameters, argument tuples can
be checked with ``Kernel.pack_args``, a CUBIN with a large parameter block is read, a header
included through a macro is part of the cache key, and messages stay short."""

import os
import struct
import warnings
from pathlib import Path

import pytest

import pycudagraph as pcg
from pycudagraph.compile import cache as compile_cache
from pycudagraph.compile.headers import UNKNOWN, include_files
from pycudagraph.compile.ptx import cubin_entries

ARCH = "sm_90"


def compile_(src: str, **kw):
    return pcg.Program(src, **kw).compile(arch=ARCH)


@pytest.fixture(scope="module")
def odd():
    return compile_(r'''
extern "C" __global__ void paren(float (*p), int (n)) { p[0] = n; }
extern "C" __global__ void fnptr(float* y, void (*cb)(int), int n) { y[0] = n; }
extern "C" __global__ void rows(int (*r)[4], int n) { r[0][0] = n; }
extern "C" __global__ void dtype(float* y, decltype(1.0f) s, [[maybe_unused]] int n) { y[0] = s; }
extern "C" __global__ void attr(float* y, __attribute__((unused)) int n) { y[0] = 1; }
''')


@pytest.mark.parametrize("name, expected", [
    ("paren", [("p", "pointer", 8), ("n", "int", 4)]),
    ("fnptr", [("y", "pointer", 8), ("cb", "pointer", 8), ("n", "int", 4)]),
    ("rows", [("r", "pointer", 8), ("n", "int", 4)]),
    ("attr", [("y", "pointer", 8), ("n", "int", 4)]),
])
def test_declarators_the_parser_now_reads(odd, name, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read, not guessed
        k = odd.get_kernel(name)
    assert [(p.name, p.kind, p.size) for p in k.params] == expected


def test_decltype_falls_back_to_the_compiled_sizes_with_a_warning(odd):
    with pytest.warns(pcg.SignatureWarning, match="dtype: cannot read .*decltype.*using the "
                                                  "compiled kernel's 3"):
        k = odd.get_kernel("dtype")
    assert [(p.name, p.kind, p.size) for p in k.params] == [
        ("y", "pointer", 8), ("s", "float", 4), ("n", "int", 4)]
    assert k.pack_args((0x10, 1.5, 3)) == struct.pack("<Qfi", 0x10, 1.5, 3)


def test_a_function_pointer_takes_an_address(odd):
    k = odd["fnptr"]
    assert k.pack_args((0x10, 0x20, 1))[8:16] == struct.pack("<Q", 0x20)
    with pytest.raises(pcg.ArgumentError, match=r"parameter 1 'cb' \(void \(\*\)\(int\)\)"):
        k.pack_args((0x10, "f", 1))


@pytest.mark.parametrize("signature", [5, b"int n", ["int n"], 1.5, True], ids=repr)
def test_signature_must_be_a_str(odd, signature):
    with pytest.raises(pcg.ArgumentError, match="paren: signature= .* must be a str"):
        odd.get_kernel("paren", signature=signature)


def test_a_name_not_in_the_image_is_not_told_to_give_signature(odd):
    with pytest.raises(pcg.ArgumentError, match="no kernel named 'nope'.*compiled image has "
                                                "none") as info:
        odd.get_kernel("nope", signature="int n")
    assert "signature=" not in str(info.value)


@pytest.mark.parametrize("name", [5, None, b"paren"], ids=repr)
def test_kernel_name_must_be_a_str(odd, name):
    with pytest.raises(pcg.ArgumentError, match="kernel name must be a non-empty str"):
        odd.get_kernel(name)


# compile() ------------------------------------------------------------------------------

def test_compile_without_arch_says_arch_works_without_a_gpu():
    if pcg._cuda.cuda_available():
        pytest.skip("a GPU is usable here: compile() takes its architecture")
    with pytest.raises(pcg.CudaNotAvailableError, match=r'compile\(arch="sm_90"\) works without '
                                                        'one'):
        pcg.Program('extern "C" __global__ void k() {}').compile()


def test_compile_error_leaves_out_the_added_include_path():
    with pytest.raises(pcg.CompileError) as info:
        compile_('extern "C" __global__ void k() { not_declared(); }', options=("-DX=1",))
    exc = info.value
    first = str(exc).splitlines()[0]
    assert "-DX=1" in first and f"--gpu-architecture={ARCH}" in first
    assert "the CUDA headers' include path" in first
    assert not any(o in first for o in exc.added), first  # the long -I/... is not shown
    assert all(o in exc.options for o in exc.added)  # but kept on the exception
    assert "not_declared" in exc.log


@pytest.mark.parametrize("options, words", [
    ([None], "Program options must be str"), ([1], "Program options must be str"),
    (5, "Program options must be a sequence"), ({"-O3": 1}, "Program options must be a sequence"),
    ((b"-O3",), "Program options must be str"),
])
def test_program_options_must_be_strings(options, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.Program("", options=options)


@pytest.mark.parametrize("path", [5, None, b"helpers.cu", ""], ids=repr)
def test_from_file_path_must_be_a_path(path):
    with pytest.raises(pcg.ArgumentError, match="Module.from_file: path must be a file path"):
        pcg.Module.from_file(path, arch=ARCH)


@pytest.mark.parametrize("arch", ["90", "sm90", "compute_90", "sm_9", 90, None.__class__])
def test_arch_is_checked_before_nvrtc(arch):
    with pytest.raises(pcg.ArgumentError, match="arch"):
        pcg.Program("").compile(arch=arch)


# pack_args on a compiled module ------------------------------------------------------

def test_pack_args_on_a_module_compiled_without_gpu():
    k = pcg.Module.from_file("helpers.cu", arch=ARCH)["axpy"]
    assert k.pack_args((0x1000, 0x2000, 2.0, 1024)) == struct.pack("<QQfi", 0x1000, 0x2000,
                                                                     2.0, 1024)
    with pytest.raises(pcg.ArgumentError, match=r"axpy\(\): parameter 3 'n' \(int\) cannot take "
                                                r"2\.5"):
        k.pack_args((0x1000, 0x2000, 2.0, 2.5))


def test_pack_args_takes_offsets_from_the_compiled_kernel():
    m = compile_('struct S { double d; char c; };\n'
                 'extern "C" __global__ void k(char c, S s, int n) {}')
    block = m["k"].pack_args((7, bytes(range(16)), 9))
    assert len(block) == 28 and block[0] == 7 and block[8:24] == bytes(range(16))
    assert struct.unpack_from("<i", block, 24)[0] == 9


@pytest.mark.parametrize("ints", [1000, 4000, 8000])
def test_a_large_parameter_block_is_read_from_the_cubin(ints):
    """NVRTC records parameters of a block over 4 KiB as EIATTR_KPARAM_INFO_V2: a CUBIN
    alone (no PTX) still gives both parameters, sizes and offsets."""
    m = compile_('struct Big { int v[%d]; };\n'
                 'extern "C" __global__ void k(Big b, float* y) { y[0] = b.v[0]; }' % ints)
    params = cubin_entries(m.cubin)["k"]
    assert [(c.size, c.offset) for c in params] == [(4 * ints, 0), (8, 4 * ints)]
    alone = pcg.Module(m.cubin, name="big.cubin")
    k = alone.get_kernel("k")
    assert [p.size for p in k.params] == [4 * ints, 8]


# the compile cache ------------------------------------------------------------------

def test_the_test_session_does_not_use_the_users_cache():
    folder = compile_cache.cache_dir()
    assert folder is not None
    assert Path.home() / ".cache" not in folder.parents and "pycudagraph-test-cache" in str(folder)


def test_tilde_in_the_cache_dir_is_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", "~/cubins")
    assert compile_cache.cache_dir() == tmp_path / "cubins"
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", "$HOME/more")
    assert compile_cache.cache_dir() == tmp_path / "more"


def test_a_header_included_through_a_macro_is_part_of_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "value.h").write_text("#define VALUE 1\n")
    src = ('#define HEADER "value.h"\n#include HEADER\n'
           'extern "C" __global__ void k(int* y) { y[0] = VALUE; }\n')
    name = str(tmp_path / "k.cu")
    key1 = compile_cache.cache_key(src, name, (), (13, 0))
    (tmp_path / "value.h").write_text("#define VALUE 2\n")
    key2 = compile_cache.cache_key(src, name, (), (13, 0))
    assert key1 and key2 and key1 != key2
    one = pcg.Program(src, name=name).compile(arch=ARCH)
    (tmp_path / "value.h").write_text("#define VALUE 3\n")
    other = pcg.Program(src, name=name).compile(arch=ARCH)
    assert one.cubin != other.cubin  # not served stale from the cache


def test_a_macro_include_that_cannot_be_told_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    src = '#include SOMEWHERE\nextern "C" __global__ void k() {}\n'
    assert include_files(src, "k.cu", ()) == [("SOMEWHERE", UNKNOWN)]
    assert compile_cache.cache_key(src, "k.cu", (), (13, 0)) is None
    (tmp_path / "h.h").write_text("\n")
    opts = ("-DSOMEWHERE=\"h.h\"", f"-I{tmp_path}")
    assert [p for _, p in include_files(src, "k.cu", opts)] == [str(tmp_path / "h.h")]
    pcg.Program(src, name="k.cu", options=opts).compile(arch=ARCH)
    assert os.listdir(tmp_path / "cache")  # resolvable: cached


def test_every_definition_of_an_include_macro_counts(tmp_path):
    for n in "ab":
        (tmp_path / f"{n}.h").write_text("\n")
    src = ('#ifdef USE_A\n#define H "a.h"\n#else\n#define H "b.h"\n#endif\n#include H\n')
    found = sorted(os.path.basename(p) for _, p in include_files(src, str(tmp_path / "k.cu"), ()))
    assert found == ["a.h", "b.h"]
