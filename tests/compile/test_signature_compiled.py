"""Kernel signatures checked against what NVRTC compiled (CPU: arch="sm_90", no GPU)."""

import warnings

import pytest

import pycudagraph as pcg
from pycudagraph.compile.ptx import cubin_entries, ptx_entries
from pycudagraph.compile.reconcile import SignatureWarning

TRICKS = r'''
typedef float real;
using idx = long long;
enum Mode { A, B };
enum class Small : unsigned char { X, Y };
#define SCALAR double
struct S { int a; double b; };
extern "C" __launch_bounds__(256) __global__ void lb(real* __restrict__ y, real a, idx n, Mode m,
                                                     SCALAR d, S s, bool f, Small sm) {}
#if 0
extern "C" __global__ void hidden(int x) {}
#endif
#if 1
extern "C" __global__ void twin(float* x, float a) {}
#else
extern "C" __global__ void twin(double* x, double a) {}
#endif
#define MAKE(name) extern "C" __global__ void name(float* x, int n) {}
MAKE(made)
extern "C" __global__ void defaults(float* x, int n = 4) {}
extern "C" __global__ void fnptr(int (*rows)[4], int n) {}
extern "C" { __global__ void __launch_bounds__(128, 2) inblock(short s, char c) {} }
template <typename T> __global__ void templ(T* x) {}
template __global__ void templ<float>(float*);
__global__ void mangled(int x) {}
extern "C" __global__ void noargs() {}
'''


@pytest.fixture(scope="module")
def mod():
    return pcg.Program(TRICKS, name="tricks.cu").compile(arch="sm_90")


def _sig(kernel):
    return [(p.name, p.kind, p.size) for p in kernel.params]


def test_kernel_list_is_what_was_compiled(mod):
    assert mod.kernel_names() == ["lb", "twin", "made", "defaults", "fnptr", "inblock", "noargs"]


def test_aliases_and_attributes_read_right(mod):
    assert _sig(mod["lb"]) == [("y", "pointer", 8), ("a", "float", 4), ("n", "int", 8),
                               ("m", "int", 4), ("d", "float", 8), ("s", "struct", 16),
                               ("f", "bool", 1), ("sm", "int", 1)]
    assert mod["lb"].params[1].fmt == "f" and mod["lb"].params[4].fmt == "d"
    assert mod["lb"].params[5].align == 8


def test_extern_c_block_with_launch_bounds_after_void(mod):
    assert _sig(mod["inblock"]) == [("s", "int", 2), ("c", "int", 1)]


def test_if_zero_kernel_is_not_listed_and_says_why(mod):
    with pytest.raises(pcg.ArgumentError, match="did not compile it"):
        mod.get_kernel("hidden")


def test_if_branch_picks_the_compiled_candidate(mod):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [p.ctype for p in mod["twin"].params] == ["float*", "float"]


def test_macro_made_kernel_served_from_compiled_facts(mod):
    assert _sig(mod["made"]) == [("arg0", "pointer", 8), ("arg1", "int", 4)]


def test_default_argument_kernel_works(mod):
    assert _sig(mod["defaults"]) == [("x", "pointer", 8), ("n", "int", 4)]


def test_pointer_to_array_parameter_is_read_and_signature_still_overrides(mod):
    k = mod.get_kernel("fnptr")  # `int (*rows)[4]`: an 8-byte pointer
    assert [(p.name, p.kind, p.size) for p in k.params] == [("rows", "pointer", 8),
                                                            ("n", "int", 4)]
    assert _sig(mod["noargs"]) == []
    k = mod.get_kernel("fnptr", signature="int* rows, int n")
    assert [p.name for p in k.params] == ["rows", "n"]


@pytest.mark.parametrize("name", ["templ", "mangled"])
def test_mangled_kernels_named(mod, name):
    with pytest.raises(pcg.ArgumentError, match='not extern "C".*_Z'):
        mod.get_kernel(name)


