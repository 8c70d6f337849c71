"""Misuse (CPU): what is and is not a pointer. ``device_pointer`` takes Python and numpy
integers in 0 .. 2**64-1 and device arrays; bools, negative and wider addresses, host arrays
and malformed array interfaces are refused with an ArgumentError. ``host_pointer`` refuses
numpy scalars (their memory is a temporary, freed at once) and, for a copy's destination,
read-only memory. No CUDA call is made by any of these."""

import ctypes

import numpy as np
import pytest

import pycudagraph as pcg
from pycudagraph.runtime.pointers import host_array_arg, nbytes_of

from tests.support.fakes import fake_buffer, fake_graph


class CAI:
    """An object with a given ``__cuda_array_interface__``."""

    def __init__(self, iface):
        self.__cuda_array_interface__ = iface


class AI:
    """An object with a given ``__array_interface__``."""

    def __init__(self, iface):
        self.__array_interface__ = iface


GOOD_CAI = {"shape": (4,), "typestr": "<f4", "data": (0x7000, False), "version": 3}


@pytest.mark.parametrize("value", [0, 1, 0x7F00_0000_0000, 2**64 - 1, np.uint64(2**64 - 1),
                                   np.int64(4096), np.uint32(16), np.int8(1)], ids=repr)
def test_device_pointer_takes_integers_in_range(value):
    assert pcg.device_pointer(value) == int(value)


@pytest.mark.parametrize("value", [-1, -(2**63), 2**64, 2**70, np.int64(-4096)], ids=repr)
def test_device_pointer_refuses_addresses_out_of_range(value):
    with pytest.raises(pcg.ArgumentError, match="an address must be in 0 .. 2\\*\\*64-1"):
        pcg.device_pointer(value)


@pytest.mark.parametrize("value", [True, False, np.bool_(True)], ids=repr)
def test_device_pointer_refuses_bools(value):
    with pytest.raises(pcg.ArgumentError, match="bool"):
        pcg.device_pointer(value)


@pytest.mark.parametrize("value", [None, 1.5, "0x1000", b"\x00" * 8, [0x1000], (0x1000,),
                                   {"ptr": 1}, object(), complex(1, 0), np.float64(4096)],
                         ids=repr)
def test_device_pointer_refuses_what_has_no_address(value):
    with pytest.raises(pcg.ArgumentError):
        pcg.device_pointer(value)


@pytest.mark.parametrize("value", [np.zeros(4, np.float32), np.float32(1.0)], ids=repr)
def test_device_pointer_refuses_host_arrays(value):
    with pytest.raises(pcg.ArgumentError, match="host memory"):
        pcg.device_pointer(value)


def test_device_pointer_reads_the_cuda_array_interface():
    assert pcg.device_pointer(CAI(GOOD_CAI)) == 0x7000
    assert pcg.device_pointer(CAI(dict(GOOD_CAI, data=(np.uint64(0x8000), False)))) == 0x8000


@pytest.mark.parametrize("iface, words", [
    ({}, r"\['data'\] must be a tuple"),
    ({"data": "x"}, r"\['data'\] must be a tuple"),
    ({"data": (0x1000,)}, r"\['data'\] must be a tuple"),
    ({"data": [0x1000, False]}, r"\['data'\] must be a tuple"),
    ({"data": ("0x1000", False)}, r"\['data'\]\[0\] must be an int"),
    ({"data": (1.5, False)}, r"\['data'\]\[0\] must be an int"),
    ({"data": (None, False)}, r"\['data'\]\[0\] must be an int"),
    ({"data": (True, False)}, r"\['data'\]\[0\] must be an int"),
    ({"data": (-8, False)}, "an address must be in 0"),
    ({"data": (2**65, False)}, "an address must be in 0"),
    (5, "must be a dict"),
    ("data", "must be a dict"),
    ([0x1000], "must be a dict"),
])
def test_device_pointer_refuses_a_malformed_cuda_array_interface(iface, words):
    with pytest.raises(pcg.ArgumentError, match="__cuda_array_interface__.*" + words):
        pcg.device_pointer(CAI(iface))


