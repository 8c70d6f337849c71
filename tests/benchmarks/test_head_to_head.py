"""The benchmark suite's head-to-head plumbing, on a CPU: the contest engine (alternating
rounds, a contestant that fails is out), the verdicts (ratios, ahead, floor target, the
split against the driver call), the summary over runs, the tables, the floor's protocol,
the kernels of 3/10/30 arguments in the three places they are written, and a whole run of
the runner with the driver stub as libcuda (pycudagraph, the bare driver calls, a rival, a
floor stand-in)."""

import json
import re
import sys
from collections import Counter

import pytest

from benchmarks import argsets, report
from benchmarks.__main__ import _strip
from benchmarks.common import REPO, Entry, Settings
from benchmarks.contest import judge, orders, run_contest, tally
from benchmarks.figures import BY_KEY, CONTESTS, FIGURES
from benchmarks.floor import FloorPeer, FloorProcess
from tests.support.bench_standins import FLOOR_SCRIPT, StubEnv
from tests.support.native_driver import both, run


def test_rounds_alternate_and_the_first_one_warms_up():
    seen = []
    entries = {k: Entry(lambda k=k: seen.append(k) or len(seen)) for k in "abc"}
    values, errors = run_contest(entries, rounds=4)
    assert not errors and all(len(v) == 4 and None not in v for v in values.values())
    rounds = [seen[i:i + 3] for i in range(0, 15, 3)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert [r[0] for r in rounds] != ["a"] * 5  # no one always goes first
    assert values["a"][0] == rounds[1].index("a") + 4  # round 0 (3 calls) is not kept


@pytest.mark.parametrize("n", range(1, 8))
def test_round_orders_are_balanced(n):
    rows = orders(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    places = Counter((x, i) for row in rows for i, x in enumerate(row))
    assert len(places) == n * n and len(set(places.values())) == 1  # each place equally often
    after = Counter((a, b) for row in rows for a, b in zip(row, row[1:]))
    assert len(after) == n * (n - 1) and len(set(after.values())) <= 1  # each rival alike


def test_each_contestant_follows_every_rival():
    # five contestants, as the instantiate figure has: none follows only its two neighbours
    seen = []
    entries = {k: Entry(lambda k=k: seen.append(k) or 1.0) for k in "abcde"}
    run_contest(entries, rounds=len(orders(5)) - 1)  # the warm-up round and one full cycle
    rounds = [seen[i:i + 5] for i in range(0, len(seen), 5)]
    before = {k: Counter(r[r.index(k) - 1] for r in rounds if r.index(k)) for k in "abcde"}
    assert all(set(before[k]) == set("abcde") - {k} for k in "abcde"), before
    assert all(len(set(c.values())) == 1 for c in before.values()), before


def test_a_contestant_that_raises_is_out_the_others_go_on():
    calls = []

    def bad():
        calls.append(1)
        raise RuntimeError("boom")

    values, errors = run_contest({"pcg": Entry(lambda: 2.0), "raw": Entry(bad)}, rounds=3)
    assert values["pcg"] == [2.0, 2.0, 2.0] and values["raw"] == [None] * 3
    assert len(calls) == 1 and str(errors["raw"]) == "boom"


def test_verdicts_of_one_figure():
    fig = BY_KEY["set_arg_3"]  # floor target 1.3
    values = {"pcg": [1.0, 1.2, 1.1], "raw": [2.0, 2.0, 2.2], "cudacore": [1.0, 1.0, 1.0],
              "floor": [1.0, 1.0, 1.0], "driver": [0.8, 0.9, 0.8]}
    j = judge(fig, values)
    assert j["ratios"]["raw"]["median"] == pytest.approx(0.5)  # 0.5, 0.6, 0.5
    assert j["ratios"]["cudacore"] == {"median": 1.1, "min": 1.0, "max": 1.2, "q1": 1.05,
                                       "q3": 1.15, "n": 3}
    assert j["ahead"] is False and j["worst"] == {"rival": "cudacore", "ratio": 1.1}
    assert j["floor_ok"] is True  # 1.1 <= 1.3
    assert j["split"]["driver"] == 0.8 and j["split"]["rest"] == pytest.approx(0.3)
    values["cudacore"] = [2.0, None, 2.0]  # a round it lacks is left out of the ratios
    j = judge(fig, values)
    assert j["ahead"] is True and j["ratios"]["cudacore"]["n"] == 2
    assert judge(BY_KEY["gpu_per_node"], values)["ahead"] is None  # no contest
    assert judge(fig, {"pcg": [None], "raw": [1.0]})["ratios"] == {}


def test_the_summary_counts_runs():
    fig = BY_KEY["held_launch_K1"]
    runs = []
    for cupy in (3.0, 3.0, 1.0):
        v = {"pcg": [2.0, 2.0], "cupy": [cupy, cupy], "floor": [1.9, 1.9], "driver": [1.5, 1.6]}
        runs.append({"figures": {fig.key: {"judged": judge(fig, v)}}})
    row, = tally(runs, CONTESTS)
    assert (row["ahead"], row["ahead_judged"], row["floor_ok"], row["floor_judged"]) == (2, 3, 3, 3)
    assert [w["ratio"] for w in row["worst"]] == pytest.approx([2 / 3, 2 / 3, 2.0])
    lines = report.summary_lines([row], 3) + report.summary_markdown([row], 3)
    assert any("ahead 2/3" in line for line in lines)
    assert any("| held launch, K=1 | 2/3 |" in line for line in lines)


def test_tables_render_from_a_runs_json():
    fig = BY_KEY["eager_30"]
    values = {"pcg": [5.0, 5.2], "raw": [9.0, 9.0], "floor": [3.0, 3.0], "driver": [3.5, 3.5]}
    figs = {fig.key: {"cells": {"pcg": {"status": "ok", "value": 5.1},
                                "torch": {"status": "n/a", "value": None},
                                "cupy": {"status": "error", "value": None, "note": "Boom: x"}},
                      "judged": judge(fig, values)}}
    figs = json.loads(json.dumps(figs))  # as read back from the file
    text = "\n".join(report.table_lines(figs) + report.h2h_lines(figs) + report.note_lines(figs))
    assert "eager launch, 30 args" in text and "5.10" in text and "n/a" in text
    assert "0.57 [0.56-0.58]" in text and "1.70 [1.67-1.73]" in text
    assert "<=1.35x MISS" in text and "5.10 = 3.50 + 1.60" in text
    assert "error  cupy" in text
    md = "\n".join(report.run_markdown(figs, "run1"))
    assert "| eager launch, 30 args | - | - | - | - | error | n/a | 5.10 |" in md
    assert "| **miss** |" not in md and "<= 1.35x: **miss**" in md


def test_options_kept_for_each_run():
    assert _strip(["--runs", "3", "--quick", "--out=x", "--only", "build"], ("--runs", "--out")) == [
        "--quick", "--only", "build"]


def test_floor_sizes_match_what_floor_cu_reads():
    text = (REPO / "benchmarks" / "floor.cu").read_text()
    start = text.index('if (req == "sizes")')
    reads = text[start:text.index(";", text.index("std::sscanf", start))]
    words = Settings().floor_sizes().split()
    assert words[0] == "sizes" and all(w.isdigit() for w in words[1:])
    assert reads.count("%d") == len(words) - 1 == 9 and "got == 9" in text


def test_the_kernels_of_3_10_30_arguments_agree_everywhere():
    assert '#include "../kernels/helpers.cu"' in (REPO / "benchmarks" / "floor_args.cuh").read_text()
    helpers = (REPO / "kernels" / "helpers.cu").read_text()
    floor = (REPO / "benchmarks" / "floor_args.cuh").read_text()
    kind = {"float*": "p", "float": "f", "int": "i", "long long": "q", "double": "d",
            "unsigned int": "u"}
    for n in argsets.COUNTS:
        name = argsets.name(n)
        sig = re.search(rf"void {name}\(([^)]*)\)", helpers).group(1)  # the floor's too
        assert " ".join(sig.split()) == argsets.signature(n), (name, sig)
        codes = "".join(kind[t] for t in argsets.ctypes_of(n))
        assert f'(const void*){name}, "{codes}")' in floor, (name, codes)
        assert len(argsets.values(n, [7])) == n and argsets.UPDATE_INDEX < n
        assert argsets.ctypes_of(n)[argsets.UPDATE_INDEX] == "float"


def test_the_floor_protocol():
    floor = FloorPeer(StubEnv(), Settings(), command=[sys.executable, "-c", FLOOR_SCRIPT])
    floor.setup()
    try:
        assert floor.entry("held 1").fn() == 0.5 and floor.info() == "stub floor"
        with pytest.raises(RuntimeError, match="floor: no build here"):
            floor.entry("build 3").fn()
    finally:
        floor.close()
    assert floor.proc.proc.poll() == 0
    with pytest.raises(RuntimeError, match="did not start"):
        FloorProcess([sys.executable, "-c", "print('nope')"])


def test_every_contest_figure_has_a_group_and_a_kind():
    assert {f.group for f in CONTESTS} <= {f.group for f in FIGURES}
    assert all(f.kind for f in CONTESTS) and len({f.key for f in FIGURES}) == len(FIGURES)


SMOKE = '''
    import json, sys, tempfile
    from pathlib import Path
    from benchmarks import report, suite
    from benchmarks.common import Settings
    from benchmarks.figures import BY_KEY, FIGURES
    from benchmarks.floor import FloorPeer
    from benchmarks.runner import make_peers, results_json, run_figures
    from tests.support.bench_standins import (FLOOR_SCRIPT, FixedPeer, StubDriverPeer, StubEnv,
                                              StubPcgPeer)

    stub.quiet()  # count calls only: the stub reads no argument values (kernels of 0-30 args)
    s = Settings.make(True, rounds=3)
    s.calls, s.nodes, s.eager_batch = 20, 30, 10
    s.held_per_spin = {1: 3, 100: 3, 1000: 2}
    env = StubEnv()
    pcg = StubPcgPeer(env, s)
    made = {"pcg": pcg, "driver": StubDriverPeer(env, s, pcg, library=stub.path),
            "raw": FixedPeer("raw", {k: 1e6 for k in ("held", "eager", "set_arg", "set_all",
                                                      "build", "instantiate", "update")}),
            "cupy": FixedPeer("cupy", {"held": 1e-6}),
            "floor": FloorPeer(env, s, command=[sys.executable, "-c", FLOOR_SCRIPT])}
    peers, failed = make_peers(env, s, list(made), print, True, made)
    assert not failed, failed
    groups = {"held_launch", "eager", "set_arg", "set_all", "build", "instantiate"}
    before = stub.total()
    results = run_figures(FIGURES, peers, s, groups, print, True)
    for api in ("cuGraphLaunch", "cuLaunchKernel", "cuGraphAddKernelNode",
                "cuGraphExecKernelNodeSetParams", "cuGraphInstantiateWithFlags",
                "cuGraphExecUpdate", "cuGraphCreate", "cuGraphDestroy", "cuGraphExecDestroy"):
        assert stub.calls(api) > 0, api
    figs = results_json(results, failed)
    for key in ("held_launch_K1", "eager_3", "eager_30", "set_arg_10", "set_all_30", "build_3",
                "instantiate_per_node", "exec_update_per_node"):
        cells, judged = figs[key]["cells"], figs[key]["judged"]
        assert cells["pcg"]["status"] == "ok" and cells["driver"]["status"] == "ok", (key, cells)
        n = 3 * BY_KEY[key].round_factor  # instantiate and update: more rounds
        assert cells["pcg"]["spread"]["n"] == n and len(figs[key]["rounds"]["pcg"]) == n
        assert set(judged["ratios"]) >= {"raw", "driver"}, judged
        assert judged["split"]["driver"] > 0, judged
        expected = False if key.startswith("held") else True  # CuPy's held rounds take 1e-6 us
        assert judged["ahead"] is expected, (key, judged)
        assert (judged["floor_ok"] is None) == (key.startswith("build")), judged
    assert figs["build_3"]["cells"]["floor"]["status"] == "error"
    assert "no build here" in figs["build_3"]["cells"]["floor"]["note"]
    assert figs["set_arg_3"]["cells"]["cupy"]["status"] == "n/a"
    out = Path(tempfile.mkdtemp())
    for name in ("run1", "run2"):
        report.write_json(out / f"{name}.json", {"meta": {"gpu": "stub"}, "figures": figs})
    lines = suite.summarize(out, ["run1", "run2"])
    assert any("set 1-arg" in l or "1-arg update, 10-arg kernel" in l for l in lines), lines
    summary = json.loads((out / "summary.json").read_text())
    row = next(r for r in summary["figures"] if r["figure"] == "set_arg_10")
    assert row["ahead"] == 2 and row["ahead_judged"] == 2
    assert "| pcg / contestant" in (out / "tables.md").read_text()
    for p in list(peers.values()):
        p.close()
'''


@both
def test_a_head_to_head_run_on_the_driver_stub(native):
    run(SMOKE, native)
