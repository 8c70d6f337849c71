"""PyTorch and CuPy work in conditional bodies (a ``while_`` loop with no host sync per pass,
a CuPy ``switch``, an if inside a while, a pycudagraph kernel in a PyTorch body), PyTorch
work on ``cap.fork`` streams, and ``pcg.diff`` / ``exe.apply`` between two captures of a
PyTorch model. Each check of ``tests/support/framework_checks.py`` runs in its own child
process; a missing framework skips it."""

import pytest

from tests.support.watchdog import run_snippet

pytestmark = pytest.mark.gpu

CHECKS = ["torch_while_halving", "cupy_switch", "torch_nested_if_in_while",
          "pcg_kernel_in_torch_body", "torch_fork", "torch_apply"]


@pytest.mark.parametrize("name", CHECKS)
def test_framework_check(name):
    out = run_snippet(f"from tests.support.framework_checks import run\nrun({name!r})", timeout=300)
    if out.kind == "ok" and "SKIPPED" in out.output:
        pytest.skip(out.output.strip().splitlines()[-1])
    assert out.kind == "ok" and f"PASSED {name}" in out.output, str(out)
