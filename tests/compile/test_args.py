"""Argument packing: bytes, alignment, range and type errors (CPU)."""

import ctypes
import struct

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile.args import ArgPack, Layout, dims3
from pycudagraph.compile.signature import parse_params


class FakeKernel:
    name = "k"


def pack(sig, args, grid=1, block=1, smem=0):
    layout = Layout("k", parse_params(sig))
    return layout, ArgPack(layout, FakeKernel(), args, grid, block, smem, kern=0x1234, ctx=0x99)


def slot_bytes(p, i, n):
    off = p.layout.offsets[i]
    return ctypes.string_at(p.address + off, n)


def test_header_points_at_pointer_array_and_slots():
    layout, p = pack("float* y, float a, int n", (0x1000, 2.5, 7), grid=(4, 2), block=256, smem=64)
    raw = p.raw()
    func, gx, gy, gz, bx, by, bz, smem, kparams, extra, kern, ctx = struct.unpack_from("<Q7I4xQQQQ", raw)
    assert (gx, gy, gz, bx, by, bz, smem) == (4, 2, 1, 256, 1, 1, 64)
    assert kparams == p.address + 72 and extra == 0 and kern == 0x1234 and ctx == 0x99
    ptrs = struct.unpack_from("<3Q", raw, 72)
    assert ptrs == tuple(p.address + o for o in layout.offsets)
    assert struct.unpack("<Q", slot_bytes(p, 0, 8))[0] == 0x1000
    assert struct.unpack("<f", slot_bytes(p, 1, 4))[0] == 2.5
    assert struct.unpack("<i", slot_bytes(p, 2, 4))[0] == 7


def test_alignment_of_each_slot():
    layout, p = pack("char c, double d, short s, float4 v, half h", (1, 2.0, 3, (1, 2, 3, 4), 0.5))
    for param, off in zip(layout.params, layout.offsets):
        assert off % param.align == 0, param
    assert struct.unpack("<4f", slot_bytes(p, 3, 16)) == (1.0, 2.0, 3.0, 4.0)
    assert struct.unpack("<e", slot_bytes(p, 4, 2))[0] == 0.5


def test_python_float_becomes_float32():
    _, p = pack("float a", (0.1,))
    assert slot_bytes(p, 0, 4) == np.float32(0.1).tobytes()


def test_numpy_scalars_and_bool():
    _, p = pack("long long x, unsigned char u, bool b, double d", (np.int64(-5), np.uint8(200), True, np.float32(1.5)))
    assert p.values() == (-5, 200, True, 1.5)


def test_bfloat16_rounding():
    _, p = pack("__nv_bfloat16 x", (1.0,))
    assert struct.unpack("<H", slot_bytes(p, 0, 2))[0] == 0x3F80


@pytest.mark.parametrize("sig, args, match", [
    ("float* y, float a, int n", (1, 2.0), r"takes 3 arguments, 2 given"),
    ("float* y, float a, int n", (1, "x", 3), r"parameter 1 'a' \(float\) cannot take 'x'"),
    ("float* y, float a, int n", (1, 2.0, 2**31), r"parameter 2 'n' \(int\)"),
    ("float* y, float a, int n", (1, 2.0, 1.5), r"parameter 2 'n' \(int\) cannot take 1.5"),
    ("unsigned int u", (-1,), r"parameter 0 'u' \(unsigned int\)"),
    ("char c", (200,), r"parameter 0 'c' \(char\)"),
    ("float* y", (np.zeros(3),), r"parameter 0 'y' \(float\*\).*host memory"),
    ("float* y", ("ptr",), r"parameter 0 'y'"),
    ("bool b", ("yes",), r"parameter 0 'b' \(bool\)"),
    ("float a", (1e300,), r"parameter 0 'a' \(float\)"),
    ("float4 v", ((1, 2, 3),), r"parameter 0 'v' \(float4\)"),
])
def test_argument_errors_name_the_parameter(sig, args, match):
    with pytest.raises(pcg.ArgumentError, match=match):
        pack(sig, args)


def test_argument_error_is_type_and_value_error():
    assert issubclass(pcg.ArgumentError, TypeError) and issubclass(pcg.ArgumentError, ValueError)


def test_set_one_slot_leaves_others():
    _, p = pack("float* y, float a, int n", (0x1000, 2.5, 7))
    before = p.raw()
    p.set(1, 9.0)
    after = p.raw()
    changed = [i for i, (x, y) in enumerate(zip(before, after)) if x != y]
    off = p.layout.offsets[1]
    assert changed and all(off <= i < off + 4 for i in changed)
    assert p.values() == (0x1000, 9.0, 7)


def test_set_slot_error():
    _, p = pack("float* y, float a, int n", (0x1000, 2.5, 7))
    with pytest.raises(pcg.ArgumentError, match="'n'"):
        p.set(2, "seven")
    assert p.values() == (0x1000, 2.5, 7)


def test_copy_is_independent_and_self_pointing():
    _, p = pack("float* y, float a, int n", (0x1000, 2.5, 7))
    c = p.copy()
    c.set(1, 4.0)
    assert p.values()[1] == 2.5 and c.values()[1] == 4.0
    assert struct.unpack_from("<Q", c.raw(), 40)[0] == c.address + 72
    assert struct.unpack_from("<Q", c.raw(), 72)[0] == c.address + c.layout.offsets[0]


def test_updated_partial_by_name():
    _, p = pack("float* y, float a, int n", (0x1000, 2.5, 7))
    q = p.updated(args={"n": 9}, grid=3)
    assert q.values() == (0x1000, 2.5, 9) and q.dims[0] == (3, 1, 1)
    assert p.values() == (0x1000, 2.5, 7)
    with pytest.raises(pcg.ArgumentError, match="no parameter named 'm'"):
        p.updated(args={"m": 1})


def test_struct_argument_from_numpy_and_ctypes():
    layout = Layout("k", tuple(q.with_size(8) if q.kind == "struct" else q
                               for q in parse_params("Pair p, int n")))
    dt = np.dtype([("a", "<i4"), ("b", "<f4")])
    val = np.array((3, 1.5), dtype=dt)[()]
    p = ArgPack(layout, FakeKernel(), (val, 1), 1, 1)
    assert slot_bytes(p, 0, 8) == val.tobytes()

    class Pair(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int), ("b", ctypes.c_float)]

    p.set(0, Pair(4, 2.0))
    assert slot_bytes(p, 0, 8) == bytes(Pair(4, 2.0))
    with pytest.raises(pcg.ArgumentError, match="bytes"):
        p.set(0, b"123")


def test_unknown_struct_size_is_an_error():
    with pytest.raises(pcg.ArgumentError, match="size of struct parameter"):
        Layout("k", parse_params("Pair p"))


def test_objects_kept_alive():
    class Ptr:
        __cuda_array_interface__ = {"data": (0x5000, False), "shape": (1,), "typestr": "<f4", "version": 3}

    obj = Ptr()
    _, p = pack("float* y", (obj,))
    assert p.refs[0] is obj and p.values() == (0x5000,)


@pytest.mark.parametrize("value, out", [(5, (5, 1, 1)), ((2, 3), (2, 3, 1)), ([1, 2, 3], (1, 2, 3))])
def test_dim3(value, out):
    assert dims3(value, "grid") == out


@pytest.mark.parametrize("bad", [0, (1, 2, 3, 4), (0, 1), "x", -1])
def test_dim3_errors(bad):
    with pytest.raises(ValueError, match="grid"):
        dims3(bad, "grid")
