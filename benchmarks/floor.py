"""The C++ floor as a contestant: ``benchmarks/floor.cu`` (with ``floor_args.cuh``, its
argument sets, and ``kernels/helpers.cu``, its kernels), built with nvcc once into a cache folder, runs as a child process for the whole run and measures one round per request, so
its rounds alternate with the Python contestants' like theirs do (it idles between
requests: the GPU is never shared while a round is timed)."""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import subprocess
from pathlib import Path

from .bare import cache_dir
from .common import FLOOR_CU, HELPERS_CU, Entry, NotSupported, Peer

#: How long one request may take before the floor is declared stuck (seconds).
TIMEOUT = 120.0


def build(arch: str, progress=print, nvcc: str | None = None) -> Path:
    """The floor's executable for ``arch``, built once per source (cached); raises
    NotSupported without nvcc, RuntimeError when it fails."""
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc is None:
        raise NotSupported("nvcc is not on PATH, so the C++ floor was not built")
    sources = b"".join(p.read_bytes() for p in (FLOOR_CU, FLOOR_CU.parent / "floor_args.cuh",
                                                  HELPERS_CU))
    digest = hashlib.sha1(sources + arch.encode()).hexdigest()[:12]
    exe = Path(cache_dir()) / f"floor_{digest}"
    if exe.exists():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    progress(f"[floor] building {FLOOR_CU.name} with {nvcc} for {arch} ...")
    errors = []
    for flag in (f"-arch={arch}", "-arch=native"):
        tmp = exe.with_name(exe.name + f".{os.getpid()}.tmp")
        run = subprocess.run([nvcc, "-O2", flag, str(FLOOR_CU), "-o", str(tmp)],
                             capture_output=True, text=True, timeout=600)
        if run.returncode == 0:
            os.replace(tmp, exe)
            return exe
        errors.append(f"{flag}: {(run.stderr or run.stdout).strip()[-300:]}")
    raise RuntimeError("nvcc could not build floor.cu: " + " | ".join(errors))


class FloorProcess:
    """The running floor: ``ask(line)`` sends one request and returns its answer line."""

    def __init__(self, command: list[str]):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        first = self._line()
        if first != "ready":
            self.close()
            raise RuntimeError(f"the floor did not start: {first}")

    def _line(self) -> str:
        out = self.proc.stdout
        ready, _, _ = select.select([out], [], [], TIMEOUT)
        if not ready:
            raise RuntimeError(f"the floor gave no answer in {TIMEOUT:.0f} s")
        line = out.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError(f"the floor exited ({self.proc.poll()}): {err.strip()[-300:]}")
        return line.strip()

    def ask(self, request: str) -> str:
        self.proc.stdin.write(request + "\n")
        self.proc.stdin.flush()
        return self._line()

    def value(self, request: str) -> float:
        answer = self.ask(request)
        if answer.startswith("error"):
            raise RuntimeError(f"floor: {answer[6:]}")
        return float(answer)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class FloorPeer(Peer):
    key = "floor"
    label = "C++ floor"

    def __init__(self, env, settings, command: list[str] | None = None):
        super().__init__(env, settings)
        self.command = command  # default: the floor built for env.arch

    def setup(self) -> None:
        command = self.command or [str(build(self.env.arch))]
        self.proc = FloorProcess(command)
        answer = self.proc.ask(self.settings.floor_sizes())
        if answer != "ok":
            raise RuntimeError(f"floor: {answer}")

    def entry(self, request: str) -> Entry:
        return Entry(lambda: self.proc.value(request), note="floor.cu, runtime API")

    def info(self) -> str:
        return self.proc.ask("info") if hasattr(self, "proc") else ""

    def close(self) -> None:
        if hasattr(self, "proc"):
            self.proc.close()
