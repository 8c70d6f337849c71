"""The head-to-head engine: every contestant of a figure measured in alternating rounds, and
what is judged from the rounds.

In each round every contestant measures once (``Entry.fn``), in the order of one row of a
balanced Latin square (Williams' design, :func:`orders`): over a cycle of rows every
contestant goes in each place equally often and right after each rival equally often. What
one round leaves behind (the C++ floor's process filling the CPU caches with its own work,
another library's freed graphs) then falls on every contestant alike; in an order that only
turned by one place each round, each contestant followed the same two rivals every time. A
first round warms up and is not kept. A contestant whose round raises is out of that figure
(the error is kept). From the rounds:

* each contestant's figure: the median of its rounds;
* per rival, the ratio pycudagraph / rival of each round, its median and spread (min, max,
  quartiles): "ahead" means a median ratio <= 1 against every rival measured;
* against the C++ floor the same ratio, judged against the figure's ``floor_target``;
* against the bare driver call pycudagraph makes: pcg = driver + the rest, per round.
"""

from __future__ import annotations

import statistics

from .figures import RIVALS
from .timing import gc_paused


def orders(n: int) -> list[list[int]]:
    """The rows of a Williams design for ``n`` contestants: ``n`` rows for an even ``n``,
    ``2n`` (each row also reversed) for an odd one. Each row holds ``0 .. n-1`` once; over
    all rows each one is in each place equally often and each ordered pair ``(a, b)`` is
    adjacent, ``a`` right before ``b``, equally often."""
    if n < 1:
        return [[]]
    base, low, high = [0], 1, n - 1  # 0, 1, n-1, 2, n-2, ...: every difference once
    while len(base) < n:
        base.append(low)
        low += 1
        if len(base) < n:
            base.append(high)
            high -= 1
    rows = [[(b + i) % n for b in base] for i in range(n)]
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


def run_contest(entries: dict, rounds: int) -> tuple[dict, dict]:
    """``(values, errors)``: ``values[key]`` the ``rounds`` kept values of each contestant
    (None where it was out), ``errors[key]`` the exception that put it out. Round ``r``
    goes in the order of row ``r`` of :func:`orders` (cyclically)."""
    keys = list(entries)
    values = {k: [None] * rounds for k in keys}
    errors: dict = {}
    rows = orders(len(keys))
    with gc_paused():
        for r in range(rounds + 1):
            order = [keys[i] for i in rows[r % len(rows)]]
            for k in order:
                if k in errors:
                    continue
                try:
                    v = float(entries[k].fn())
                except Exception as exc:  # noqa: BLE001 - the contestant is out, the rest go on
                    errors[k] = exc
                    continue
                if r:
                    values[k][r - 1] = v
    return values, errors


def _quartiles(xs: list) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def spread(xs: list) -> dict | None:
    """median, min, max, quartiles and count of the numbers in ``xs`` (Nones skipped)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    q1, q3 = _quartiles(xs)
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "q1": q1, "q3": q3,
            "n": len(xs)}


def ratios(a: list, b: list) -> dict | None:
    """The spread of ``a[i] / b[i]`` over the rounds both have."""
    return spread([x / y for x, y in zip(a, b) if x is not None and y])


def judge(fig, values: dict) -> dict:
    """What one run says of one figure: ratios of pcg to each rival and to the floor, whether
    pcg is ahead, whether it meets the floor target, and the split against the driver."""
    pcg = values.get("pcg")
    out = {"ratios": {}, "ahead": None, "floor_ok": None, "split": None}
    if not pcg or all(v is None for v in pcg):
        return out
    for key, vals in values.items():
        if key != "pcg" and vals is not None:
            r = ratios(pcg, vals)
            if r is not None:
                out["ratios"][key] = r
    rivals = [k for k in RIVALS if k in out["ratios"]]
    if fig.contest and rivals:
        out["ahead"] = all(out["ratios"][k]["median"] <= 1.0 for k in rivals)
        worst = max(rivals, key=lambda k: out["ratios"][k]["median"])
        out["worst"] = {"rival": worst, "ratio": out["ratios"][worst]["median"]}
    floor = out["ratios"].get("floor")
    if fig.floor_target is not None and floor is not None:
        out["floor_ok"] = floor["median"] <= fig.floor_target
    driver = values.get("driver")
    if driver:
        rest = spread([p - d for p, d in zip(pcg, driver) if p is not None and d is not None])
        if rest is not None:
            out["split"] = {"pcg": spread(pcg)["median"], "driver": spread(driver)["median"],
                            "rest": rest["median"], "rest_min": rest["min"],
                            "rest_max": rest["max"]}
    return out


def tally(runs: list[dict], figures) -> list[dict]:
    """Per figure over several runs' results (``run["figures"][key]``): in how many pcg was
    ahead of every rival, met the floor target, and the median ratios run by run."""
    out = []
    for fig in figures:
        per = [r.get("figures", {}).get(fig.key) for r in runs]
        judged = [p["judged"] for p in per if p and p.get("judged")]
        aheads = [j["ahead"] for j in judged if j.get("ahead") is not None]
        floors = [j["floor_ok"] for j in judged if j.get("floor_ok") is not None]
        row = {"figure": fig.key, "label": fig.label, "runs": len(runs),
               "ahead": sum(1 for a in aheads if a), "ahead_judged": len(aheads),
               "floor_ok": sum(1 for f in floors if f), "floor_judged": len(floors),
               "worst": [j.get("worst") for j in judged],
               "floor": [j["ratios"].get("floor", {}).get("median") for j in judged],
               "split": [j.get("split") for j in judged]}
        if row["ahead_judged"] or row["floor_judged"] or any(row["split"]):
            out.append(row)
    return out
