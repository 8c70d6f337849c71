"""Kernel.from_function without a GPU: what is read from each source, the packing of
arguments that fill several kernel parameters or none, and the errors (CPU).

Triton and Numba objects are read through their attributes. Where the real library is
importable (the GPU machine has Triton) it is used; otherwise small stand-ins carry the
attributes Triton 3.6's ``CompiledKernel`` and Numba's types have (the real ones are
compared with them in ``test_stand_in_matches_real_triton``), over PTX and CUBIN
compiled here by NVRTC.
"""

import struct
from collections import namedtuple

import numpy as np
import pytest
from cuda.bindings import driver as dr
from cuda.bindings import runtime as rt

import pycudagraph as pcg
from pycudagraph._cuda import plans
from pycudagraph.compile.args import ArgPack, Layout
from pycudagraph.compile.from_cupy import _source_params
from pycudagraph.compile.from_numba import numba_params
from pycudagraph.compile.nvrtc_compile import cached_compile, nvrtc_version
from pycudagraph.compile.origin import Origin, merge_signature, raw_handle
from pycudagraph.compile.reconcile import check_image, expanded
from pycudagraph.compile.signature import parse_params

TRITON_LIKE = r'''
extern "C" __global__ void tk(float* x, float* y, int n, float a, void* gscratch, void* pscratch)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
'''


# --- stand-ins with the attributes of Triton 3.6's CompiledKernel ---------------------

Target = namedtuple("GPUTarget", "backend arch warp_size")
Meta = namedtuple("KernelMetadata", "name num_warps num_ctas shared warp_size target "
                  "global_scratch_size global_scratch_align profile_scratch_size "
                  "profile_scratch_align launch_cooperative_grid launch_pdl triton_version")


class ASTSource:
    def __init__(self, signature, attrs=None):
        self.signature = signature
        self.attrs = attrs or {}
        self.constants = {}


class CompiledKernel:
    def __init__(self, asm, meta, src):
        self.asm, self.metadata, self.src = asm, meta, src
        self.name = meta.name
        self.kernel = asm["cubin"]
        self.module = self.function = None


class JITFunction:
    arg_names = ["x"]


for _cls in (ASTSource, CompiledKernel, JITFunction):
    _cls.__module__ = "triton.compiler.compiler"  # how Kernel.from_function recognises Triton


