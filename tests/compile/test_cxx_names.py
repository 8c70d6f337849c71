"""C++ kernel names: NVRTC name expressions and mangled names (CPU, arch="sm_90")."""

import warnings

import pytest

import pycudagraph as pcg
from pycudagraph.compile.cxx_names import (bare_name, is_cxx_name, mangled_bare_name,
                                           template_args)
from pycudagraph.compile.signature import template_kernels
from pycudagraph.compile import cxx_names

SRC = r'''
extern "C" __global__ void axpy(float* y, float a, const float* x, int n) {}
namespace ns {
template <typename T> __global__ void scale(T* y, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
template __global__ void scale<float>(float*, float, int);
template <typename T, int N> __global__ void fill(T* y, int n) { if (n) y[0] = T(N); }
}
__global__ void plain(int* x, int n) {}
'''


@pytest.fixture
def mod(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(tmp_path))
    return pcg.Program(SRC, name="names.cu").compile(arch="sm_90")


def _sig(k):
    return [(p.name, p.ctype, p.size) for p in k.params]


def test_name_helpers():
    assert is_cxx_name("ns::scale<float>") and is_cxx_name("::plain") and is_cxx_name("f<1>")
    assert not is_cxx_name("axpy") and not is_cxx_name("_ZN2ns5scaleIfEEvPT_S1_i")
    assert bare_name("ns::scale<float>") == "scale" and bare_name("::plain") == "plain"
    assert bare_name("&ns::inner::fill<Vec<float, 2>, 4>") == "fill"
    assert template_args("ns::fill<Vec<float, 2>, 4>") == ["Vec<float, 2>", "4"]
    assert template_args("ns::scale") == []
    assert mangled_bare_name("_ZN2ns5scaleIfEEvPT_S1_i") == "scale"
    assert mangled_bare_name("_Z5plainPii") == "plain"
    assert mangled_bare_name("_ZN6cudapy8__main__4axpyB2v1B96abcE5ArrayIfLi1E1C7mutable7alignedE") == "axpy"
    assert mangled_bare_name("axpy") is None and mangled_bare_name("_ZSt4cout") is None


def test_template_kernels_are_read_with_their_parameter_names():
    found = template_kernels(SRC)
    assert set(found) == {"scale", "fill"}
    assert found["scale"][0].template == ("T",)
    assert found["fill"][0].template == ("T", "N")
    assert [p.name for p in found["scale"][0].params] == ["y", "a", "n"]


def test_instance_in_the_module_by_name_expression(mod):
    k = mod.get_kernel("ns::scale<float>")
    assert k.symbol == "_ZN2ns5scaleIfEEvPT_S1_i" and k.module is mod  # the explicit instance
    assert mod.lowered["ns::scale<float>"] == k.symbol
    assert _sig(k) == [("y", "float*", 8), ("a", "float", 4), ("n", "int", 4)]
    assert mod["ns::scale<float>"] is k


def test_instance_not_in_the_module_is_compiled(mod):
    k = mod.get_kernel("ns::scale<double>")
    assert k.symbol == "_ZN2ns5scaleIdEEvPT_S1_i" and k.module is not mod
    assert k.symbol in k.module.entries and k.symbol not in mod.entries
    assert _sig(k) == [("y", "double*", 8), ("a", "double", 4 * 2), ("n", "int", 4)]
    f = mod.get_kernel("ns::fill<int, 3>")
    assert _sig(f) == [("y", "int*", 8), ("n", "int", 4)]


def test_program_name_expressions_up_front(tmp_path, monkeypatch):
    monkeypatch.setenv("PYCUDAGRAPH_CACHE_DIR", str(tmp_path))
    prog = pcg.Program(SRC, name="names.cu", name_expressions=("ns::scale<double>", "::plain"))
    mod = prog.compile(arch="sm_90")
    assert mod.lowered == {"ns::scale<double>": "_ZN2ns5scaleIdEEvPT_S1_i", "::plain": "_Z5plainPii"}
    assert mod.get_kernel("ns::scale<double>").module is mod
    assert _sig(mod.get_kernel("::plain")) == [("x", "int*", 8), ("n", "int", 4)]
    again = prog.compile(arch="sm_90")  # from the cache: the lowered names come back too
    assert again.lowered == mod.lowered


def test_mangled_name_of_a_source_module(mod):
    k = mod.get_kernel("_Z5plainPii")
    assert _sig(k) == [("x", "int*", 8), ("n", "int", 4)]
    t = mod.get_kernel("_ZN2ns5scaleIfEEvPT_S1_i")  # names from the template, types compiled
    assert [(p.name, p.kind, p.size) for p in t.params] == [("y", "pointer", 8), ("a", "float", 4),
                                                            ("n", "int", 4)]


def test_errors_name_what_is_wrong(mod):
    with pytest.raises(pcg.ArgumentError, match=r"cannot resolve the C\+\+ name 'ns::scale<nope>'.*nope"):
        mod.get_kernel("ns::scale<nope>")
    with pytest.raises(pcg.ArgumentError, match=r"cannot resolve.*'ns::missing<float>'"):
        mod.get_kernel("ns::missing<float>")
    with pytest.raises(pcg.ArgumentError, match=r"not extern \"C\".*_Z5plainPii.*get_kernel\('::plain'\)"):
        mod.get_kernel("plain")
    with pytest.raises(pcg.ArgumentError, match="no kernel named 'nope'.*axpy"):
        mod.get_kernel("nope")
    with pytest.raises(pcg.ArgumentError, match="non-empty str"):
        mod.get_kernel("")
    with pytest.raises(pcg.ArgumentError, match="name expression must be a non-empty str"):
        pcg.Program(SRC, name_expressions=("",))