@pytest.mark.parametrize("iface, words", [
    ({"data": (0x7000, False)}, "needs 'shape'"),
    ({"shape": (4,), "data": (0x7000, False)}, "needs 'shape'"),
    ({"shape": ("4",), "typestr": "<f4"}, "shape"),
    ({"shape": (-4,), "typestr": "<f4"}, "shape"),
    ({"shape": 4, "typestr": "<f4"}, "needs 'shape'"),
    ({"shape": (4,), "typestr": "nonsense"}, "needs 'shape'"),
])
def test_nbytes_of_refuses_a_malformed_cuda_array_interface(iface, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        nbytes_of(CAI(iface))


def test_nbytes_of_reads_shape_and_type():
    assert nbytes_of(CAI(dict(GOOD_CAI, shape=(3, np.int64(5)), typestr="<f8"))) == 120
    assert nbytes_of(0x1000) is None


class DLPackHost:
    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def __dlpack__(self, stream=None):
        raise AssertionError("not read: the device type already says no")


class DLPackBroken:
    def __dlpack_device__(self):
        return "cuda"

    def __dlpack__(self, stream=None):
        return None


@pytest.mark.parametrize("obj, words", [(DLPackHost(), "DLPack device type 1"),
                                        (DLPackBroken(), "__dlpack_device__")],
                         ids=["host", "broken"])
def test_device_pointer_refuses_dlpack_off_the_gpu(obj, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        pcg.device_pointer(obj)


def test_device_pointer_of_a_freed_buffer_says_freed():
    buf = fake_buffer(64)
    buf._addr, buf.ptr = buf.ptr, 0
    with pytest.raises(pcg.ClosedError, match="was freed"):
        pcg.device_pointer(buf)


# host_pointer ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [np.float32(1.0), np.int64(7), np.bool_(True),
                                   np.array([1.0])[0]], ids=repr)
def test_host_pointer_refuses_numpy_scalars(value):
    """``np.float32(1).__array_interface__`` points into a temporary array that is freed
    before the address can be used."""
    with pytest.raises(pcg.ArgumentError, match="numpy scalar .* no memory of its own"):
        pcg.host_pointer(value)


def test_host_pointer_of_arrays():
    a = np.zeros(8, np.float32)
    assert pcg.host_pointer(a) == a.ctypes.data
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    assert pcg.host_pointer(ro) == ro.ctypes.data  # read from: fine
    with pytest.raises(pcg.ArgumentError, match="destination of a copy is a read-only"):
        pcg.host_pointer(ro, writable=True)
    with pytest.raises(pcg.ArgumentError, match="C-contiguous"):
        pcg.host_pointer(np.zeros((4, 4))[:, 1])


@pytest.mark.parametrize("value", [None, 5, 1.5, "abc", b"abc", [1, 2], object()], ids=repr)
def test_host_pointer_refuses_what_has_no_host_address(value):
    with pytest.raises(pcg.ArgumentError, match="cannot get a host pointer"):
        pcg.host_pointer(value)


@pytest.mark.parametrize("iface", [{}, {"data": None}, {"data": ("x", False)}, 7],
                         ids=repr)
def test_host_pointer_refuses_a_malformed_array_interface(iface):
    with pytest.raises(pcg.ArgumentError, match="__array_interface__"):
        pcg.host_pointer(AI(iface))


def test_host_pointer_respects_a_read_only_array_interface():
    buf = ctypes.create_string_buffer(16)
    obj = AI({"data": (ctypes.addressof(buf), True), "shape": (16,), "typestr": "|u1",
              "version": 3})
    assert pcg.host_pointer(obj) == ctypes.addressof(buf)
    with pytest.raises(pcg.ArgumentError, match="read-only"):
        pcg.host_pointer(obj, writable=True)


# copies to and from host memory ------------------------------------------------------

