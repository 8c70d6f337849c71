"""Bad input a user may hand the compile layer, refused (or accepted) as they would expect
(CPU; NVRTC compiles for arch="sm_90" with no GPU):

- a NUL character in a Program's name, source, option or name expression, or in a kernel
  name: an ArgumentError naming the parameter (NVRTC would read the text cut short);
- a source file that is not UTF-8: an ArgumentError naming the file, the byte offset and
  the line, not a bare UnicodeDecodeError;
- a header edited in place keeping its size and mtime: the compile cache hashes what the
  header holds, so it compiles again;
- a signature with an empty slot (``"float*, , int"``): refused, naming the position;
- True for an int or float parameter, a float64 array for a float4, a numpy float for a
  pointer: refused with an ArgumentError naming the kernel, the parameter and the value.
"""

import os

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile.signature import parse_params
from pycudagraph.runtime.trace import trace

from tests.support.fakes import fake_kernel

KERNEL = 'extern "C" __global__ void k(int* x, int n) { x[0] = n; }\n'


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


# NUL characters --------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, words", [
    ({"source": KERNEL + "\0// after the NUL NVRTC would not read\n"},
     r"Program: source must not hold a NUL character, got one at offset 58 \(line 2\)"),
    ({"source": KERNEL, "name": "k\0.cu"}, "Program: name must not hold a NUL character, got one at offset 1"),
    ({"source": KERNEL, "options": ("-DN=1\0",)}, "Program: an option must not hold a NUL"),
    ({"source": KERNEL, "name_expressions": ("k\0",)}, "Program: a name expression must not hold a NUL"),
])
def test_nul_in_program_text_is_refused_naming_the_parameter(kwargs, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.Program(**kwargs)


def test_nul_refused_before_nvrtc_sees_it(cache):
    with trace() as t:
        with pytest.raises(pcg.ArgumentError, match="Program: source"):
            pcg.Program(KERNEL.replace("x[0] = n;", "x[0] = n;\0 junk that does not compile")
                        ).compile(arch="sm_90")
    assert not t.calls  # not a compile error about something else


def test_text_without_utf8_is_refused():
    with pytest.raises(pcg.ArgumentError, match=r"Program: source must be text that has UTF-8, "
                                                r"got '\\udce9' \(an unpaired surrogate\) at offset 3"):
        pcg.Program("// \udce9\n" + KERNEL)


def test_nul_in_kernel_name_is_refused_not_cut_short(cache):
    mod = pcg.Program(KERNEL).compile(arch="sm_90")
    assert mod.get_kernel("k").name == "k"
    with pytest.raises(pcg.ArgumentError, match="get_kernel: name must not hold a NUL character"):
        mod.get_kernel("k\0other")


def test_nul_in_a_file_path_is_refused(tmp_path):
    with pytest.raises(pcg.ArgumentError, match="Module.from_file: path must not hold a NUL"):
        pcg.Module.from_file(str(tmp_path / "k.cu") + "\0x", arch="sm_90")


# Source files that are not UTF-8 ---------------------------------------------------

def test_source_file_not_utf8_names_file_offset_and_line(tmp_path, cache):
    cu = tmp_path / "latin1.cu"
    cu.write_bytes(KERNEL.encode() + "// café\n".encode("latin-1"))
    offset = len(KERNEL.encode()) + len(b"// caf")
    with pytest.raises(pcg.ArgumentError) as info:
        pcg.Module.from_file(cu, arch="sm_90")
    msg = str(info.value)
    assert str(cu) in msg and f"byte 0xe9 at byte offset {offset} (line 2)" in msg, msg
    assert "UTF-8" in msg
    assert not isinstance(info.value, UnicodeDecodeError)


def test_source_file_with_a_nul_byte_names_file_and_offset(tmp_path):
    cu = tmp_path / "nul.cu"
    cu.write_bytes(b"// \xc3\xa9\n\0" + KERNEL.encode())
    with pytest.raises(pcg.ArgumentError, match=r"nul.cu must be text, got a NUL byte at byte "
                                                r"offset 6 \(line 2\)"):
        pcg.Module.from_file(cu, arch="sm_90")


def test_utf8_source_file_compiles(tmp_path, cache):
    cu = tmp_path / "utf8.cu"
    cu.write_text("// café, ∑\n" + KERNEL, encoding="utf-8")
    assert pcg.Module.from_file(cu, arch="sm_90").kernel_names() == ["k"]


def test_included_header_not_utf8_is_read_as_nvrtc_reads_it(tmp_path, cache):
    """NVRTC reads an included file's bytes itself (a Latin-1 comment in a header compiles);
    the cache key reads them as bytes too, so no decoding error and edits still count."""
    header = tmp_path / "latin1.h"
    header.write_bytes("// café\n#define VALUE 1\n".encode("latin-1"))
    cu = tmp_path / "k.cu"
    cu.write_text('#include "latin1.h"\nextern "C" __global__ void k(int* x) { x[0] = VALUE; }\n')
    first = pcg.Module.from_file(cu, arch="sm_90")
    assert first.kernel_names() == ["k"]
    header.write_bytes("// café\n#define VALUE 2\n".encode("latin-1"))
    assert pcg.Module.from_file(cu, arch="sm_90").cubin != first.cubin


# The compile cache and headers edited in place ---------------------------------------

def test_header_edited_keeping_size_and_mtime_recompiles(tmp_path, cache):
    header = tmp_path / "value.h"
    header.write_text("#define VALUE 1\n")
    cu = tmp_path / "k.cu"
    cu.write_text('#include "value.h"\nextern "C" __global__ void k(int* x) { x[0] = VALUE; }\n')
    first = pcg.Module.from_file(cu, arch="sm_90")
    assert _compiles(lambda: pcg.Module.from_file(cu, arch="sm_90")) == 0  # a cache hit
    before = os.stat(header)
    with open(header, "r+b") as fh:  # in place: same size
        fh.write(b"#define VALUE 7\n")
    os.utime(header, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(header)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    got = []
    assert _compiles(lambda: got.append(pcg.Module.from_file(cu, arch="sm_90"))) == 1
    assert got[0].cubin != first.cubin
    assert "7" in got[0].ptx and got[0].ptx != first.ptx


# Signatures with an empty slot -------------------------------------------------------

@pytest.mark.parametrize("text, position, count", [
    ("float*, , int", 1, 3), ("float* y, int n,", 2, 3), (", int n", 0, 2), ("int,,", 1, 3),
    ("(float*, , int)", 1, 3),
])
def test_signature_with_an_empty_slot_is_refused(text, position, count):
    with pytest.raises(ValueError, match=rf"parameter {position} \(counting from 0\) of "
                                         rf"{count} is empty"):
        parse_params(text)


def test_get_kernel_signature_with_an_empty_slot_names_it(cache):
    mod = pcg.Program(KERNEL).compile(arch="sm_90")
    with pytest.raises(pcg.ArgumentError, match=r"k: signature='int\*, , int': parameter 1 "
                                                r"\(counting from 0\) of 3 is empty"):
        mod.get_kernel("k", signature="int*, , int")
    assert len(mod.get_kernel("k", signature="int* x, int n").params) == 2


def test_kernel_signature_without_empty_slots_still_reads():
    assert [p.ctype for p in parse_params("float* y, float a, int n")] == ["float*", "float", "int"]
    assert parse_params("") == () and parse_params("void") == () and parse_params("()") == ()


# Values packed for a parameter of another type -----------------------------------------

def _refused(sig: str, value, words: str):
    with pytest.raises(pcg.ArgumentError) as info:
        fake_kernel(sig, name="k").pack_args((value,))
    msg = str(info.value)
    assert msg.startswith("k(): parameter 0 ") and words in msg, msg
    return msg


@pytest.mark.parametrize("ctype", ["int", "unsigned int", "long long", "char", "size_t",
                                   "float", "double", "half", "__nv_bfloat16"])
@pytest.mark.parametrize("value", [True, False, np.bool_(True)], ids=repr)
def test_bool_is_refused_for_number_parameters(ctype, value):
    msg = _refused(f"{ctype} n", value, f"'n' ({ctype}) cannot take {value!r} of type bool")
    assert "True and False are for bool parameters" in msg


def test_bool_parameter_still_takes_bools_and_numbers_still_pack():
    k = fake_kernel("bool b, int n, float a", name="k")
    assert k.pack_args((True, 3, 2.5)) == k.pack_args((np.bool_(True), np.int32(3), np.float32(2.5)))
    assert fake_kernel("int n", name="k").pack_args((1,)) == (1).to_bytes(4, "little")


@pytest.mark.parametrize("sig, value", [("int2 v", (1, True)), ("float2 v", (1.0, np.bool_(False)))])
def test_bool_is_refused_inside_vectors(sig, value):
    _refused(sig, value, "takes no bool")


@pytest.mark.parametrize("ctype, dtype, want", [
    ("float4", np.float64, "float32"), ("float2", np.float16, "float32"),
    ("int4", np.int64, "int32"), ("int2", np.float32, "int32"), ("double2", np.float32, "float64"),
    ("float4", np.int32, "float32"), ("float4", np.bool_, "float32"),
])
def test_array_of_another_dtype_is_refused_for_a_vector(ctype, dtype, want):
    n = int(ctype[-1])
    msg = _refused(f"{ctype} v", np.zeros(n, dtype), f"'v' ({ctype}) cannot take array(")
    assert want in msg and np.dtype(dtype).name in msg, msg


def test_array_of_the_vector_dtype_packs():
    data = np.arange(4, dtype=np.float32)
    assert fake_kernel("float4 v", name="k").pack_args((data,)) == data.tobytes()
    ints = np.arange(2, dtype=np.int32)
    assert fake_kernel("int2 v", name="k").pack_args((ints,)) == ints.tobytes()


@pytest.mark.parametrize("value", [np.float64(4096.0), np.float32(4096.0), np.float16(2.0),
                                   4096.0, np.complex64(1)], ids=repr)
def test_float_is_never_a_device_pointer(value):
    _refused("float* p", value, f"not {type(value).__name__}")


def test_integer_scalar_is_still_a_device_pointer():
    k = fake_kernel("float* p", name="k")
    assert k.pack_args((np.int64(4096),)) == k.pack_args((4096,)) == (4096).to_bytes(8, "little")