def test_signature_checked_against_compiled_kernel_without_gpu(mod):
    bad = mod.get_kernel("twin", signature="float* x, double a")
    with pytest.raises(pcg.ArgumentError, match="parameter 1 'a'.*8 bytes.*4 bytes in the compiled"):
        bad.layout  # noqa: B018 - first use checks, before any GPU call
    with pytest.raises(pcg.ArgumentError, match="parameter 1 'a'.*floating-point"):
        mod.get_kernel("twin", signature="float* x, int a").layout  # same size, wrong class
    with pytest.raises(pcg.ArgumentError, match="signature has 1 parameters.*has 2"):
        mod.get_kernel("twin", signature="float* x").layout


def test_compiled_facts_win_with_a_warning():
    src = r'''
#ifdef USE_DOUBLE
typedef double real;
#else
typedef float real;
#endif
extern "C" __global__ void k(real* x, real a, int n) {}
'''
    mod = pcg.Program(src, options=("-DUSE_DOUBLE",)).compile(arch="sm_90")
    with pytest.warns(SignatureWarning, match="parameter 1 'a' reads as float.*8-byte floating"):
        k = mod["k"]
    assert [(p.name, p.ctype, p.size) for p in k.params] == [
        ("x", "float*", 8), ("a", "double", 8), ("n", "int", 4)]


def test_count_disagreement_uses_compiled_parameters():
    src = r'''
#define EXTRA , int extra
extern "C" __global__ void k(float* x EXTRA) {}
'''
    mod = pcg.Program(src).compile(arch="sm_90")
    with pytest.warns(SignatureWarning, match="declares 1 parameters.*has 2"):
        k = mod["k"]
    assert [(p.name, p.size) for p in k.params] == [("arg0", 8), ("arg1", 4)]


def test_ptx_and_cubin_readers_agree(mod):
    from_cubin = cubin_entries(mod.cubin)
    assert set(from_cubin) == set(mod.entries)
    for name, params in mod.entries.items():
        assert [p.size for p in params] == [p.size for p in from_cubin[name]], name


def test_module_from_cubin_alone_checks_signature(mod):
    bare = pcg.Module(mod.cubin, name="bare")
    assert set(bare.kernel_names()) == set(mod.kernel_names())
    assert [p.size for p in bare.get_kernel("lb", signature=(
        "float*, float, long long, int, double, S, bool, unsigned char")).params][:5] == [8, 4, 8, 4, 8]
    with pytest.raises(pcg.ArgumentError, match="parameter 0"):
        bare.get_kernel("twin", signature="short, float").layout
    with pytest.raises(pcg.ArgumentError, match="no kernel named 'zz'"):
        bare.get_kernel("zz", signature="int")


def test_ptx_entry_parser_reads_declarations():
    ptx = """
.visible .entry k(
\t.param .u64 .ptr .global .align 16 k_param_0,
\t.param .align 8 .b8 k_param_1[24],
\t.param .f32 k_param_2
)
.weak .entry _Z1tIiEvPT_(
\t.param .u64 _Z1tIiEvPT__param_0
)
.visible .entry empty()
"""
    e = ptx_entries(ptx)
    assert [(p.size, p.align, p.cls) for p in e["k"]] == [(8, 8, "pointer"), (24, 8, "bytes"), (4, 4, "float")]
    assert list(e) == ["k", "_Z1tIiEvPT_", "empty"] and e["empty"] == ()


def test_cubin_reader_refuses_non_elf():
    with pytest.raises(ValueError, match="not a CUBIN"):
        cubin_entries(b"not an elf at all" * 8)


GRAPH_HANDLES = r'''
extern "C" __global__ void k(cudaGraphConditionalHandle h, cudaGraphExec_t e, int* p) {}
'''


@pytest.mark.parametrize("from_cubin", [False, True])
def test_graph_handle_parameters_stay_handles(from_cubin):
    """A .u64 in PTX (or an 8-byte slot in a CUBIN) is what a graph handle compiles to: the
    source's "handle" reading stands, with no warning, so a ConditionalHandle or GraphExec
    packs (a pointer reading refused them: caught on the GPU, now checked here)."""
    mod = pcg.Program(GRAPH_HANDLES, name="handles.cu").compile("sm_90")
    if from_cubin:
        mod = pcg.Module(mod.cubin, GRAPH_HANDLES, name="handles.cu", arch="sm_90")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SignatureWarning)
        kinds = [p.kind for p in mod["k"].params]
    assert kinds == ["handle", "handle", "pointer"]
