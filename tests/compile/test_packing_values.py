"""Argument packing (CPU): every parameter kind refuses what a ``float`` or ``int`` parameter
refuses (strings, None, containers, values too large for the type), with an ArgumentError
naming the kernel, the parameter and the value, and packs what it takes into the right bytes.

Half, bfloat16, fp8 and vector parameters used to accept ``None``, strings, dicts and sets,
and overflow to infinity, silently. Packed with :meth:`Kernel.pack_args` (the CPU path a CI
job without a GPU uses) on fake kernels: no CUDA call."""

import math
import struct

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile import small_floats
from pycudagraph.compile.args import ArgPack, Layout
from pycudagraph.compile.signature import parse_params

from tests.support.fakes import fake_kernel

SMALL_FLOATS = ["half", "__nv_bfloat16", "__nv_fp8_e4m3", "__nv_fp8_e5m2", "float", "double"]
NOT_REAL = [None, "1.5", b"1", bytearray(b"1"), {1: 2}, {1, 2}, [1.0], (1.0,), 1j,
            object(), np.array([1.0, 2.0])]


def pack(sig: str, *args) -> bytes:
    return fake_kernel(sig, name="k").pack_args(args)


@pytest.mark.parametrize("ctype", SMALL_FLOATS)
@pytest.mark.parametrize("value", NOT_REAL, ids=lambda v: type(v).__name__)
def test_small_floats_refuse_what_float_refuses(ctype, value):
    with pytest.raises(pcg.ArgumentError, match=rf"k\(\): parameter 0 'x' \({ctype}\) cannot take"):
        pack(f"{ctype} x", value)


@pytest.mark.parametrize("ctype, value", [
    ("half", 65520.0), ("half", 1e6), ("half", -1e6), ("half", 2**70),
    ("__nv_bfloat16", 1e39), ("__nv_bfloat16", -3.4e38), ("__nv_bfloat16", np.float64(1e300)),
    ("__nv_fp8_e4m3", 465.0), ("__nv_fp8_e4m3", 1e4), ("__nv_fp8_e4m3", -500),
    ("__nv_fp8_e5m2", 61440.0), ("__nv_fp8_e5m2", 1e5),
    ("float", 1e39),
])
def test_small_floats_refuse_finite_values_too_large(ctype, value):
    with pytest.raises(pcg.ArgumentError, match="does not fit|too large"):
        pack(f"{ctype} x", value)


@pytest.mark.parametrize("ctype", SMALL_FLOATS[:4])
def test_small_floats_refuse_numpy_complex(ctype):
    with pytest.raises(pcg.ArgumentError, match="takes a real number, not complex64"):
        pack(f"{ctype} x", np.complex64(1))


def test_e4m3_has_no_infinity():
    with pytest.raises(pcg.ArgumentError, match="has no infinity"):
        pack("__nv_fp8_e4m3 x", math.inf)


@pytest.mark.parametrize("value, bits", [
    (1.0, 0x3F80), (-2.0, 0xC000), (0.0, 0x0000), (-0.0, 0x8000), (math.inf, 0x7F80),
    (-math.inf, 0xFF80), (math.nan, 0x7FC0), (1.00390625, 0x3F80), (1.01171875, 0x3F82),
    (3.3895313892515355e38, 0x7F7F), (np.float16(2.0), 0x4000), (3, 0x4040),
])
def test_bfloat16_bits(value, bits):
    assert pack("__nv_bfloat16 x", value) == struct.pack("<H", bits)


@pytest.mark.parametrize("value, bits", [
    (1.0, 0x38), (-1.0, 0xB8), (0.5, 0x30), (448.0, 0x7E), (464.0, 0x7E), (2.0 ** -9, 0x01),
    (2.0 ** -6, 0x08), (7 / 8 * 2.0 ** -6, 0x07), (1.0625, 0x38), (1.1875, 0x3A), (0.0, 0x00),
    (-0.0, 0x80), (math.nan, 0x7F), (2.0 ** -11, 0x00), (3, 0x44), (np.float32(1.5), 0x3C),
])
def test_fp8_e4m3_bits(value, bits):
    assert pack("__nv_fp8_e4m3 x", value) == bytes([bits])


