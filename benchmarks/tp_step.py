"""The tensor-parallel MLP step on 2 GPUs: eager vs graph replay, p50 / p99 per step.

Runs ``examples/multi_gpu_tp_mlp.py`` the way users run it, one process per GPU under
``python -m torch.distributed.run --standalone --nproc_per_node=2`` (and, with
``--single``, also as one process driving both GPUs), and reads rank 0's JSON. Each step is
timed on the host from its first launch to its synchronized result: two
``linear_bias_relu`` launches and one ``ncclAllReduce`` per rank (eager) or one
``cudaGraphLaunch`` (graph). The step is checked against numpy before it is timed.

``python -m benchmarks.tp_step [--steps N] [--single]`` prints its own table; the suite's
group ``tp`` (``python -m benchmarks --only tp``) fills the rows ``tp_*`` of the
pycudagraph column. Needs 2 GPUs, PyTorch (for the launcher) and nccl4py or CuPy's NCCL;
otherwise the cells read n/a with the reason. NVLink multicast stays off
(``NCCL_NVLS_ENABLE=0`` in the children's environment).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import REPO, NotSupported, ok

EXAMPLE = REPO / "examples" / "multi_gpu_tp_mlp.py"
FIGURES = ("tp_eager_p50", "tp_eager_p99", "tp_graph_p50", "tp_graph_p99")


def child_env() -> dict:
    env = dict(os.environ)
    env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + old if old else "")
    return env


def _gpu_count() -> int:
    import pycudagraph as pcg
    return pcg.device_count()


def run_example(steps: int, single: bool = False, timeout: float = 120.0) -> dict:
    """Run the example (two processes, or one with ``single``); rank 0's figures as a dict.

    Raises NotSupported with the reason when it cannot run here.
    """
    n = _gpu_count()
    if n < 2:
        raise NotSupported(f"needs 2 GPUs, this machine has {n}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tp.json"
        script = [str(EXAMPLE), "--steps", str(steps), "--json", str(out)]
        if single:
            cmd = [sys.executable] + script
        else:
            if importlib.util.find_spec("torch") is None:
                raise NotSupported("the launcher (python -m torch.distributed.run) needs PyTorch")
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node=2"] + script
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            if not out.exists():
                raise
            # Measured and written, then stuck in teardown: keep the figures, say so.
            fig = json.loads(out.read_text())
            fig["stdout"] = (exc.stdout or b"").decode(errors="replace") if isinstance(
                exc.stdout, bytes) else (exc.stdout or "")
            fig["note"] = f"the run did not exit within {timeout:.0f} s after writing its figures"
            return fig
        text = proc.stdout + proc.stderr
        skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
        if proc.returncode == 0 and skipped:
            raise NotSupported(skipped[0].removeprefix("SKIPPED: "))
        if proc.returncode != 0 or not out.exists():
            tail = "\n".join(text.strip().splitlines()[-15:])
            raise RuntimeError(f"{EXAMPLE.name} exited {proc.returncode}: {tail}")
        fig = json.loads(out.read_text())
        fig["stdout"] = proc.stdout
        return fig


def cells(steps: int) -> dict:
    """The suite's cells for the ``tp`` group (pycudagraph column)."""
    fig = run_example(steps)
    note = f"{fig['mode']}, {fig['nccl']}, {fig['steps']} steps"
    return {"tp_eager_p50": ok(fig["eager_p50_us"], note), "tp_eager_p99": ok(fig["eager_p99_us"]),
            "tp_graph_p50": ok(fig["graph_p50_us"], f"rel err vs numpy {fig['rel_err']:.1e}"),
            "tp_graph_p99": ok(fig["graph_p99_us"])}





def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tp_step", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000, help="timed steps per variant (default 2000)")
    p.add_argument("--single", action="store_true", help="also run one process driving both GPUs")
    args = p.parse_args(argv)
    rows = []
    for single in ((False, True) if args.single else (False,)):
        try:
            fig = run_example(args.steps, single=single)
        except NotSupported as exc:
            print(f"n/a: {exc}")
            return 0
        print(fig.pop("stdout").rstrip())
        rows.append(fig)
    print()
    print("| TP MLP step, 2 GPUs | eager p50 | eager p99 | graph p50 | graph p99 | graph/eager p50 |")
    print("|---|---|---|---|---|---|")
    for f in rows:
        print(f"| {f['mode']} | {f['eager_p50_us']:.1f} | {f['eager_p99_us']:.1f} | "
              f"{f['graph_p50_us']:.1f} | {f['graph_p99_us']:.1f} | "
              f"{f['graph_p50_us'] / f['eager_p50_us']:.2f}x |")
    print("(microseconds per step, host clock from the first launch to the synchronized result)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
