"""Fuzz (CPU): every public callable, given wrong values, raises a pycudagraph error.

How the search is made: every name in ``pycudagraph.__all__`` that can be called (classes
included) and every public method of one object of each public class (built on fakes:
``tests/support/public_zoo.py``) are found by introspection. Two passes:

- a sweep: each parameter in turn gets each value of a fixed list of wrong values (None,
  bools, negative and >64-bit ints, NaN, strings, bytes, containers, numpy scalars and
  arrays, callables, ...) while the others keep a plausible value or their default;
- hypothesis: several parameters at once get values drawn from a wide strategy.

Whatever a call raises must be a :class:`~pycudagraph.PyCudaGraphError` (ArgumentError,
ClosedError, CudaError, CudaNotAvailableError where the call got as far as the driver that
this machine lacks, ...), or an ``OSError`` for a file path that is not there. Python's own
errors (AttributeError, KeyError, IndexError, struct.error, OverflowError, TypeError and
ValueError from inside a conversion ...) are what a bare internal error looks like: none may
escape. Runs only where no GPU is usable: fake handles must never reach a real driver.
"""

from __future__ import annotations

import inspect
import math
import traceback

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pycudagraph as pcg
from pycudagraph._cuda import fast

from tests.support.public_zoo import WRONG_VALUES, good_value, resolve, targets, zoo

pytestmark = pytest.mark.skipif(pcg._cuda.cuda_available(),
                                reason="a GPU is usable here: fake handles would reach it")

TARGETS = targets() if not pcg._cuda.cuda_available() else []
_NO_DEVICE = 100  # CUDA_ERROR_NO_DEVICE: what the stand-in driver answers


@pytest.fixture
def stand_in_driver(monkeypatch, cpu_device):
    """The ctypes hot calls answer "no device" (on this machine they were never loaded)."""
    for attr in ("launch", "add_kernel", "node_set", "exec_set", "update", "launch_kernel",
                 "instantiate"):
        monkeypatch.setattr(fast._f, attr, lambda *args: _NO_DEVICE)


def _params(fn) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _call(fn, params, values: dict):
    """Call ``fn`` with ``values`` by parameter name (positional-only ones by position)."""
    args, kwargs = [], {}
    for p in params:
        if p.name not in values:
            continue
        if p.kind is p.POSITIONAL_ONLY:
            args.append(values[p.name])
        else:
            kwargs[p.name] = values[p.name]
    return fn(*args, **kwargs)


def _check(label, fn, params, values: dict) -> None:
    """Call; fail on a bare exception (``label``: a str, or a function making it)."""
    try:
        _call(fn, params, values)
    except pcg.PyCudaGraphError:
        pass
    except OSError:  # a path that is not there
        pass
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - what the fuzz is looking for
        where = traceback.extract_tb(exc.__traceback__)[-1]
        label = label() if callable(label) else label
        pytest.fail(f"{label} raised a bare {type(exc).__name__} at {where.filename}:"
                    f"{where.lineno}: {exc}")


def _binds(fn, kwargs: dict) -> bool:
    """Whether ``fn`` can be called with ``kwargs`` (Python's own binding, not a value check)."""
    if fn is None:
        return False
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError:
        return False
    return True


def _base_values(z, params) -> dict:
    """A plausible value for every required parameter (defaults stay unset)."""
    return {p.name: good_value(z, p.name) for p in params if p.default is p.empty}


def _label(key, name, values) -> str:
    shown = ", ".join(f"{k}={v!r}"[:40] for k, v in values.items())
    return f"{'pcg' if key == 'pcg' else key}.{name}({shown})"


@pytest.mark.parametrize("key, name", TARGETS, ids=[f"{k}.{n}" for k, n in TARGETS])
def test_sweep_each_parameter_with_each_wrong_value(stand_in_driver, key, name):
    z = zoo()
    params = _params(resolve(z, key, name))
    if not params:
        fn = resolve(z, key, name)
        _check(f"{key}.{name}()", fn, [], {})
        return
    for target in params:
        z = zoo()  # fresh objects for each parameter (a call may close or change one)
        fn = resolve(z, key, name)
        for wrong in WRONG_VALUES:
            values = _base_values(z, params)
            values[target.name] = wrong
            _check(lambda: _label(key, name, values), fn, params, values)


WIDE = st.one_of(
    st.sampled_from(WRONG_VALUES),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=9),
    st.lists(st.integers(-2, 2**33), max_size=4).map(tuple),
    st.lists(st.one_of(st.none(), st.floats(), st.text(max_size=2)), max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=2), st.integers(-1, 3)), st.integers(), max_size=2),
    st.integers(-3, 3).map(np.int64),
    st.floats(width=32).map(np.float32),
)


@pytest.mark.parametrize("key, name", TARGETS, ids=[f"{k}.{n}" for k, n in TARGETS])
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_several_wrong_values_at_once(stand_in_driver, key, name, data):
    z = zoo()
    fn = resolve(z, key, name)
    params = _params(fn)
    if not params:
        return
    values = _base_values(z, params)
    for p in params:
        if data.draw(st.booleans(), label=f"fuzz {p.name}"):
            values[p.name] = data.draw(WIDE, label=p.name)
    _check(lambda: _label(key, name, values), fn, params, values)


SET_PARAMS_FIELDS = ["args", "grid", "block", "shared_mem", "dst", "src", "nbytes", "value",
                     "count", "element_size", "height", "pitch", "fn", "event", "graph", "ops",
                     "semaphores", "values", "priority", "nope"]
NODES = ["kernel_node", "MemcpyNode", "MemsetNode", "HostNode", "ChildGraphNode",
         "EventRecordNode", "EventWaitNode", "EmptyNode", "IfNode", "MemAllocNode",
         "BatchMemOpNode", "CapturedKernelNode", "ExtSemaphoreSignalNode"]


@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize("field", SET_PARAMS_FIELDS)
def test_set_params_fields_with_wrong_values(stand_in_driver, node, field):
    """``exe.set_params(node, **changes)`` and ``node.set_params(**changes)`` of every node type
    with each field given each wrong value."""
    z = zoo()
    n = z[node]
    for wrong in WRONG_VALUES:
        _check(f"exec.set_params({node}, {field}={wrong!r})",
               lambda: z["exec"].set_params(n, **{field: wrong}), [], {})
        if _binds(getattr(n, "set_params", None), {field: wrong}):
            _check(f"{node}.set_params({field}={wrong!r})",
                   lambda: n.set_params(**{field: wrong}), [], {})


def test_the_sweep_covers_the_public_api():
    """The fuzz reaches what a user calls: every builder, the exec's updates, the buffers."""
    names = {f"{k}.{n}" for k, n in TARGETS}
    for must in ("graph.add_kernel", "graph.add_memcpy", "graph.instantiate", "exec.set_arg",
                 "exec.set_params", "exec.rebind", "exec.update", "exec.launch",
                 "kernel.launch", "kernel.pack_args", "buffer.copy_to", "pcg.device_pointer",
                 "pcg.host_pointer", "pcg.Stream", "pcg.DeviceBuffer", "module.get_kernel",
                 "program.compile", "pcg.BucketedGraphs", "pcg.capture"):
        assert must in names, must
    assert len(TARGETS) > 150 and not math.isnan(len(TARGETS))