def _readonly(n=16):
    a = np.zeros(n, np.uint8)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("dst, words", [
    (_readonly(), "read-only"),
    (b"\x00" * 16, "needs a numpy array"),
    (memoryview(b"\x00" * 16), "read-only"),
    ([0] * 16, "needs a numpy array"),
    ((0,) * 16, "needs a numpy array"),
    ("x" * 16, "needs a numpy array"),
    (object(), "needs a numpy array"),
    (np.zeros((8, 8))[:, 0], "C-contiguous"),
    (np.zeros(64, np.uint8), "64 bytes but the buffer only 16"),
])
def test_copy_to_refuses_what_it_cannot_write(dst, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        fake_buffer(16).copy_to(dst)


@pytest.mark.parametrize("src, words", [
    (None, "needs a host array"),
    ("abcd", "needs a host array"),
    ({1: 2}, "needs a host array"),
    ({1, 2}, "needs a host array"),
    ([object()], "numbers or bytes"),
    (np.array(["ab"]), "numbers or bytes"),
    (np.zeros((8, 8))[:, 0], "C-contiguous"),
    (np.zeros(64, np.uint8), "64 bytes but the buffer only 16"),
    ([[1, 2], [3]], "not a host array"),
])
def test_copy_from_refuses_what_is_not_host_data(src, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        fake_buffer(16).copy_from(src)


@pytest.mark.parametrize("src", [None, "abcd", [object()], {"a": 1}], ids=repr)
def test_from_array_refuses_before_allocating(src):
    with pytest.raises(pcg.ArgumentError, match="DeviceBuffer.from_array"):
        pcg.DeviceBuffer.from_array(src)


def test_from_array_refuses_a_wrong_stream_before_allocating():
    with pytest.raises(pcg.ArgumentError, match="cannot use str as a CUDA stream"):
        pcg.DeviceBuffer.from_array(np.zeros(4, np.float32), stream="s")


@pytest.mark.parametrize("kwargs, words", [
    (dict(dtype="no-such-type"), "not a numpy dtype"),
    (dict(dtype=object), "cannot view raw memory"),
    (dict(dtype=np.float32, shape=(3, 3)), "does not fit 4 elements"),
    (dict(dtype=np.float32, shape="4"), "shape"),
])
def test_to_numpy_checks_dtype_and_shape(kwargs, words):
    with pytest.raises(pcg.ArgumentError, match=words):
        fake_buffer(16).to_numpy(**kwargs)


def test_host_array_arg_accepts_what_numpy_reads():
    assert host_array_arg([1, 2, 3], "x").dtype.kind == "i"
    assert host_array_arg(bytearray(4), "x", write=True).nbytes == 4
    assert host_array_arg(memoryview(bytearray(8)), "x", write=True).nbytes == 8


def test_memcpy_node_refuses_a_read_only_destination(cpu_device):
    with pytest.raises(pcg.ArgumentError, match="memcpy dst: the destination of a copy is a "
                                                "read-only numpy array"):
        fake_graph().add_memcpy(_readonly(64), fake_buffer(64))


def test_memcpy_3d_refuses_a_read_only_destination(cpu_device):
    with pytest.raises(pcg.ArgumentError, match="memcpy_3d dst: .*read-only"):
        fake_graph().add_memcpy_3d(_readonly(64), fake_buffer(64), 8, 8)


@pytest.mark.parametrize("value, words", [(1e6, "does not fit a half"),
                                          (float("nan"), None), (1e39, "does not fit a float"),
                                          (complex(1, 1), "must be an int or a float"),
                                          (np.complex64(1), "must be an int or a float")],
                         ids=repr)
def test_memset_float_values_are_checked(cpu_device, value, words):
    es = 2 if words == "does not fit a half" else 4
    g = fake_graph()
    if words is None:  # a NaN memset is a bit pattern like any other: refused only for size
        with pytest.raises(pcg.ArgumentError, match="element_size 2 .* or 4"):
            g.add_memset(fake_buffer(64), value, 4, 1)
        return
    with pytest.raises(pcg.ArgumentError, match=words):
        g.add_memset(fake_buffer(64), value, 4, es)
