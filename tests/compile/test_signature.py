"""Signature parsing (CPU)."""

import pytest
from hypothesis import given, settings, strategies as st

from pycudagraph.compile.signature import parse_kernels, parse_params

SOURCE = r'''
// a comment with __global__ void fake(int x)
extern "C" __global__ void axpy(float* __restrict__ y, const float* x, float a, int n) {}
extern "C" {
__global__ void __launch_bounds__(256) inblock(unsigned long long n, double d) {}
}
__global__ void mangled(int x) {}
template <typename T> __global__ void templ(T* x) {}
/* __global__ void hidden(int z) */
extern "C" __global__ void noargs() {}
extern "C" __global__ void kinds(bool b, half h, __nv_bfloat16 bf, float4 v, MyStruct s,
                                 unsigned u, long int l, signed char c, size_t z, int arr[]) {}
'''


def test_finds_kernels_and_extern_c():
    k = parse_kernels(SOURCE)
    assert set(k) == {"axpy", "inblock", "mangled", "noargs", "kinds"}
    assert k["axpy"].extern_c and k["inblock"].extern_c and k["noargs"].extern_c
    assert not k["mangled"].extern_c
    assert k["noargs"].params == ()


def test_param_types_and_sizes():
    p = parse_kernels(SOURCE)["axpy"].params
    assert [x.name for x in p] == ["y", "x", "a", "n"]
    assert [x.kind for x in p] == ["pointer", "pointer", "float", "int"]
    assert [x.size for x in p] == [8, 8, 4, 4]
    assert [x.fmt for x in p] == ["Q", "Q", "f", "i"]


def test_all_kinds():
    p = {x.name: x for x in parse_kernels(SOURCE)["kinds"].params}
    assert (p["b"].kind, p["b"].size) == ("bool", 1)
    assert (p["h"].kind, p["h"].size, p["h"].fmt) == ("half", 2, "e")
    assert (p["bf"].kind, p["bf"].size) == ("bfloat16", 2)
    assert (p["v"].kind, p["v"].size, p["v"].align) == ("vector", 16, 16)
    assert (p["s"].kind, p["s"].size) == ("struct", None)
    assert p["u"].ctype == "unsigned int" and p["u"].fmt == "I"
    assert p["l"].ctype == "long" and p["l"].size == 8
    assert p["c"].ctype == "signed char" and p["c"].fmt == "b"
    assert p["z"].fmt == "Q"
    assert p["arr"].kind == "pointer"


@pytest.mark.parametrize("text, n", [("float*, float, int", 3), ("(float* y, float a, int n)", 3),
                                     ("", 0), ("void", 0), ("int", 1)])
def test_parse_params_text(text, n):
    assert len(parse_params(text)) == n


def test_unnamed_params_get_names():
    p = parse_params("float*, int")
    assert [x.name for x in p] == ["arg0", "arg1"]


@pytest.mark.parametrize("bad", ["int& x", "int x = 3"])
def test_bad_params_raise(bad):
    with pytest.raises(ValueError):
        parse_params(bad)


WORDS = ["const", "volatile", "__restrict__", "struct", "float", "int", "unsigned", "signed",
         "long", "short", "char", "double", "size_t", "float4", "MyStruct", "x", "n", "_a1",
         "3x", "*", " ", "\t", "&", "[4]", "(", ")", "=", "cudaGraphConditionalHandle"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), st.integers(0, 5))
def test_a_plain_parameter_is_read_as_the_full_reading_reads_it(words, index):
    """The short way for a type word and a name (with qualifiers and stars) gives the
    Param the full reading gives (which aliases that name no type here force)."""
    from pycudagraph.compile.signature import _parse_one, _plain_param
    text = " ".join(words).strip()
    quick = _plain_param(index, text)
    try:
        full = _parse_one(index, text, {"NotAType": "int"})
    except ValueError:
        assert quick is None, (text, quick)
        return
    assert quick is None or quick == full, (text, quick, full)
    if words in (["const", "float", "*", "x"], ["int", "n"]):
        assert quick is not None


def test_a_long_word_before_a_declarator_is_not_read_again_and_again():
    from pycudagraph.compile.signature import _plain_param
    assert _plain_param(0, "a" * 80 + " (") is None  # (split into words every way: hours)
