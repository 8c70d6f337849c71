"""Conditional capture (``cap.if_``, ``if_else``, ``while_``, ``switch``) and ``cap.fork``:
the refusals on the CPU (device scalars, arguments), and on the GPU, each check of
``tests/support/flow_checks.py`` in its own child process (a crash cannot take the run down)."""

import pytest

import pycudagraph as pcg
from pycudagraph.runtime.device_scalar import DTYPE_CODES, device_scalar
from tests.support.fakes import fake_buffer
from tests.support.watchdog import run_snippet

GPU_CHECKS = ["if", "if_else_and_bool_flag", "while", "switch", "nested_if_in_while", "fork_join",
              "unjoined_named", "diff_and_apply_in_body"]


class FakeTensor:
    """Looks like a PyTorch tensor to device_scalar (its module says torch)."""

    __module__ = "torch"

    def __init__(self, n=1, dtype="torch.bool", cuda=True):
        self.n, self.dtype, self.is_cuda, self.device = n, dtype, cuda, "cuda:0" if cuda else "cpu"

    def numel(self):
        return self.n

    def data_ptr(self):
        return 0x7000_1000


class FakeArray:
    def __init__(self, shape=(), typestr="<i4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (0x7000_2000, False), "version": 3}


def test_device_scalar_of_each_kind():
    t = device_scalar(FakeTensor(dtype="torch.bfloat16"))
    assert (t.ptr, t.dtype, t.code) == (0x7000_1000, "bfloat16", DTYPE_CODES["bfloat16"][0])
    a = device_scalar(FakeArray(typestr="|b1"))
    assert (a.ptr, a.dtype) == (0x7000_2000, "bool")
    assert device_scalar(FakeArray((1, 1), "<f8")).dtype == "float64"
    buf = fake_buffer(8)
    assert device_scalar(buf).dtype == "int32" and device_scalar(buf, "uint64").dtype == "uint64"
    assert device_scalar(0x7000_3000, dtype="int8").ptr == 0x7000_3000
    assert device_scalar(FakeTensor(dtype="torch.int64"), dtype="int64").dtype == "int64"


@pytest.mark.parametrize("obj, kw, match", [
    (FakeTensor(cuda=False), {}, "must be on the GPU"),
    (FakeTensor(n=3), {}, "3 elements"),
    (FakeArray((4,)), {}, "4 elements"),
    (FakeArray(typestr="<c8"), {}, "element type"),
    (FakeTensor(dtype="torch.int32"), {"dtype": "float32"}, "holds int32"),
    (fake_buffer(2), {}, "2 bytes hold no int32"),
    (0, {}, "null device address"),
    ("flag", {}, "cannot get a device pointer"),
])
def test_device_scalar_refusals(obj, kw, match):
    with pytest.raises(pcg.ArgumentError, match=match):
        device_scalar(obj, where="if_: flag", **kw)


def test_host_values_are_refused():
    np = pytest.importorskip("numpy")
    for obj in (np.zeros(1, np.int32), np.int32(1), True, 1.0):
        with pytest.raises(pcg.ArgumentError, match="host value"):
            device_scalar(obj)


def test_capture_methods_refuse_bad_arguments():
    cap = pcg.capture.__new__(pcg.capture)
    with pytest.raises(pcg.ArgumentError, match="switch: n must be a positive number"):
        cap.switch(0x7000_1000, 0)
    with pytest.raises(pcg.ArgumentError, match="cannot be an index"):
        cap.switch(FakeTensor(dtype="torch.float16"), 2)
    with pytest.raises(pcg.ArgumentError, match="if_: flag"):
        cap.if_(0)
    for bad, match in ((0, "positive number"), ([], "empty sequence"), ("2", "number of side"),
                       (True, "number of side")):
        with pytest.raises(pcg.ArgumentError, match=match):
            cap.fork(bad)


def test_the_fork_hook_is_refused_outside_the_capture_block():
    """``cap.fork_hook()`` installs a trace hook that the capture's end removes: outside
    the ``with`` block it raises and installs nothing (it stayed installed for good, and a
    trace on slows every later hot call to the ctypes route)."""
    from pycudagraph._cuda import check
    cap = pcg.capture(pcg.Stream.wrap(0x5000))  # made, never entered
    for _ in range(2):
        with pytest.raises(pcg.CaptureError, match="fork_hook: the capture is not open"):
            cap.fork_hook()
        assert check.tracer is None


def test_the_setter_kernel_compiles_without_a_gpu():
    m = pcg.Module.from_file("graph_control.cu", arch="sm_90")
    k = m.get_kernel("set_condition_of")
    assert [p.name for p in k.params] == ["handle", "value", "kind", "as_bool"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_CHECKS)
def test_gpu_check(name):
    out = run_snippet(f"from tests.support.flow_checks import run\nrun({name!r})", timeout=300)
    assert out.kind == "ok" and f"PASSED {name}" in out.output, str(out)
