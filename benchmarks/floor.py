"""The C++ floor: build ``benchmarks/floor.cu`` with nvcc in a temporary folder, run it,
and read the one JSON object it prints."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from .common import FLOOR_CU, NotSupported


def _build(nvcc: str, arch: str, exe: Path) -> None:
    errors = []
    for flag in (f"-arch={arch}", "-arch=native"):
        run = subprocess.run([nvcc, "-O2", flag, str(FLOOR_CU), "-o", str(exe)],
                             capture_output=True, text=True, timeout=600)
        if run.returncode == 0:
            return
        errors.append(f"{flag}: {(run.stderr or run.stdout).strip()[-300:]}")
    raise RuntimeError("nvcc could not build floor.cu: " + " | ".join(errors))


def run_floor(arch: str, progress=print) -> dict:
    """The floor's figures (microseconds), keyed as floor.cu prints them.

    Raises NotSupported when nvcc is not on PATH, RuntimeError when it fails.
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise NotSupported("nvcc is not on PATH, so the C++ floor was not built")
    with tempfile.TemporaryDirectory(prefix="pcg-floor-") as tmp:
        exe = Path(tmp) / "floor"
        progress(f"[floor] building {FLOOR_CU.name} with {nvcc} for {arch} ...")
        _build(nvcc, arch, exe)
        progress("[floor] running ...")
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError(f"floor exited {run.returncode}: {(run.stderr or run.stdout).strip()[-400:]}")
        lines = [ln for ln in run.stdout.splitlines() if ln.strip().startswith("{")]
        if not lines:
            raise RuntimeError(f"floor printed no JSON: {run.stdout.strip()[-300:]}")
        return json.loads(lines[-1])
