"""The multi-GPU tooling that needs no GPU: the multicast guard (in this process and in
spawned ones), the layouts and their options, the exact values the examples check
against, nccl-tests' bus bandwidth, the benchmark's options, its tables and its reading
of nccl-tests, the skip wording, and ``tools/gpu_verify.sh multi``."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import tp_step
from tests.multi_gpu.gpu_counts import MULTICAST_OFF, ROOT, child_env, per_count, skip_reason

EXAMPLES = ROOT / "examples"
NAMES = ("multi_gpu_launch", "multi_gpu_nccl", "multi_gpu_tp_mlp", "multi_gpu_collectives",
         "multi_gpu_torch_tp")


@pytest.fixture(scope="module")
def ex():
    """The multi-GPU examples as modules (their import sets the multicast variables; this
    process gets its own values back afterwards)."""
    saved = {k: os.environ.get(k) for k in MULTICAST_OFF}
    sys.path.insert(0, str(EXAMPLES))
    try:
        return SimpleNamespace(**{n.removeprefix("multi_gpu_"): importlib.import_module(n)
                                  for n in NAMES})
    finally:
        sys.path.remove(str(EXAMPLES))
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _python(code: str, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(child_env(), **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLES), env["PYTHONPATH"]])
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


# The multicast guard ------------------------------------------------------------------

def test_guard_overrides_the_environment_on_import():
    on = {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0", "NVSHMEM_DISABLE_NVLS": "0"}
    proc = _python("import os, json, multi_gpu_launch; "
                   "print(json.dumps({k: os.environ[k] for k in multi_gpu_launch.MULTICAST_OFF}))", on)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == MULTICAST_OFF


def test_guard_reaches_spawned_processes():
    proc = _python("import os, multi_gpu_launch as m\n"
                   "os.environ['NCCL_NVLS_ENABLE'] = '1'  # changed after the import\n"
                   "print(sorted(m.spawn(m.report_multicast, 3, timeout=100)))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[(0, []), (1, []), (2, [])]"


def test_spawned_ranks_get_rank_zeros_nccl_id_through_the_mailbox():
    proc = _python("import multi_gpu_launch as m\n"
                   "from tests.multi_gpu.gpu_counts import share_id_probe\n"
                   "got = m.spawn(share_id_probe, 4, timeout=100)\n"
                   "print(sorted(a for a in got if a[0] == 'early'))\n"
                   "for a in sorted(a for a in got if a[0] == 'id'): print(a[:3], a[3] == bytes(range(128)))")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert lines[0] == "[('early', 1), ('early', 2), ('early', 3)]", proc.stdout
    assert lines[1:5] == [f"('id', {r}, '{r}') True" for r in range(4)], proc.stdout


def test_spawn_stops_the_others_and_names_the_failed_rank():
    proc = _python("import multi_gpu_launch as m\nm.spawn(m.report_multicast, 2, 'extra', timeout=100)")
    assert proc.returncode != 0
    assert "rank 0 of 2 exited 1" in proc.stderr or "rank 1 of 2 exited 1" in proc.stderr, proc.stderr


def test_require_multicast_off_names_what_is_on(ex):
    env = dict(MULTICAST_OFF)
    assert ex.launch.require_multicast_off(env).startswith("NVLink multicast off: NCCL_NVLS_ENABLE=0")
    env["NCCL_NVLS_ENABLE"] = "1"
    del env["NVSHMEM_DISABLE_NVLS"]
    assert ex.launch.multicast_left_on(env) == ["NCCL_NVLS_ENABLE=1", "NVSHMEM_DISABLE_NVLS=(unset)"]
    with pytest.raises(RuntimeError, match=r"NCCL_NVLS_ENABLE=1, NVSHMEM_DISABLE_NVLS=\(unset\)"):
        ex.launch.require_multicast_off(env)
    assert ex.launch.multicast_off(env) is env and not ex.launch.multicast_left_on(env)


def test_every_child_environment_has_multicast_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("NVSHMEM_DISABLE_NVLS", "0")
    for env in (tp_step.child_env(), child_env()):
        assert {k: env[k] for k in MULTICAST_OFF} == MULTICAST_OFF


def test_examples_load_the_guard_before_any_nccl_library():
    heavy = {"torch", "cupy", "nccl", "mpi4py"}
    for name in NAMES[1:]:
        tree = ast.parse((EXAMPLES / f"{name}.py").read_text())
        order = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                order.append(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                order += [a.name.split(".")[0] for a in node.names]
        assert "multi_gpu_launch" in order, name
        first = order.index("multi_gpu_launch")
        assert not heavy & set(order[:first]), f"{name} imports {heavy & set(order[:first])} first"
    tree = ast.parse((EXAMPLES / "multi_gpu_launch.py").read_text())
    calls = [i for i, n in enumerate(tree.body) if isinstance(n, ast.Expr)
             and ast.unparse(n) == "multicast_off()"]
    imports = [i for i, n in enumerate(tree.body) if isinstance(n, (ast.Import, ast.ImportFrom))
               and "pycudagraph" in ast.unparse(n)]
    assert calls and imports and calls[0] < imports[0]


def test_nothing_creates_a_multicast_object():
    """No code calls or looks up cuMulticastCreate (cuMulticast*, cudaMulticast*); prose
    may name it."""
    word = "Multicast"
    uses = (f"{word}Create(", f".cu{word}", f".cuda{word}", f'"cu{word}', f"'cu{word}")
    for top in ("pycudagraph", "examples", "benchmarks", "tools", "kernels"):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".c", ".cu", ".sh", ".h", ".cpp"}:
                text = path.read_text(errors="replace")
                assert not [u for u in uses if u in text], path


# Layouts and options ------------------------------------------------------------------

def test_plan_layout(ex):
    plan, Layout = ex.launch.plan_layout, ex.launch.Layout
    assert plan(None, None, None, 8) == Layout("one", 8)
    assert plan(4, None, None, 8) == Layout("one", 4)
    assert plan(8, None, None, 4).skip == "--gpus 8 needs 8 GPUs; this machine has 4"
    assert plan(None, None, None, 1).skip.startswith("one process driving several GPUs needs at least 2")
    assert plan(None, 4, None, 8) == Layout("spawn", 4)
    assert plan(None, 8, None, 2).skip == "--procs 8 needs 8 GPUs; this machine has 2"
    assert plan(None, None, (3, 4, 3), 4) == Layout("launched", 4)
    with pytest.raises(ValueError, match="launcher already started"):
        plan(2, None, (0, 2, 0), 2)


def test_layout_options_are_refused_with_reasons(ex, capsys):
    assert ex.nccl.parse_args(["--gpus", "4"]).gpus == 4
    assert ex.nccl.parse_args(["--procs", "8", "--steps", "10"]).procs == 8
    for bad, said in ((["--gpus", "1"], "at least 2 GPUs, got 1"), (["--procs", "x"], "not a whole number"),
                      (["--gpus", "2", "--procs", "2"], "not allowed with argument")):
        with pytest.raises(SystemExit):
            ex.tp_mlp.parse_args(bad)
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ex.torch_tp.parse_args(["--procs", "1"])
    assert ex.torch_tp.parse_args(["--procs", "4"]).procs == 4


def test_launch_env_reads_torchrun_and_mpi(ex, monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert ex.launch.launch_env() is None
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "5")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "8")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    assert ex.launch.launch_env() == (5, 8, 1)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert ex.launch.launch_env() == (2, 4, 2)
    args = ex.nccl.parse_args(["--gpus", "2"])
    with pytest.raises(SystemExit, match="usage error: --gpus / --procs choose a layout"):
        ex.launch.choose_layout(args)


def test_collectives_options(ex, capsys):
    a = ex.collectives.parse_args(["--sizes", "64K,4m,1G,4096", "--iters", "5", "--procs", "4"])
    assert a.sizes == (64 << 10, 4 << 20, 1 << 30, 4096) and a.iters == 5 and a.procs == 4
    for bad, said in ((["--sizes", "12Q"], "not a size: '12Q'"), (["--sizes", "0"], "must be > 0"),
                      (["--collectives", "all_to_all"], "unknown all_to_all"),
                      (["--iters", "0"], "--iters and --launches must be >= 1")):
        with pytest.raises(SystemExit):
            ex.collectives.parse_args(bad)
        assert said in capsys.readouterr().err


# Bus bandwidth and the exact values the examples check --------------------------------

def test_bus_bandwidth_is_nccl_tests_formula(ex):
    f = ex.collectives.bus_factor
    assert [f("all_reduce", n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]
    assert [f("all_gather", n) for n in (2, 4, 8)] == [0.5, 0.75, 0.875]
    assert f("reduce_scatter", 8) == f("all_gather", 8) and f("all_reduce", 1) == 0.0
    alg, bus = ex.collectives.bandwidth("all_reduce", 1 << 30, 0.01, 8)
    assert alg == pytest.approx(107.3741824) and bus == pytest.approx(alg * 1.75)
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        f("broadcast", 2)
    with pytest.raises(ValueError, match="seconds must be > 0"):
        ex.collectives.bandwidth("all_gather", 1, 0.0, 2)


@pytest.mark.parametrize("n", (2, 3, 4, 8))
def test_collective_expected_values_match_a_host_simulation(ex, n):
    c = ex.collectives
    for coll in ("all_reduce", "all_gather", "reduce_scatter"):
        send, recv, count, moved = c.counts(coll, 1 << 16, n)
        sends = [c.send_values(r, send) for r in range(n)]
        if coll == "all_reduce":
            results = [np.sum(sends, axis=0)] * n
        elif coll == "all_gather":
            results = [np.concatenate(sends)] * n
        else:
            total = np.sum(sends, axis=0)
            results = [total[r * recv:(r + 1) * recv] for r in range(n)]
        for r in range(n):
            assert np.array_equal(c.expected(coll, r, n, send, recv), results[r]), (coll, r)
        assert moved == 4 * max(send, recv) and moved <= 1 << 16 and count == (recv if coll != "all_gather" else send)


def test_nccl_step_expected_values_match_a_host_simulation(ex):
    m = ex.nccl
    for world in (2, 4, 8):
        step = 7
        i = np.arange(m.N)
        bufs = [((r + 1) * ((i % 97) + r) + step).astype(np.float32) for r in range(world)]
        s = np.sum(bufs, axis=0)  # all-reduce
        parts = [world * s[r * m.N // world:(r + 1) * m.N // world] for r in range(world)]
        assert np.array_equal(s + np.concatenate(parts), m.expected(world, step))
    assert float(m.expected(16, 1003).max()) < 2 ** 24  # every value exact in float32


@pytest.mark.parametrize("world", (2, 4, 8))
def test_tp_shards_sum_exactly_to_the_unsplit_mlp(ex, world):
    m = ex.tp_mlp
    x, w1, b1, w2, b2 = m.make_weights()
    ref = m.reference(x, w1, b1, w2, b2)
    assert np.abs(ref).max() < 2 ** 24 and np.array_equal(ref, np.round(ref))
    cols = m.D_FF // world
    partial = []
    for r in range(world):
        s = slice(r * cols, (r + 1) * cols)
        h = np.maximum(x @ w1[:, s] + b1[s], 0).astype(np.float32)
        partial.append((h @ w2[s, :] + (b2 if r == 0 else 0)).astype(np.float32))
    for order in (range(world), reversed(range(world))):
        acc = np.zeros_like(partial[0])
        for r in order:
            acc += partial[r]
        assert np.array_equal(acc, ref.astype(np.float32))


# The benchmark's options, tables and nccl-tests reading -------------------------------

def test_benchmark_options():
    assert tp_step.parse_counts("8,2,4,4") == (2, 4, 8)
    for bad in ("1", "2,x", ""):
        with pytest.raises(Exception, match="GPU count"):
            tp_step.parse_counts(bad)
    assert tp_step.parse_sizes("64k, 1M,128M") == ("64K", "1M", "128M")
    with pytest.raises(Exception, match="sizes are bytes"):
        tp_step.parse_sizes("1.5M")
    a = tp_step.parse_args([])
    assert a.gpus == (2, 4, 8) and a.layouts == ("procs", "one") and a.steps == 2000
    q = tp_step.parse_args(["--quick", "--gpus", "4", "--layouts", "one"])
    assert (q.steps, q.sizes, q.iters, q.gpus, q.layouts) == (300, ("1M", "64M"), 10, (4,), ("one",))
    for bad in (["--layouts", "threads"], ["--steps", "0"], ["--launcher", "mpirun"]):
        with pytest.raises(SystemExit):
            tp_step.parse_args(bad)


def test_layout_commands(monkeypatch):
    prefix, extra = tp_step._layout_args(4, "one", "auto")
    assert prefix == [sys.executable] and extra == ["--gpus", "4"]
    prefix, extra = tp_step._layout_args(8, "procs", "torchrun")
    assert prefix[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=8"]
    assert extra == []
    assert tp_step._layout_args(8, "procs", "spawn") == ([sys.executable], ["--procs", "8"])


def _tp_row(world, layout, eager, graph):
    return {"world": world, "layout": layout, "eager_p50_us": eager, "eager_p99_us": eager * 2,
            "graph_p50_us": graph, "graph_p99_us": graph + 5, "eager_launch_us_per_gpu": 12.0,
            "graph_launch_us_per_gpu": 1.5}


def test_step_table_marks_what_was_not_measured():
    rows = [_tp_row(2, "procs", 74.3, 51.5), _tp_row(2, "one", 92.9, 57.3),
            {"world": 4, "layout": "procs", "error": "failed: NCCL said no"}]
    text = tp_step.step_table(rows, (2, 4, 8), have=4)
    lines = text.splitlines()
    assert lines[0].startswith("| GPUs | layout | eager p50 |") and len(lines) == 2 + 6 + 1
    assert "| 2 | 1 process per GPU | 74.3 | 148.6 | 51.5 | 56.5 | 0.69x | 12.0 | 1.5 |" in lines
    assert "| 4 | 1 process per GPU | failed: NCCL said no |" + " – |" * 6 in lines
    assert "| 4 | 1 process, all GPUs | not run |" + " – |" * 6 in lines
    assert "| 8 | 1 process, all GPUs | not measured: this machine has 4 GPUs |" + " – |" * 6 in lines
    assert all(line.count("|") == 10 for line in lines[:-1])


def test_collective_table_with_nccl_tests_column():
    row = {"world": 2, "collective": "all_reduce", "bytes": 1 << 20, "eager_us": 20.0,
           "graph_us": 16.0, "eager_busbw": 52.4, "graph_busbw": 65.5}
    text = tp_step.collective_table([row], (2, 8), have=2, nccl_tests={(2, "all_reduce"): {1 << 20: 60.25}})
    lines = text.splitlines()
    assert "| 2 | all_reduce | 1 MiB | 20.0 | 16.0 | 52.40 | 65.50 | 1.25x | 60.25 |" in lines
    assert "| 8 | all | not measured: this machine has 2 GPUs |" + " – |" * 6 in lines
    assert all(line.count("|") == 10 for line in lines[:-1])
    assert tp_step.human_bytes(64 << 10) == "64 KiB" and tp_step.human_bytes(1536) == "1.5 KiB"


NCCL_TESTS_OUT = """\
# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1048576 step: 1048576(bytes) warmup iters: 5 iters: 20
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    27.51   38.12   66.71    N/A    27.02   38.81   67.91    N/A
   134217728      33554432     float     sum      -1    512.3  261.99  458.48    N/A    511.9  262.2   458.8    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 262.595
