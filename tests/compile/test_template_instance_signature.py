"""A template instance asked for by its mangled name shows its concrete types (``float*``),
not the template's (``T*``); compiled with NVRTC for sm_90, so no GPU is needed."""

import pytest

import pycudagraph as pcg
from pycudagraph.compile.cxx_names import mangled_scope, mangled_template_args

SRC = r'''
namespace ns {
template <typename T> __global__ void axpy(T* y, T a, const T* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
template <typename T, int N> __global__ void fill(T* y, T v) { y[threadIdx.x % N] = v; }
}
'''


@pytest.mark.parametrize("symbol,args", [
    ("_ZN2ns4axpyIfEEvPT_S1_PKS1_i", ["float"]),
    ("_ZN2ns4axpyIjEEvPT_S1_PKS1_i", ["unsigned int"]),
    ("_ZN2ns4fillIdLi4EEEvPT_S1_", ["double", "4"]),
    ("_Z4fillIfLin2EEvPT_S0_", ["float", "-2"]),
    ("_ZN2ns4axpyI6__halfEEvPT_S2_PKS2_i", ["__half"]),
    ("_Z5plainPii", []),            # not a template
    ("_ZN2ns4axpyIP1XEEv", []),     # a pointer argument: not read simply
    ("axpy", []),
])
def test_template_arguments_of_a_mangled_name(symbol, args):
    assert mangled_template_args(symbol) == args


def test_the_scope_reader_is_unchanged():
    assert mangled_scope("_ZN2ns4fillIdLi4EEEvPT_S1_") == ["ns", "fill"]
    assert mangled_scope("_Z5plainPii") == ["plain"]
    assert mangled_scope("plain") == []


def test_an_instance_asked_by_mangled_name_shows_concrete_types():
    mod = pcg.Program(SRC, name_expressions=["ns::axpy<float>", "ns::fill<double, 4>"]).compile(
        arch="sm_90")
    by_expr = mod.get_kernel("ns::axpy<float>")
    by_symbol = mod.get_kernel(mod.lowered["ns::axpy<float>"])
    assert [p.ctype for p in by_symbol.params] == ["float*", "float", "float*", "int"]
    assert [p.ctype for p in by_symbol.params] == [p.ctype for p in by_expr.params]
    assert "T*" not in repr(by_symbol)
    fill = mod.get_kernel(mod.lowered["ns::fill<double, 4>"])
    assert [(p.name, p.ctype) for p in fill.params] == [("y", "double*"), ("v", "double")]
    import struct
    assert fill.pack_args((0x1000, 2.5))[8:16] == struct.pack("<d", 2.5)