@pytest.mark.parametrize("value, bits", [
    (1.0, 0x3C), (1.5, 0x3E), (57344.0, 0x7B), (60000.0, 0x7B), (math.inf, 0x7C),
    (-math.inf, 0xFC), (2.0 ** -16, 0x01), (2.0 ** -14, 0x04), (-2.0, 0xC0), (math.nan, 0x7F),
])
def test_fp8_e5m2_bits(value, bits):
    assert pack("__nv_fp8_e5m2 x", value) == bytes([bits])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_round_trips_every_finite_code(fmt):
    """Decoding each finite code and encoding the value gives the code back."""
    ebits, mbits, top, _ = small_floats.FP8_FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    for code in range(top + 1):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        value = (m / (1 << mbits)) * 2.0 ** (1 - bias) if e == 0 else \
            (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        assert small_floats.fp8_bits(value, fmt) == code
        assert small_floats.fp8_bits(-value, fmt) == code | 0x80


@pytest.mark.parametrize("value", [1.5, -0.25, 65504.0, math.inf, np.float32(3.0), 7])
def test_half_bytes(value):
    assert pack("half x", value) == struct.pack("<e", value)


# vectors -------------------------------------------------------------------------------

@pytest.mark.parametrize("ctype, value", [
    ("float2", {1: 2, 3: 4}), ("float2", {1.0, 2.0}), ("float2", "ab"), ("float2", 1.5),
    ("float2", None), ("float2", (1.0,)), ("float2", (1.0, 2.0, 3.0)), ("float2", (1.0, "2")),
    ("float2", (1.0, None)), ("float2", (1e39, 0.0)), ("float2", iter([1.0, 2.0])),
    ("float4", np.array(["a", "b", "c", "d"])), ("float4", np.array([1, 2, 3], np.float32)),
    ("int2", (1.5, 2)), ("int2", ("1", 2)), ("int2", (2**40, 0)), ("int2", {1, 2}),
    ("int2", np.array([1.5, 2.5])), ("char2", "ab"), ("char2", (300, 0)), ("uint4", (-1, 0, 0, 0)),
    ("double2", (1j, 0)), ("longlong2", (1.0, 2)),
])
def test_vectors_refuse_what_their_elements_refuse(ctype, value):
    with pytest.raises(pcg.ArgumentError, match=rf"parameter 0 'v' \({ctype}\) cannot take"):
        pack(f"{ctype} v", value)


@pytest.mark.parametrize("ctype, value, data", [
    ("float2", (1.0, 2.5), struct.pack("<ff", 1.0, 2.5)),
    ("float2", [1, 2], struct.pack("<ff", 1, 2)),
    ("float2", np.array([1.0, 2.0], np.float32), struct.pack("<ff", 1, 2)),
    ("float2", np.array([[1.0, 2.0]], np.float32), struct.pack("<ff", 1, 2)),
    ("int2", (np.int64(3), np.int8(1)), struct.pack("<ii", 3, 1)),
    ("int4", (1, -2, 3, -4), struct.pack("<4i", 1, -2, 3, -4)),
    ("double2", (0.1, 0.2), struct.pack("<dd", 0.1, 0.2)),
    ("char4", b"abcd", b"abcd"),
    ("float3", (1, 2, 3), struct.pack("<3f", 1, 2, 3)),
])
def test_vectors_pack_their_elements(ctype, value, data):
    assert pack(f"{ctype} v", value) == data


# the other kinds ---------------------------------------------------------------------

@pytest.mark.parametrize("value", ["yes", "no", "True", 2, -1, 1.0, 0.0, None, [True], b"\x01"],
                         ids=repr)
def test_bool_takes_only_bools(value):
    with pytest.raises(pcg.ArgumentError, match=r"parameter 0 'f' \(bool\) cannot take"):
        pack("bool f", value)


@pytest.mark.parametrize("value, data", [(True, b"\x01"), (np.bool_(False), b"\x00"), (1, b"\x01")])
def test_bool_bytes(value, data):
    assert pack("bool f", value) == data


@pytest.mark.parametrize("value", [True, False, -1, 2**64, 1.5, "0x1000", None, b"\x00" * 8,
                                   np.float64(4096), [4096]], ids=repr)
def test_pointer_refuses_what_is_not_an_address(value):
    with pytest.raises(pcg.ArgumentError, match=r"parameter 0 'p' \(float\*\) cannot take"):
        pack("float* p", value)


@pytest.mark.parametrize("value", [np.uint64(0x1000), np.int32(0x1000), 0x1000])
def test_pointer_takes_integer_addresses(value):
    assert pack("float* p", value) == struct.pack("<Q", 0x1000)


@pytest.mark.parametrize("value", ["x", True, 1.5, None, -1, object()], ids=repr)
def test_graph_handles_refuse_what_is_not_a_handle(value):
    with pytest.raises(pcg.ArgumentError, match=r"parameter 0 'h' \(cudaGraphExec_t\)"):
        pack("cudaGraphExec_t h", value)


@pytest.mark.parametrize("ctype, value", [("int", 2**31), ("int", -(2**31) - 1), ("int", 1.0),
                                          ("int", "1"), ("unsigned int", -1), ("char", 128),
                                          ("unsigned char", 256), ("long long", 2**63),
                                          ("size_t", -1), ("short", None), ("int", np.float32(1))])
def test_integers_refuse_out_of_range_and_non_integers(ctype, value):
    with pytest.raises(pcg.ArgumentError, match=rf"parameter 0 'n' \({ctype}\) cannot take"):
        pack(f"{ctype} n", value)


# the pack as a whole ------------------------------------------------------------------

@pytest.mark.parametrize("args", [5, "abc", b"ab", {0: 1}, None, 1.5], ids=repr)
def test_args_must_be_a_sequence(args):
    with pytest.raises(pcg.ArgumentError, match="args must be a sequence of 2 values"):
        fake_kernel("int a, int b", name="k").pack_args(args)


def test_args_may_be_any_iterable():
    assert fake_kernel("int a, int b").pack_args(iter([1, 2])) == struct.pack("<ii", 1, 2)


def test_a_wrong_count_names_a_long_signature_on_one_short_line():
    k = fake_kernel(", ".join(f"float* p{i}" for i in range(300)), name="wide")
    with pytest.raises(pcg.ArgumentError) as info:
        k.pack_args((0,) * 299)
    text = str(info.value)
    assert "\n" not in text and len(text) < 300, text
    assert "takes 300 arguments, 299 given" in text and "(293 more)" in text and "p299" in text


def test_offsets_follow_alignment():
    block = pack("char c, double d, short s, float2 v", 1, 2.0, 3, (4.0, 5.0))
    assert len(block) == 32
    assert block[0:1] == b"\x01" and struct.unpack_from("<d", block, 8)[0] == 2.0
    assert struct.unpack_from("<h", block, 16)[0] == 3
    assert struct.unpack_from("<ff", block, 24) == (4.0, 5.0)


@pytest.mark.parametrize("shared_mem", [2**32, 2**40, -1])
def test_shared_mem_out_of_range_is_named_at_the_lowest_level(shared_mem):
    layout = Layout("k", parse_params("int a"))
    with pytest.raises(pcg.ArgumentError, match="k: shared_mem must be"):
        ArgPack(layout, None, (1,), 1, 1, shared_mem)