@pytest.fixture(scope="module")
def triton_like(tmp_path_factory):
    import os
    os.environ.setdefault("PYCUDAGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    opts = ("--gpu-architecture=sm_90",)
    entry = cached_compile(TRITON_LIKE, "tk.cu", opts, nvrtc_version())
    return {"cubin": entry.cubin, "ptx": entry.ptx}


def _triton(asm, **changes):
    meta = dict(name="tk", num_warps=4, num_ctas=1, shared=1024, warp_size=32,
                target=Target("cuda", 90, 32), global_scratch_size=0, global_scratch_align=1,
                profile_scratch_size=0, profile_scratch_align=1, launch_cooperative_grid=False,
                launch_pdl=False, triton_version="3.6.0")
    sig = changes.pop("signature", {"x": "*fp32", "y": "*fp32", "n": "i32", "a": "fp32",
                                     "BLOCK": "constexpr"})
    attrs = changes.pop("attrs", {(0,): [["tt.divisibility", 16]]})
    meta.update(changes)
    return CompiledKernel(asm, Meta(**meta), ASTSource(sig, attrs))


def test_triton_kernel_params_block_shared_memory_hidden(triton_like):
    k = pcg.Kernel.from_function(_triton(triton_like))
    assert [(p.name, p.ctype) for p in k.params] == [("x", "float*"), ("y", "float*"),
                                                     ("n", "int"), ("a", "float")]
    assert k.block == (128, 1, 1) and k.shared_mem == 1024
    assert k.origin.hidden == (8, 8) and k.origin.what == "Triton kernel" and k.module is None
    assert k.origin.launch_dims("tk", None, 0) == ((128, 1, 1), 1024)
    assert k.origin.launch_dims("tk", 128, 4096) == (128, 4096)
    with pytest.raises(pcg.ArgumentError, match=r"blocks of \(128, 1, 1\) threads.*block=64"):
        k.origin.launch_dims("tk", 64, 0)
    with pytest.raises(pcg.ArgumentError, match="needs 1024 bytes of dynamic shared memory"):
        k.origin.launch_dims("tk", None, 0, strict=True)


def test_triton_cubin_only_and_signature_names(triton_like):
    k = pcg.Kernel.from_function(_triton({"cubin": triton_like["cubin"]}),
                                 signature="const float* src, float* dst, int count, float alpha")
    assert [p.name for p in k.params] == ["src", "dst", "count", "alpha"]
    assert k.params[0].convert is not None  # still checked for 16-byte alignment


def test_triton_alignment_assumption_is_checked(triton_like):
    k = pcg.Kernel.from_function(_triton(triton_like))
    layout = Layout(k.name, k.params, k.origin.hidden)
    pack = ArgPack(layout, k, (0x1000, 0x2004, 7, 1.5), 1, 128)
    with pytest.raises(pcg.ArgumentError, match="multiple of 16.*0x1004"):
        pack.set(0, 0x1004)
    assert pack.values()[0] == 0x1000  # the failed write changed nothing


def test_triton_hidden_parameters_are_zero_and_pointed_at(triton_like):
    k = pcg.Kernel.from_function(_triton(triton_like))
    layout = Layout(k.name, k.params, k.origin.hidden)
    simple = plans.PLAN_HEAD.unpack_from(layout.hot.plan)[6]
    assert not simple and len(layout.pointer_offsets) == 6  # packed in Python only
    assert layout.param_sizes == (8, 8, 4, 4, 8, 8)
    pack = ArgPack(layout, k, (0x1000, 0x2000, 7, 1.5), 1, 128)
    raw = pack.raw()
    pointers = struct.unpack_from("<6Q", raw, 72)
    assert pointers == tuple(pack.address + o for o in layout.pointer_offsets)
    gs, ps = (struct.unpack_from("<Q", raw, o - pack.address)[0] for o in pointers[4:])
    assert gs == ps == 0
    copy = pack.copy()
    copy.apply({"n": 9})
    assert copy.values() == (0x1000, 0x2000, 9, 1.5) and pack.values()[2] == 7
    assert struct.unpack_from("<6Q", copy.raw(), 72) == tuple(
        copy.address + o for o in layout.pointer_offsets)
    pack.apply((0x3000, 0x4000, 1, 2.0))
    assert pack.values() == (0x3000, 0x4000, 1, 2.0)
    assert struct.unpack_from("<Q", pack.raw(), layout.pointer_offsets[4])[0] == 0


@pytest.mark.parametrize("change,message", [
    ({"num_ctas": 2}, "num_ctas=2.*compile it with num_ctas=1"),
    ({"global_scratch_size": 64}, "64 bytes of global scratch"),
    ({"profile_scratch_size": 8}, "profiling instrumentation"),
    ({"launch_cooperative_grid": True}, "cooperative grid"),
    ({"target": Target("hip", 942, 64)}, "compiled for 'hip'"),
    ({"signature": {"x": "*fp32", "y": "*fp32", "n": "i32"}}, "the compiled kernel has 6 "
     "parameters, the signature 3 plus 2 hidden"),
    ({"signature": {"d": "tensordesc<fp32[64]>", "y": "*fp32", "n": "i32", "a": "fp32"}},
     "tensor descriptor"),
    ({"signature": {"x": "*fp32", "y": "*fp32", "n": "i64", "a": "fp32"}},
     "parameter 2 'n' is long long.*4 bytes"),
])
def test_triton_launches_that_cannot_be_made_are_refused(triton_like, change, message):
    with pytest.raises(pcg.ArgumentError, match=message):
        pcg.Kernel.from_function(_triton(triton_like, **change))


def test_triton_function_not_compiled_yet():
    with pytest.raises(pcg.ArgumentError, match="JITFunction, not a compiled kernel.*fn\\[grid\\]"):
        pcg.Kernel.from_function(JITFunction())


def test_stand_in_matches_real_triton():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    @triton.jit
    def scale(x_ptr, y_ptr, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * a, mask=offs < n)

    src = triton.compiler.ASTSource(fn=scale, signature={"x_ptr": "*fp32", "y_ptr": "*fp32",
                                                         "n": "i32", "a": "fp32",
                                                         "BLOCK": "constexpr"},
                                    constexprs={"BLOCK": 128})
    try:
        real = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 2})
    except Exception as exc:  # no ptxas / LLVM for this platform
        pytest.skip(f"triton.compile did not run here: {exc}")
    for attr in ("asm", "metadata", "src", "name", "kernel"):
        assert hasattr(real, attr), attr
    assert set(Meta._fields) <= set(real.metadata._fields)
    k = pcg.Kernel.from_function(real)
    assert [p.name for p in k.params] == ["x_ptr", "y_ptr", "n", "a"]
    assert k.block == (64, 1, 1) and k.shared_mem == real.metadata.shared
    assert len(k.origin.hidden) == len(real.asm["ptx"].split(".entry")[1].split(")")[0]
                                       .split(",")) - 4


# --- Numba: stand-in types (their class names are what is read) ---------------------

class Integer:
    def __init__(self, bits, signed=True):
        self.bitwidth, self.signed = bits, signed

    def __str__(self):
        return f"{'' if self.signed else 'u'}int{self.bitwidth}"