"""


def test_parse_nccl_tests_reads_out_of_place_busbw():
    assert tp_step.parse_nccl_tests(NCCL_TESTS_OUT) == {1048576: 66.71, 134217728: 458.48}
    assert tp_step.parse_nccl_tests("nothing here\n#  1 2 3") == {}


def test_benchmark_without_gpu_says_so(capsys):
    if tp_step._gpu_count():
        pytest.skip("this machine has a GPU")
    assert tp_step.main([]) == 0
    assert "n/a: no usable NVIDIA GPU here" in capsys.readouterr().out


# The skip wording and the verify script -----------------------------------------------

def test_counts_this_machine_lacks_skip_with_the_counts():
    params = per_count(have=2)
    assert [p.id for p in params] == ["2gpus", "4gpus", "8gpus"]
    assert skip_reason(4, 2) == "needs 4 GPUs; this machine has 2."
    marks = [p.marks[0] for p in params]
    assert [m.args[0] for m in marks] == [False, True, True]
    assert marks[2].kwargs["reason"] == "needs 8 GPUs; this machine has 2."


def test_gpu_verify_has_the_multi_modes():
    script = ROOT / "tools" / "gpu_verify.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    for mode in ("multi)", "multi-tests)", "multi-bench)"):
        assert f"\n{mode}" in text, mode
    for needed in ("tests/multi_gpu", "benchmarks.tp_step", "NCCL_NVLS_ENABLE=0",
                   "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1", '"$out/'):
        assert needed in text, needed
