"""The demo: the model, refusals and one-sentence exits without a GPU, the verdict lines, kernels that compile and a
split rule that obeys the kernel's size rules (CPU); every mode runs and matches its
float64 reference (GPU, each in its own process)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pycudagraph as pcg
from pycudagraph.cli._model_data import ASSUMED, MEASURED
from pycudagraph.cli.demo_common import headline, verdict
from pycudagraph.cli.demo_mlp import (DEMO_LAYERS, SIZES, SPLITK_MAX_KC, allowed_splits,
                                      choose_splits)

ROOT = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run(*args, timeout=400):
    return subprocess.run([sys.executable, "-m", "pycudagraph", "demo", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def no_gpu_only():
    try:
        pcg.Stream().close()
    except pcg.CudaNotAvailableError:
        return
    pytest.skip("this machine has a GPU; the no-GPU message is not shown here")


def checked_lines(text):
    """Table rows and per-kernel lines: those ending in ok or MISMATCH (and a note)."""
    return [line for line in text.splitlines()
            if re.search(r"\s(ok|MISMATCH)(  \(.*\))?$", line)]


@pytest.mark.parametrize("mode", [(), ("--decode",)], ids=["mlp", "decode"])
def test_demo_without_gpu_says_one_sentence(mode):
    no_gpu_only()
    out = run(*mode)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no NVIDIA GPU" in lines[0] and "--model" in lines[0]


def test_model_is_labelled_and_states_what_it_assumes():
    out = run("--model", "--iters", "100")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("MODEL (not a measurement on this machine)")
    assert f"Measured on {MEASURED['gpu']} ({MEASURED['when']}" in text
    assert f"ASSUMED: each of the demo's small kernels does {ASSUMED['small_kernel_work_us']} us" \
        in text
    m = MEASURED
    # the wide MLP: the model from measured figures agrees with the measurement (about 1x)
    k, gpu = m["wide_mlp_kernels"], m["wide_mlp_gpu_us"]
    eager = 100 * max(k * m["eager_launch_us"], gpu) / 1000
    graph = 100 * max(m["graph_launch_us"], gpu) / 1000
    assert re.search(rf"eager = +{eager:.2f} ms +graph = +{graph:.2f} ms +modelled speedup "
                     rf"{eager / graph:.2f}x \(measured: ", text), text
    measured = m["wide_mlp_eager_us"] / m["wide_mlp_graph_us"]
    assert abs(eager / graph - measured) < 0.2 and f"{measured:.2f}x)" in text


def test_model_lines_follow_the_figures(monkeypatch):
    from pycudagraph.cli import demo
    monkeypatch.setitem(demo.ASSUMED, "small_kernel_work_us", 10.0)  # GPU-bound: no gain
    text = "\n".join(demo.model_lines(10))
    assert text.count("modelled speedup 1.00x") == 3 and "does 10.0 us of work" in text


def test_model_data_says_where_it_was_measured():
    for key in ("gpu", "when", "versions", "how"):
        assert MEASURED[key] and "PENDING" not in MEASURED[key], key
    assert MEASURED["graph_launch_us"] < MEASURED["eager_launch_us"]
    results = (ROOT / "docs" / "results" / "head_to_head_h100.md").read_text()
    assert f"| eager launch, 3 args | 3.14 | 3.06 | 3.68 | 3.90 | 5.24 | n/a | " \
           f"{MEASURED['eager_launch_us']} |" in results
    assert f"| MLP graph replay, per iteration | - | - | - | - | - | 42.2 | " \
           f"{MEASURED['wide_mlp_graph_us']} |" in results


@pytest.mark.skipif(HAS_TORCH, reason="PyTorch is installed here")
def test_torch_mode_without_torch_fails_with_one_sentence():
    out = run("--torch")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == ("pycudagraph demo --torch needs PyTorch, which is not "
                                  "installed here (pip install torch).")


@pytest.mark.parametrize("mode", ["--model", "--decode", "--torch"])
def test_batch_is_refused_where_it_does_not_apply(mode):
    out = run(mode, "--batch", "4")
    assert out.returncode == 2 and "--batch applies to the default demo only" in out.stderr
    assert "Traceback" not in out.stderr


def test_batch_over_the_kernels_limit_is_refused():
    out = run("--batch", "17")
    assert out.returncode == 2 and "1 to 16 rows, got 17" in out.stderr


def test_small_mlp_refuses_a_batch_it_cannot_do():
    from pycudagraph.cli.demo_mlp import MLP
    with pytest.raises(ValueError, match="1 to 16 rows, got batch 17"):
        MLP(17, "small")


def test_help_is_plain_text():
    for args in (("demo", "--help"), ("show", "--help"), ("--help",)):
        out = subprocess.run([sys.executable, "-m", "pycudagraph", *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "``" not in out.stdout and ":mod:" not in out.stdout and ":func:" not in out.stdout
        assert "seed" not in out.stdout


def test_verdict_says_nothing_at_two_times_or_more():
    assert verdict(0.090, 0.030, 0.029, "iteration") is None


def test_verdict_names_a_gpu_too_slow_for_the_point():
    line = verdict(0.0208, 0.0189, 0.0189, "iteration")  # the GPU needs what eager takes
    assert line.startswith("NOTE: this GPU is too slow for the demo to show the point (1.10x)")
    assert "18.9 us of GPU time per iteration" in line and "\n" not in line


def test_verdict_names_a_gpu_too_fast_for_the_point():
    line = verdict(0.050, 0.040, 0.005, "step")  # tiny GPU work, slow replay
    assert line.startswith("NOTE: this GPU is too fast for the demo to show the point (1.25x)")
    assert "5.0 us per step" in line and "40.0 us" in line


def test_headline_names_the_gpu_and_the_ratio():
    line = headline("NVIDIA H100 80GB HBM3", 0.090, 0.030, 24, "iteration")
    assert line == ("NVIDIA H100 80GB HBM3: graph replay 3.00x faster than eager (24 kernels "
                    "per iteration: 90.0 us -> 30.0 us per iteration)")


def test_help_names_every_mode():
    out = run("--help")
    assert out.returncode == 0
    for flag in ("--decode", "--torch", "--model", "--out", "--iters"):
        assert flag in out.stdout


@pytest.mark.parametrize("options", [(), ("-DSPLITK_WARPS=4",)], ids=["8warps", "4warps"])
def test_demo_kernels_compile(options):
    mlp = pcg.Module.from_file("mlp.cu", options=options, arch="sm_90")
    fast = mlp["linear_splitk"]
    assert [p.name for p in fast.params] == ["x", "w", "b", "y", "partial", "counters", "batch",
                                            "in_features", "out_features", "relu"]
    assert fast.params[5].ctype == "unsigned int*" and len(mlp.cubin) > 1000
    dec = pcg.Module.from_file("decode.cu", arch="sm_90")
    assert set(dec.kernel_names()) == {"rmsnorm", "matvec", "add", "silu"}
    assert dec["rmsnorm"].params[4].ctype == "float"
    small = pcg.Module.from_file("mlp_small.cu", arch="sm_90")["linear_warp"]
    assert [p.name for p in small.params] == ["x", "wt", "b", "y", "batch", "in_features",
                                             "out_features", "relu"]


def test_oversized_slice_is_refused_at_compile_time():
    with pytest.raises(pcg.CompileError, match="must fit"):
        pcg.Module.from_file("mlp.cu", options=("-DSPLITK_WARPS=16",), arch="sm_90")


LAYERS = list(zip(SIZES[:-1], SIZES[1:])) + [(96, 64), (4096, 32)]


@pytest.mark.parametrize("fan_in,fan_out", LAYERS)
@pytest.mark.parametrize("batch", [1, 32, 100])
def test_choose_splits_obeys_the_kernel_size_rules(fan_in, fan_out, batch):
    for warps in (4, 8):
        for target in (1, 128, 10_000):
            s = choose_splits(fan_in, fan_out, batch, target, warps)
            assert fan_in % (4 * warps * s) == 0 and fan_in // s <= SPLITK_MAX_KC
            blocks = fan_out // 32 * -(-batch // 32) * s
            assert blocks >= target or s == allowed_splits(fan_in, warps)[-1]
            assert s == allowed_splits(fan_in, warps)[0] or blocks // 2 < target


def test_choose_splits_refuses_sizes_the_kernel_cannot_do():
    with pytest.raises(ValueError, match="out_features % 32"):
        choose_splits(512, 100, 32)
    with pytest.raises(ValueError, match="cannot split in_features=100"):
        choose_splits(100, 64, 32)


# ----------------------------------------------------------------------------------
# GPU: each mode end to end, in its own process


@pytest.mark.gpu
def test_demo_runs_and_matches(tmp_path):
    out = run("--iters", "200", "--out", str(tmp_path), "--trace")
    assert out.returncode == 0, out.stdout + out.stderr
    rows = checked_lines(out.stdout)
    assert len(rows) == 5 and "MISMATCH" not in out.stdout, out.stdout
    assert "cuGraphAddKernelNode(&n0" in out.stdout
    assert (tmp_path / "mlp_graph.dot").read_text().count("linear_warp") == DEMO_LAYERS
    assert re.search(r"^.+: graph replay \d+\.\d\dx faster than eager \(24 kernels", out.stdout,
                     re.M), out.stdout
    assert (tmp_path / "mlp_demo.png").exists() == HAS_MATPLOTLIB
    assert f"output folder: {tmp_path}" in out.stdout
    assert "model figures: eager_launch_us=" in out.stdout


@pytest.mark.gpu
def test_linear_splitk_matches_on_other_shapes():
    code = ("import pycudagraph as pcg\nfrom pycudagraph.cli.demo_mlp import check_shapes\n"
            "for name, c in check_shapes(pcg.Stream()):\n"
            "    print(name, c.rel, 'ok' if c.ok else 'MISMATCH')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 15 and all(line.endswith(" ok") for line in lines), out.stdout


@pytest.mark.gpu
def test_demo_decode_runs_and_matches(tmp_path):
    out = run("--decode", "--iters", "10", "--out", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(checked_lines(out.stdout)) == 6  # 4 kernels and 2 table rows
    assert "MISMATCH" not in out.stdout
    assert "200 kernel nodes in the captured graph" in out.stdout
    assert "launch gap closed:" in out.stdout
    assert re.search(r"^.+: graph replay \d+\.\d\dx faster than eager \(200 kernels", out.stdout,
                     re.M), out.stdout
    dot = (tmp_path / "decode_graph.dot").read_text().splitlines()
    assert sum("matvec" in line for line in dot) == 75


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_demo_torch_runs_and_matches(tmp_path):
    out = run("--torch", "--iters", "200", "--out", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Results match" in out.stdout and "MISMATCH" not in out.stdout
    assert len(checked_lines(out.stdout)) == 3 and "=== Comparison" in out.stdout
    assert (tmp_path / "torch_graph.dot").exists()