def test_signature_for_a_name_expression_is_checked(mod):
    k = mod.get_kernel("ns::scale<float>", signature="float* out, float factor, int count")
    assert [p.name for p in k.params] == ["out", "factor", "count"]
    bad = mod.get_kernel("ns::scale<float>", signature="double* out, double factor, int count")
    with pytest.raises(pcg.ArgumentError, match="parameter 1 'factor' is double.*4 bytes"):
        bad.layout


def test_no_signature_warning_for_a_clean_template(mod):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.get_kernel("ns::scale<float>")


# Names of kernels a GPT-2 forward pass captured from PyTorch 2.11 and cuBLAS: what a page
# shows under each (the functor or operation its template arguments name).
_GPT2_KERNELS = {
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_"
    "internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_": "MulFunctor",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIllbNS0_51_GLOBAL__N__"
    "28ce311f_18_CompareEQKernel_cu_d8008c9616CompareEqFunctorIlEEEESt5arrayIPcLm2EEEEviT0_T1_":
        "CompareEqFunctor",
    "_ZN2at6native29vectorized_elementwise_kernelILi2ENS0_21CUDAFunctorOnSelf_addIlEESt5arrayIPc"
    "Lm2EEEEviT0_T1_": "CUDAFunctorOnSelf_add",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0"
    "_T1_": "FillFunctor",
    "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_16tanh_kernel_cudaERNS_18Tensor"
    "IteratorBaseEENKUlvE0_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_": "tanh_kernel_cuda",
    "_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_23direct_copy_kernel_cudaERNS_18Tensor"
    "IteratorBaseEENKUlvE1_clEvENKUlvE2_clEvEUllE_St5arrayIPcLm2EELi4E23TrivialOffsetCalculator"
    "ILi1EjESB_NS0_6memory12LoadWithCastILi1EEENSC_13StoreWithCastILi1EEEEEviT_T0_T2_T3_T4_T5_":
        "direct_copy_kernel_cuda",
    "_ZN50_GLOBAL__N__fa15d16e_17_RangeFactories_cu_38772b0829elementwise_kernel_with_indexIiZZZN"
    "2at6native15arange_cuda_outERKN3c106ScalarES6_S6_RNS1_6TensorEENKUlvE_clEvENKUlvE2_clEvEUll"
    "E_EEvT_T0_PN15function_traitsISD_E11result_typeE": "arange_cuda_out",
    "_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_"
    "kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_": None,
    "_ZN8internal5gemvx6kernelIiiffffLb0ELb1ELb0ELb0ELi9ELb0E18cublasGemvParamsExIi30cublasGemv"
    "TensorStridedBatchedIKfES5_S3_IfEfEEENSt9enable_ifIXntT5_EvE4typeET11_": None,
}


@pytest.mark.parametrize("symbol, operation", list(_GPT2_KERNELS.items()))
def test_the_operation_a_library_kernel_name_says(symbol, operation):
    assert cxx_names.mangled_operation(symbol) == operation


@pytest.mark.parametrize("symbol, operation", [
    # a lambda written in a function of an anonymous namespace: PyTorch 2.11's ReLU (as
    # captured), then the same with the namespace as other compilers than nvcc write it
    ("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_49_GLOBAL__N__d2ba64fb_16_Tensor"
     "Compare_cu_71e06f4e19launch_clamp_scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6"
     "detail11ClampLimitsEENKUlvE_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
     "launch_clamp_scalar"),
    ("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_12_GLOBAL__N_119launch_clamp_"
     "scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENK"
     "UlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_", "launch_clamp_scalar"),
    ("_ZN2ns4kernIZ4mainEUlfE_EEvT_", "main"),              # a global function
    ("_ZN2ns4kernIZNSt3foo3barEvEUlfE_EEvT_", "bar"),       # std:: abbreviated as St
    ("_ZN2ns4kernIZN2ns4kernEvEUlfE_EEvT_", None),          # only the kernel itself
    ("_ZN2ns4kernINS_8VecZ4abcEEEvT_", None),               # a Z inside a name is a letter
    ("_ZN2ns4kernILi3EZ4mainEUlfE_EEvT_", "main"),          # after a literal
])
def test_the_function_a_lambda_argument_was_written_in(symbol, operation):
    assert cxx_names.mangled_operation(symbol) == operation


def test_names_that_say_no_operation():
    for name in ("axpy", "_Z4axpyPfS_fi", "_ZN2ns4fillIdLi4EEEvPT_i", "", "_Z", "_ZN"):
        assert cxx_names.mangled_operation(name) is None
    assert cxx_names.short_kernel_name("_ZN8internal5gemvx6kernelIiiEEvT_") == "internal::gemvx::kernel"
    assert cxx_names.short_kernel_name("axpy") == "axpy"
    # an anonymous namespace as c++filt writes it, nvcc's form (a hash and the file) too
    assert cxx_names.short_kernel_name(
        "_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_"
        "norm_kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_") == (
        "at::native::(anonymous namespace)::vectorized_layer_norm_kernel")
    assert cxx_names.short_kernel_name("_ZN12_GLOBAL__N_14fillEPf") == "(anonymous namespace)::fill"


def test_digits_other_than_ascii_are_no_lengths():
    """A name from a file is any printable text: ``²`` is a digit to ``str.isdigit`` but no
    length of a mangled name; reading such names ends, with no error."""
    for name in ("_ZN\u00b2ab", "_ZN2at\u00b2x", "_Z4axpyI\u00b2E", "_ZN2ns1aI\u0663E"):
        assert cxx_names.mangled_operation(name) is None
        cxx_names.short_kernel_name(name)
        cxx_names.mangled_template_args(name)