class Float:
    def __init__(self, bits):
        self.bitwidth = bits

    def __str__(self):
        return f"float{self.bitwidth}"


class Boolean:
    pass


class Complex:
    def __init__(self, bits):
        self.bitwidth = bits

    def __str__(self):
        return f"complex{self.bitwidth}"


class Array:
    def __init__(self, dtype, ndim, layout):
        self.dtype, self.ndim, self.layout = dtype, ndim, layout

    def __str__(self):
        return f"array({self.dtype}, {self.ndim}d, {self.layout})"


class BaseTuple:
    def __init__(self, *types):
        self.types = types

    def __str__(self):
        return f"Tuple({', '.join(map(str, self.types))})"


class Dev:
    """A device array: what __cuda_array_interface__ says, nothing else."""

    def __init__(self, shape, typestr, ptr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, False), "version": 3}


NUMBA_TYPES = (Array(Float(32), 1, "C"), Float(32), Array(Float(32), 2, "A"), Integer(32),
               Complex(64), BaseTuple(Float(64), Integer(32)), Boolean())
NUMBA_SIZES = [8] * 7 + [4] + [8] * 9 + [4, 4, 4] + [8, 4] + [1]  # as the compiled entry has them


def test_numba_arguments_fill_their_kernel_parameters():
    params = numba_params(NUMBA_TYPES, ["y", "a", "m", "n", "c", "t", "flag"])
    assert [p.name for p in params] == ["y", "a", "m", "n", "c", "t", "flag"]
    assert [len(p.parts) for p in params] == [7, 0, 9, 0, 2, 2, 0]
    assert [p.kind for p in params] == ["struct", "float", "struct", "int", "struct", "struct", "bool"]
    assert expanded(params) == NUMBA_SIZES
    image, pos = [], 0
    for size in NUMBA_SIZES:
        image.append((pos, size))
        pos += size
    params = check_image("axpy", params, image)
    layout = Layout("axpy", params)
    assert list(layout.param_sizes) == NUMBA_SIZES
    args = [Dev((10,), "<f4", 0x1000), 2.0, Dev((3, 4), "<f4", 0x2000, (32, 4)), 10, 1 + 2j,
            (3.0, 7), True]
    pack = ArgPack(layout, None, args, 1, 1)
    raw = pack.raw()
    got = [raw[o - 0: o + s] for o, s in zip(layout.pointer_offsets, NUMBA_SIZES)]
    ints = [struct.unpack("<q", g)[0] for g in got[:7]]
    assert ints == [0, 0, 10, 4, 0x1000, 10, 4]  # meminfo, parent, nitems, itemsize, data, shape, stride
    assert [struct.unpack("<q", g)[0] for g in got[8:17]] == [0, 0, 12, 4, 0x2000, 3, 4, 32, 4]
    assert struct.unpack("<f", got[18])[0] == 1.0 and struct.unpack("<f", got[19])[0] == 2.0
    assert struct.unpack("<d", got[20])[0] == 3.0 and struct.unpack("<i", got[21])[0] == 7
    pack.set(layout.slot_index("y"), Dev((5,), "<f4", 0x5000))  # one set_arg rewrites all fields
    raw = pack.raw()
    assert [struct.unpack_from("<q", raw, o)[0] for o in layout.pointer_offsets[:7]] == [
        0, 0, 5, 4, 0x5000, 5, 4]


@pytest.mark.parametrize("value,message", [
    (Dev((10,), "<f8", 0x1000), "takes float32 elements, got float64"),
    (Dev((10, 2), "<f4", 0x1000), "takes a 1-d array, got a 2-d one"),
    (Dev((10,), "<f4", 0x1000, (8,)), "C-contiguous"),
    (np.zeros(10, np.float32), "__cuda_array_interface__"),
])
def test_numba_array_argument_errors(value, message):
    layout = Layout("k", numba_params((Array(Float(32), 1, "C"),), ["y"]))
    with pytest.raises(pcg.ArgumentError, match="parameter 0 'y'.*" + message):
        ArgPack(layout, None, (value,), 1, 1)


def test_numba_params_match_a_real_numba_compile():
    cuda = pytest.importorskip("numba.cuda")
    from numba import types

    def axpy(y, a, x, n, c, t, b):
        i = cuda.grid(1)
        if i < n:
            y[i] = a * x[i] + c.real + t[0] + (1 if b else 0)
    argtypes = (types.float32[::1], types.float32, types.float32[:], types.int32,
                types.complex64, types.UniTuple(types.float64, 2), types.boolean)
    try:
        ptx, _ = cuda.compile_ptx(axpy, types.void(*argtypes), cc=(9, 0))
    except Exception as exc:  # no NVVM here
        pytest.skip(f"numba could not compile PTX here: {exc}")
    from pycudagraph.compile.ptx import ptx_entries
    (_, compiled), = ptx_entries(ptx).items()
    params = numba_params(argtypes, ["y", "a", "x", "n", "c", "t", "b"])
    assert expanded(params) == [c.size for c in compiled]


