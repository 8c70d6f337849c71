"""Run a Python snippet in a child process with a time limit; tell a crash from an exception.

Risky misuse cases run here so that a segfault or a hang cannot take the test run down:
``run_snippet(code)`` returns an :class:`Outcome` whose ``kind`` is ``"ok"`` (exit 0),
``"exception"`` (a Python traceback, exit 1), ``"crash"`` (killed by a signal, or an exit
code that is neither) or ``"timeout"``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    kind: str
    returncode: int | None
    output: str

    @property
    def signal_name(self) -> str:
        if self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return ""

    def __str__(self) -> str:
        return f"{self.kind} (rc={self.returncode} {self.signal_name})\n{self.output[-3000:]}"


def run_snippet(code: str, timeout: float = 120.0) -> Outcome:
    """Run ``code`` with ``python -c`` (the repository on ``PYTHONPATH``, cwd the root)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONFAULTHANDLER"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        return Outcome("timeout", None, out.decode(errors="replace") if isinstance(out, bytes) else out)
    out = proc.stdout + proc.stderr
    rc = proc.returncode
    if rc == 0:
        kind = "ok"
    elif rc == 1 and "Traceback" in out:
        kind = "exception"
    else:
        kind = "crash"
    return Outcome(kind, rc, out)


def run_ok(code: str, timeout: float = 300.0) -> str:
    """``run_snippet(code)`` for a GPU check that prints ``OK`` when it passed, or a line
    with ``SKIP`` and the reason when a framework it needs is missing (the test skips with
    it); anything else fails the test with the child's output. Returns that output."""
    import pytest
    out = run_snippet(code, timeout=timeout)
    if out.kind == "ok" and "SKIP" in out.output:
        pytest.skip(out.output.strip())
    assert out.kind == "ok" and "OK" in out.output, str(out)
    return out.output
