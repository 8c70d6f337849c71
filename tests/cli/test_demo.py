"""The demo: the model and one-sentence exits without a GPU, kernels that compile and a
split rule that obeys the kernel's size rules (CPU); every mode runs and matches its
float64 reference (GPU, each in its own process)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pycudagraph as pcg
from pycudagraph.cli._model_data import MEASURED
from pycudagraph.cli.demo_mlp import SIZES, SPLITK_MAX_KC, allowed_splits, choose_splits

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


def test_model_is_labelled_and_uses_the_shipped_figures():
    out = run("--model", "--iters", "100")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("MODEL (not a measurement on this machine)")
    assert f"measured on {MEASURED['gpu']} ({MEASURED['when']}" in text
    m = MEASURED
    cases = ((3, m["mlp_gpu_ms_per_iter"]), (m["decode_kernels"], m["decode_gpu_ms_per_step"]))
    for k, compute in cases:
        eager = 100 * (k * m["eager_launch_us"] / 1000 + compute)
        graph = 100 * (m["graph_launch_us"] / 1000 + compute)
        assert re.search(rf"eager = N x .* = +{eager:.2f} ms", text), (eager, text)
        assert f"speedup {eager / graph:.2f}x" in text


def test_model_data_says_where_it_was_measured():
    for key in ("gpu", "when", "versions", "how"):
        assert MEASURED[key] and "PENDING" not in MEASURED[key], key
    assert MEASURED["graph_launch_us"] < MEASURED["eager_launch_us"]


@pytest.mark.skipif(HAS_TORCH, reason="PyTorch is installed here")
def test_torch_mode_without_torch_skips_with_one_sentence():
    out = run("--torch")
    assert out.returncode == 0 and out.stderr == ""
    want = "demo --torch skipped: PyTorch is not installed (pip install torch)."
    assert out.stdout.strip() == want


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
    assert (tmp_path / "mlp_graph.dot").read_text().count("linear_splitk") == 3
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
