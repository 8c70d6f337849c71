"""CPU tests: a kernel node of one device, while the kernel was last looked up on another.

The node's own function (its pack header names it) and that function's device decide:
its limits and shared-memory attribute (set_params, exe.set_params), and which devices'
DeviceBuffers its updates may take (set_arg, set_params) once several devices are in use.
Fake kernels, graphs and execs (tests/support/fakes.py): no raw call reaches CUDA.
"""

import pytest

import pycudagraph as pcg
from pycudagraph.compile import limits as validate
from pycudagraph._cuda import context as cdev, fast
from pycudagraph.nodes import kernel_node as kernel_node_mod
from tests.support.fakes import H100, _ids, fake_buffer, fake_exec, fake_graph, fake_kernel


@pytest.fixture
def setup(monkeypatch):
    """A kernel loaded on devices 0 and 1, a node of device 1 in a graph and its exec, and
    device 0's function looked up last (another thread's launch there)."""
    k = fake_kernel("float* y, float a, int n")
    f0, f1 = k.last_function[0], next(_ids)
    k._funcs[1] = f1
    validate.KERNEL_LIMITS[f1] = validate.KernelLimits(
        "k", f1, validate.DeviceLimits(1, **H100), 1024, 49152, 0)
    validate.KERNEL_LIMITS[f0].smem = 100000  # device 0's function was raised already
    monkeypatch.setattr(cdev.thread_state, "device", 1, raising=False)
    pack = k.pack((0x1000, 1.0, 4), 1, 32)  # a node built on device 1
    assert pack.func == f1
    monkeypatch.setattr(cdev.thread_state, "device", 0, raising=False)
    assert k._function(0) == f0 and k._func == (f0, 0)  # one tuple: function and device
    g = fake_graph()
    node = g.table.register(pcg.KernelNode(g.table, next(_ids), pack), pack)
    exe = fake_exec(g)
    sent, raised = [], []
    monkeypatch.setattr(fast, "kernel_node_set_params", lambda n, p: sent.append(("node", p)))
    monkeypatch.setattr(fast, "exec_kernel_node_set_params",
                        lambda e, h, p, n: sent.append(("exec", p)))

    def set_arg(exec_h, h, hot, address, refs, key, value, pack, exe, node):
        pack.set(pack.layout.slot_index(key), value)
        sent.append(("exec", pack))

    def set_args(exec_h, h, hot, address, refs, args, pack, exe, node):
        pack.apply(args)
        sent.append(("exec", pack))

    monkeypatch.setattr(kernel_node_mod, "_set_arg", set_arg)
    monkeypatch.setattr(kernel_node_mod, "_set_args", set_args)
    monkeypatch.setattr(validate, "raise_dynamic_smem",
                        lambda lim, n: raised.append((lim.func, n)))
    yield k, f1, node, exe, sent, raised
    validate.KERNEL_LIMITS.pop(f1, None)


def test_set_params_checks_shared_memory_on_the_nodes_own_function(setup):
    k, f1, node, exe, sent, raised = setup
    node.set_params(shared_mem=60000)  # over device 1's function's 48 KiB ceiling
    assert raised == [(f1, 60000)]  # raised there, not on device 0's function
    exe.set_params(node, shared_mem=70000)
    assert raised[-1] == (f1, 70000)
    assert [w for w, _ in sent] == ["node", "exec"]


def test_the_last_function_and_its_device_are_one_attribute(setup):
    """Threads of different devices write the pair in one step (no torn pair)."""
    k, f1, *_ = setup
    assert k._function(1) == f1 and k._func == (f1, 1)
    assert not hasattr(type(k), "_func_dev") and "_func_dev" not in vars(k)


def buffer(dev):
    b = fake_buffer(64)
    b._addr, b._dev = b.ptr, dev
    return b


@pytest.mark.parametrize("update", [
    lambda node, exe, b: exe.set_arg(node, 0, b),
    lambda node, exe, b: exe.set_arg(node, "y", b),
    lambda node, exe, b: node.set_params(args={"y": b}),
    lambda node, exe, b: node.set_params(args=[b, 1.0, 4]),
    lambda node, exe, b: exe.set_params(node, args={0: b}),
    lambda node, exe, b: exe.set_params(node, args=(x for x in (b, 1.0, 4))),
])
def test_updates_refuse_another_devices_buffer(setup, monkeypatch, update):
    k, f1, node, exe, sent, raised = setup
    monkeypatch.setattr(cdev.seen, "multi", True)
    with pytest.raises(pcg.DeviceMismatchError,
                       match="runs on device 1 but argument 0 'y' .* memory of device 0"):
        update(node, exe, buffer(0))
    assert sent == []  # nothing reached the driver
    same = buffer(1)
    update(node, exe, same)  # a buffer of the node's device goes through
    assert len(sent) == 1 and same.ptr in sent[0][1].values()


def test_one_device_makes_no_device_check(setup, monkeypatch):
    k, f1, node, exe, sent, raised = setup
    monkeypatch.setattr(cdev.seen, "multi", False)
    monkeypatch.setattr(k, "check_node_args", None)  # would raise TypeError if called
    exe.set_arg(node, 0, buffer(0))
    node.set_params(args={0: buffer(0)})
    assert len(sent) == 2


def test_check_config_uses_the_current_devices_function(setup, monkeypatch):
    """Kernel.check_config judges the function of the current device, not the one looked up
    last (another thread's, on another GPU)."""
    k, f1, node, exe, sent, raised = setup
    assert k._func[1] == 0  # device 0's function was looked up last
    monkeypatch.setattr(cdev.thread_state, "device", 1, raising=False)
    k.check_config(1, 32, 60000)  # over device 1's 48 KiB ceiling: raised on f1
    assert raised == [(f1, 60000)]
