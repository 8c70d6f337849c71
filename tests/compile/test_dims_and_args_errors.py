"""Misuse: grid/block dimensions and argument packing (CPU, no GPU needed).

Each case is one bad input; the test asserts the exception type and the word that names
the problem. Good inputs next to them show the check does not refuse what is valid.
"""

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.compile.args import ArgPack, Layout, dims3
from pycudagraph.compile.signature import parse_params


class FakeKernel:
    name = "k"


def pack(sig, args, grid=1, block=1, smem=0):
    layout = Layout("k", parse_params(sig))
    return ArgPack(layout, FakeKernel(), args, grid, block, smem)


BAD_DIMS = [
    ("12", "int or a tuple"),           # a string is not (1, 2)
    (b"12", "int or a tuple"),
    ((2.7, 1), "x must be an int"),     # no truncation
    ((1, 2.0), "y must be an int"),
    ((1, 1, "4"), "z must be an int"),
    (True, "int or a tuple"),           # bool is not an int
    ((True, 1), "x must be an int"),
    ((np.bool_(True),), "x must be an int"),
    (2.0, "int or a tuple"),
    (None, "int or a tuple"),
    ((), "1 to 3 dimensions"),
    ((1, 1, 1, 1), "1 to 3 dimensions"),
    (0, "positive"),
    (-1, "positive"),
    ((4, 0), "y must be a positive"),
    ((1, 1, -2), "z must be a positive"),
    (2**32, "32-bit"),
    ((1, 2**32), "32-bit"),
    ({"x": 1}, "int or a tuple"),
    (range(3), "int or a tuple"),
]


@pytest.mark.parametrize("value, words", BAD_DIMS, ids=[repr(v) for v, _ in BAD_DIMS])
def test_bad_dims_refused(value, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        dims3(value, "grid")


@pytest.mark.parametrize("value, expected", [
    (7, (7, 1, 1)), ((2, 3), (2, 3, 1)), ([2, 3, 4], (2, 3, 4)),
    (np.int64(5), (5, 1, 1)), ((np.uint32(2), np.int16(3)), (2, 3, 1)),
    (2**32 - 1, (2**32 - 1, 1, 1)),
])
def test_good_dims_accepted(value, expected):
    assert dims3(value, "grid") == expected


def test_dims_error_names_the_field():
    with pytest.raises(pcg.ArgumentError, match="block"):
        dims3("32", "block")
    with pytest.raises(ValueError):  # ArgumentError is a ValueError (and a TypeError)
        dims3((2.5,), "grid")


BAD_ARGS = [
    ("float* y", (True,), "bool"),              # True is not pointer 0x1
    ("float* y", (False,), "bool"),
    ("float* y", (np.bool_(True),), "bool"),
    ("float* y", (1.5,), "float"),
    ("float* y", ("0x1000",), "str"),
    ("float* y", (None,), "NoneType"),
    ("float* y", (np.zeros(4, np.float32),), "host memory"),
    ("float* y", (-1,), "y"),
    ("int n", ("3",), "n"),
    ("int n", (2**31,), "n"),
    ("int n", (1.5,), "n"),
    ("unsigned char u", (256,), "u"),
    ("bool b", (2,), "bool"),
    ("float a", ("x",), "a"),
    ("float4 v", ((1, 2, 3),), "float4 needs 4"),
    ("float a, int n", (1.0,), "takes 2 arguments, 1 given"),
    ("float a", (1.0, 2), "takes 1 argument, 2 given"),
]


@pytest.mark.parametrize("sig, args, words", BAD_ARGS, ids=[f"{s}={a!r}"[:40] for s, a, _ in BAD_ARGS])
def test_bad_kernel_args_refused(sig, args, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pack(sig, args)


@pytest.mark.parametrize("args", [None, 5, "abc", {"y": 1}])
def test_args_must_be_a_sequence(args):
    with pytest.raises(pcg.ArgumentError, match="args must be a sequence"):
        pack("float* y", args)


def test_args_from_a_generator_are_accepted():
    p = pack("float* y, int n", (v for v in (0x1000, 3)))
    assert p.values() == (0x1000, 3)


@pytest.mark.parametrize("key, words", [(5, "out of range"), (-1, "out of range"),
                                        (1.0, "index must be an int"), (True, "index must be an int"),
                                        ("nope", "no parameter named"), (None, "index must be an int")])
def test_bad_argument_index(key, words):
    layout = Layout("k", parse_params("float* y, int n"))
    with pytest.raises(pcg.ArgumentError, match=words):
        layout.slot_index(key)


@pytest.mark.parametrize("smem, words", [(-1, "must be >= 0"), (2**32, "must be <="), (1.5, "must be an int"),
                                         ("4", "must be an int"), (True, "must be an int")])
def test_bad_shared_mem_in_update(smem, words):
    p = pack("int n", (1,))
    with pytest.raises(pcg.ArgumentError, match=r"k: shared_mem " + words):
        p.set_dims(shared_mem=smem)
    assert p.dims[2] == 0  # nothing written


def test_update_with_bad_grid_changes_nothing():
    p = pack("int n", (1,), grid=4, block=32)
    with pytest.raises(pcg.ArgumentError, match="k: grid"):
        p.apply(args={0: 5}, grid="64")
    assert p.dims == ((4, 1, 1), (32, 1, 1), 0) and p.values() == (1,)
