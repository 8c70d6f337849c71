"""CPU tests: where :attr:`KernelNode.arg_bytes` says each argument sits when the driver
cannot tell (no ``cuKernelGetParamInfo``): at the offsets :meth:`Kernel.pack_args` writes
it to, the kernel ABI's, a 16-byte-aligned vector after a misaligned char included.
Fake kernels and nodes; one module compiled by NVRTC for ``sm_90``; no GPU."""

import struct

import pytest

import pycudagraph as pcg
from tests.support.fakes import fake_graph, fake_kernel, fake_kernel_node

pytestmark = pytest.mark.usefixtures("cpu_device")

SIG = "float2 a, char b, float4 c, int d"
ARGS = ((1.0, 2.0), 3, (4.0, 5.0, 6.0, 7.0), 8)


@pytest.fixture
def no_image(monkeypatch):
    """The driver cannot read parameter offsets from the loaded image (older than 12.4)."""
    monkeypatch.setattr(pcg.Kernel, "image_params", property(lambda self: None))


def test_offsets_keep_each_parameters_alignment(no_image):
    node = fake_kernel_node(fake_graph(), fake_kernel(SIG), args=ARGS, sig=SIG)
    passed = node.arg_bytes
    assert [off for off, _ in passed] == [0, 8, 16, 32]  # float4: 16-aligned, not 24
    assert [b for _, b in passed] == [struct.pack("<ff", 1, 2), b"\x03",
                                      struct.pack("<4f", 4, 5, 6, 7), struct.pack("<i", 8)]


def test_offsets_are_where_pack_args_writes_each_argument(no_image):
    k = fake_kernel(SIG)
    block = k.pack_args(ARGS)
    node = fake_kernel_node(fake_graph(), k, args=ARGS, sig=SIG)
    for off, data in node.arg_bytes:
        assert block[off:off + len(data)] == data


def test_compiled_offsets_are_the_images():
    src = ('extern "C" __global__ void k(float2 a, char b, float4 c, int d, double* y)'
           " { y[0] = a.x + b + c.w + d; }")
    k = pcg.Program(src).compile(arch="sm_90")["k"]
    assert k.param_offsets() == [0, 8, 16, 32, 40]  # from the PTX, no GPU
