"""What ``pcg.doctor`` reports: one :class:`Problem` per line of the user's code that made
calls breaking a capture, grouped from the calls the callbacks saw, and the
:class:`DoctorReport` that lists them as a table.

Grouping: every call of one line is one problem (a ``.cpu()`` is a copy and a stream
synchronization; a loop's ``.item()`` is one line, many times). ``count`` is how many times
the line broke (its most frequent call). The explanation comes from the line's text and its
calls' categories (:func:`pycudagraph.capture.breakers.explain`). No CUDA call here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..capture.breakers import explain
from ..capture.user_frames import Place

__all__ = ["Problem", "DoctorReport", "group_events"]


@dataclass
class Problem:
    """One line of the user's code whose calls would break a capture.

    Attributes
    ----------
    call : str
        The raw CUDA call(s) the line made that break a capture, comma-separated
        (``"cudaMemcpyAsync (pageable host memory), cudaStreamSynchronize"``).
    file, line : str, int
        Where: the first Python frame outside PyTorch, CuPy, pycudagraph and the standard
        library's plumbing (``""`` and 0 for a thread with no Python frame).
    what : str
        What the call does that a capture cannot hold.
    fix : str
        How to avoid it.
    count : int
        How many times the line broke a capture in the run.
    calls : dict
        ``{call: times}``, each call of the line.
    function, source, inner : str
        The function the line is in, its text, and the framework function it called into
        when Python frames show one (``torch.cuda.synchronize``).
    categories : list of str
        The kinds of break (keys of :data:`pycudagraph.capture.breakers.CATEGORIES`).
    """

    call: str
    file: str
    line: int
    what: str
    fix: str
    count: int
    calls: dict = field(default_factory=dict)
    function: str = ""
    source: str = ""
    inner: str = ""
    categories: list = field(default_factory=list)

    @property
    def where(self) -> str:
        """``file:line`` (the file relative to the working folder when inside it)."""
        if not self.file:
            return "(a thread with no Python frame)"
        return str(Place(self.file, self.line, self.function))

    def __str__(self) -> str:
        return f"{self.where}: {self.call}: {self.what}; fix: {self.fix}"


def group_events(events) -> list[Problem]:
    """Problems from ``events`` (each with ``place``, ``label``, ``category``; copies to
    pinned memory already left out), one per line, in the order lines first broke."""
    groups: dict = {}
    for ev in events:
        place = ev.place
        key = (place.file, place.line) if place is not None else ("", 0)
        g = groups.get(key)
        if g is None:
            g = groups[key] = (place, {}, [])
        g[1][ev.label] = g[1].get(ev.label, 0) + 1
        if ev.category not in g[2]:
            g[2].append(ev.category)
    out = []
    for (file, line), (place, calls, cats) in groups.items():
        source = place.source if place is not None else ""
        what, fix = explain(cats, source)
        out.append(Problem(", ".join(calls), file, line, what, fix, max(calls.values()),
                           dict(calls), place.function if place is not None else "", source,
                           place.inner if place is not None else "", list(cats)))
    return out


@dataclass
class DoctorReport:
    """What :func:`~pycudagraph.doctor` found.

    Attributes
    ----------
    problems : list of Problem
        One per line of code whose calls would break a capture, in the order they ran.
    calls : int
        CUDA API calls the observed run made (the driver calls a runtime call makes
        inside itself not counted).
    warmup : int
        Unobserved runs of ``fn`` before the observed one.
    seconds : float
        Wall time of the observed run, callbacks included.
    notes : list of str
        What the run could not check (launches whose parameters were not read, callback
        errors).
    """

    problems: list = field(default_factory=list)
    calls: int = 0
    warmup: int = 0
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No call of ``fn`` would break a capture."""
        return not self.problems

    def _run_text(self) -> str:
        warm = f" after {self.warmup} warm-up run(s)" if self.warmup else ", no warm-up"
        return (f"fn ran once under CUDA callbacks{warm}; {self.calls} CUDA call(s), "
                f"{self.seconds * 1e3:.1f} ms")

    def __str__(self) -> str:
        if self.ok:
            lines = [f"ok: no call in fn would break a capture ({self._run_text()})"]
        else:
            lines = [f"pcg.doctor: {len(self.problems)} line(s) in fn would break a capture "
                     f"({self._run_text()})"]
            wheres = [p.where for p in self.problems]
            width = max(len("where"), *(len(w) for w in wheres))
            lines.append(f"  #  {'where':<{width}}  times  calls")
            for i, (p, w) in enumerate(zip(self.problems, wheres), 1):
                lines.append(f"  {i:<2} {w:<{width}}  {p.count:>5}  {p.call}")
            for i, p in enumerate(self.problems, 1):
                lines.append("")
                head = f"`{p.source}`" if p.source else p.where
                ctx = [f"in {p.function}"] if p.function else []
                if p.inner:
                    ctx.append(f"calls {p.inner}")
                lines.append(f"  {i:<2} {head}" + (f"  ({', '.join(ctx)})" if ctx else ""))
                lines.append(f"     {p.what}")
                lines.append(f"     fix: {p.fix}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<DoctorReport ok={self.ok} problems={len(self.problems)} calls={self.calls}>"