# --- raw handles, origins, signatures -------------------------------------------------

def test_raw_handles_are_recognised():
    assert raw_handle(dr.CUfunction(0x10))[0] == "function"
    assert raw_handle(0x10)[0] == "function" and raw_handle(np.int64(0x10))[0] == "function"
    assert raw_handle(dr.CUkernel(0x10))[0] == "kernel"
    assert raw_handle(rt.cudaKernel_t(0x10))[0] == "kernel"
    assert raw_handle(True) is None and raw_handle("f") is None and raw_handle(1.5) is None
    with pytest.raises(pcg.ArgumentError, match="a null CUfunction"):
        raw_handle(0)


@pytest.mark.parametrize("obj", ["axpy", 1.5, object(), None])
def test_unknown_objects_are_refused(obj):
    with pytest.raises(pcg.ArgumentError, match="cannot use a .*it takes a CUfunction"):
        pcg.Kernel.from_function(obj)


def test_signature_must_be_text(triton_like):
    with pytest.raises(pcg.ArgumentError, match="signature= takes a C parameter list"):
        pcg.Kernel.from_function(_triton(triton_like), signature=["float*"])


def test_a_cufunction_runs_on_its_device_only():
    origin = Origin(object(), "CuPy kernel", handle=dr.CUfunction(0x10), device=0)
    assert origin.function_on(0, "k") == 0x10
    with pytest.raises(pcg.ArgumentError, match="CUfunction of device 0's context.*device 1"):
        origin.function_on(1, "k")


def test_merge_signature_renames_and_checks():
    known = parse_params("float* x, int n")
    assert [p.name for p in merge_signature("k", "thing", known, "float* src, int count")] == [
        "src", "count"]
    with pytest.raises(pcg.ArgumentError, match="signature= has 1 parameters but the thing has 2"):
        merge_signature("k", "thing", known, "float* x")
    with pytest.raises(pcg.ArgumentError, match="parameter 1 'n' is double.*int \\(4 bytes\\)"):
        merge_signature("k", "thing", known, "float* x, double n")
    with pytest.raises(pcg.ArgumentError, match="signature="):
        merge_signature("k", "thing", known, "float* x, int n = (")


def test_image_check_messages():
    params = parse_params("float* x, int n")
    with pytest.raises(pcg.ArgumentError, match="2 parameters filling 2 .*compiled kernel has 3"):
        check_image("k", params, [(0, 8), (8, 4), (16, 8)])
    with pytest.raises(pcg.ArgumentError, match="parameter 1 'n' is int \\(4 bytes\\).*8 bytes"):
        check_image("k", params, [(0, 8), (8, 8)])
    with pytest.raises(pcg.ArgumentError, match="hidden parameter 2 is 8 bytes here but 4"):
        check_image("k", params, [(0, 8), (8, 4), (16, 4)], hidden=(8,))
    assert check_image("k", params, [(0, 8), (8, 4), (16, 8)], hidden=(8,)) == params


def test_cupy_source_gives_names_when_it_can():
    code = 'extern "C" __global__ void k(float* y, float a, int n) {}\n' \
           '__global__ void cpp(int* x, int n) {}\n' \
           'template <typename T> __global__ void t(T* x) {}\n'
    assert [p.name for p in _source_params(code, "k")] == ["y", "a", "n"]
    assert [p.name for p in _source_params(code, "_Z3cppPii")] == ["x", "n"]
    assert _source_params(code, "_Z1tIfEvPT_") is None  # a template instance: image or signature=
    assert _source_params(None, "k") is None and _source_params(code, "other") is None


def test_kernel_from_image_only_without_driver_support_needs_signature():
    from pycudagraph.compile.reconcile import params_from_image
    with pytest.raises(pcg.ArgumentError, match="cuKernelGetParamInfo needs CUDA 12.4.*signature="):
        params_from_image("k", None)
    got = params_from_image("k", [(0, 8), (8, 4), (16, 8), (24, 8)], hidden=(8,))
    assert [(p.name, p.kind, p.size) for p in got] == [("arg0", "pointer", 8), ("arg1", "struct", 4),
                                                       ("arg2", "pointer", 8)]
    layout = Layout("k", got)
    pack = ArgPack(layout, None, (0x10, np.float32(2.5), 0x20), 1, 1)
    assert struct.unpack("<f", pack.values()[1])[0] == 2.5
    with pytest.raises(pcg.ArgumentError, match="numpy scalar of its size"):
        ArgPack(layout, None, (0x10, 2.5, 0x20), 1, 1)
