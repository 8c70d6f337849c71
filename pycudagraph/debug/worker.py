"""The caller's side of a child process: start it, ask it, wait with a time limit, stop it.

A :class:`Worker` runs a command (by default ``python -m pycudagraph.debug.child``) with
one extra argument, the file descriptor it answers on: one JSON line per command written
to its standard input. Its standard output and error go to a log file, so a child that
prints (a framework's warnings, a resolver's messages) cannot garble its answers, and the
log's tail can be shown when it fails. :meth:`Worker.ask` never waits longer than it is
told: a child that does not answer in time is killed (it is in a session of its own), one
that exits without answering is reported with its exit status. No CUDA call here.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Worker", "child_command", "child_env", "exit_text"]


def child_command() -> list:
    """The command that starts :mod:`pycudagraph.debug.child` with this interpreter."""
    return [sys.executable, "-m", "pycudagraph.debug.child"]


def child_env() -> dict:
    """This process's environment, with the folder pycudagraph is imported from first on
    ``PYTHONPATH`` (the child imports the same package)."""
    env = dict(os.environ)
    home = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONFAULTHANDLER", "1")
    return env


def exit_text(code: int | None) -> str:
    """An exit status in words: ``exit code 3``, ``killed by SIGSEGV``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Worker:
    """One child process answering JSON commands (see the module docstring).

    Parameters
    ----------
    log : path
        Where the child's standard output and error go (appended).
    command : list of str, optional
        The command to run; the answer descriptor is appended. Default:
        :func:`child_command`.
    """

    def __init__(self, log, command=None, env=None, cwd=None):
        self.log = Path(log)
        read, write = os.pipe()
        with open(self.log, "ab") as out:
            try:
                self.proc = subprocess.Popen(
                    list(command or child_command()) + [str(write)], stdin=subprocess.PIPE,
                    stdout=out, stderr=subprocess.STDOUT, pass_fds=(write,),
                    env=env if env is not None else child_env(), cwd=cwd,
                    start_new_session=True)
            except BaseException:
                os.close(read)
                os.close(write)
                raise
        os.close(write)
        self.fd = read
        self.pending = b""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, msg: dict, timeout: float) -> dict:
        """Send ``msg`` and wait at most ``timeout`` seconds for the answer: the child's
        JSON object, ``{"timeout": seconds}`` (the child is then killed) or ``{"exited":
        status}`` (it ended without answering)."""
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return {"exited": self._reap(5.0)}
        return self.answer(timeout)

    def answer(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready = select.select([self.fd], [], [], max(left, 0.0))[0] if left > 0 else []
            if not ready:
                self.kill()
                return {"timeout": timeout}
            data = os.read(self.fd, 65536)
            if not data:
                return {"exited": self._reap(10.0)}
            self.pending += data
        line, self.pending = self.pending.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return {"setup_error": f"the child answered {line[:200]!r}, not JSON"}

    def _reap(self, wait: float) -> int | None:
        try:
            return self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def kill(self) -> None:
        """Stop the child and what it started (its session), and wait for it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        """Ask the child to leave (end of its input), then stop it if it has not within
        a few seconds; close the pipes. Idempotent."""
        if self.fd < 0:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self.kill()
        os.close(self.fd)
        self.fd = -1

    def log_tail(self, chars: int = 2000) -> str:
        """The end of what the child printed ("" when nothing)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return text[-chars:].strip()
