"""Shared pieces of the benchmark suite: paths, the result :class:`Cell`, number
formatting, :class:`Settings` (repeat counts) and the :class:`Peer` base class.

The CUDA side lives in ``cudaenv.py`` (GPU probe, shared raw state, spin kernel) and the
timing loops in ``timing.py``. Nothing CUDA is imported at module level, so
``python -m benchmarks --help`` works anywhere.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "kernels"
HELPERS_CU = KERNELS / "helpers.cu"
MLP_CU = KERNELS / "mlp.cu"
FLOOR_CU = Path(__file__).resolve().parent / "floor.cu"

US_PER_NS = 1e-3


class NotSupported(Exception):
    """A peer has no API for a figure, or its library is missing: the cell reads n/a."""


class CudaCallError(RuntimeError):
    """A raw ``cuda.bindings`` call made by the suite itself failed."""


@dataclass
class Cell:
    """One peer's result for one figure."""

    value: float | None = None
    status: str = "ok"  # "ok" | "n/a" | "error"
    note: str = ""

    def to_json(self) -> dict:
        out = {"status": self.status, "value": self.value}
        if self.note:
            out["note"] = self.note
        return out

    def short(self) -> str:
        if self.status == "ok":
            return fmt(self.value)
        if self.status == "n/a":
            return "n/a"
        return "error"

    def describe(self) -> str:
        text = self.short() if self.status == "ok" else self.status
        if self.status != "ok" and self.note:
            text += f": {self.note}"
        elif self.note:
            text += f"  ({self.note})"
        return text


def ok(value: float, note: str = "") -> Cell:
    return Cell(float(value), "ok", note)


def na(reason: str) -> Cell:
    return Cell(None, "n/a", reason)


def error_cell(exc: BaseException) -> Cell:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Cell(None, "error", f"{type(exc).__name__}: {text}"[:400])


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a >= 10000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def median(values) -> float:
    return float(statistics.median(values))


# ----------------------------------------------------------------------------------
# Settings


@dataclass
class Settings:
    """Sizes of one round of each figure, and the rounds per figure; ``quick`` trades
    precision for time. ``floor.cu`` is told the same sizes (:meth:`floor_sizes`)."""

    quick: bool = False
    rounds: int = 11  # rounds per figure, each contestant measured once per round
    spin_ms: float = 20.0  # the spin kernel that keeps the GPU busy under held launches
    held_per_spin: dict = field(default_factory=lambda: {1: 20, 100: 20, 1000: 10})
    eager_batch: int = 200  # launches per eager round
    calls: int = 1000  # calls per one-argument / all-argument update round
    nodes: int = 1000  # nodes per build / instantiate / update round
    captured: int = 1000  # launches per capture round
    gpu_launches: int = 20
    mlp_iters: int = 2000
    mlp_repeats: int = 5

    @classmethod
    def make(cls, quick: bool, rounds: int | None = None) -> "Settings":
        s = cls(quick=quick)
        if quick:
            s.rounds = 5
            s.calls = 300
            s.eager_batch = 100
            s.mlp_iters = 300
            s.mlp_repeats = 2
        if rounds:
            s.rounds = rounds
        return s

    def floor_sizes(self) -> str:
        """The ``sizes`` request of ``floor.cu``."""
        h = self.held_per_spin
        return (f"sizes {int(self.spin_ms)} {self.eager_batch} {self.calls} {self.nodes} "
                f"{self.captured} {h[1]} {h[100]} {h[1000]} {self.gpu_launches}")


now = time.perf_counter_ns


def elapsed_us(t0_ns: int) -> float:
    return (time.perf_counter_ns() - t0_ns) * US_PER_NS


@dataclass
class Entry:
    """One contestant's rounds of one figure: ``fn()`` measures one round and returns
    microseconds (per call, per node, or per capture, as the figure says); ``close()``
    drops what the rounds needed."""

    fn: object
    close: object = None
    note: str = ""


class Peer:
    """Base of one contestant. A figure of kind ``K`` (``held``, ``eager``, ``set_arg``,
    ``set_all``, ``build``, ``instantiate``, ``update``, ``capture``, ``gpu_per_node``) is
    measured by the method ``r_K(arg)`` returning an :class:`Entry`; a missing method means
    n/a, with the reason in ``unsupported[K]``."""

    key = ""
    label = ""
    unsupported: dict = {}

    def __init__(self, env, settings: Settings):
        self.env = env
        self.settings = settings

    def setup(self) -> None:
        """Import the library and make streams and kernels; raise NotSupported for n/a."""

    def close(self) -> None:
        """Drop everything made (the process keeps running the other peers)."""
