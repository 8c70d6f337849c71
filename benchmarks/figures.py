"""What is measured: the figures (table rows), the groups ``--only`` selects, the peers
(table columns), the tasks that fill the cells, and the targets judged from them."""

from __future__ import annotations

from dataclasses import dataclass

from .common import Cell, fmt, na, ok


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    group: str
    unit: str = "us"
    floor_key: str | None = None  # key in floor.cu's JSON


FIGURES = (
    Figure("held_launch_K1", "held launch, K=1", "held_launch", floor_key="held_launch_K1"),
    Figure("held_launch_K100", "held launch, K=100", "held_launch", floor_key="held_launch_K100"),
    Figure("held_launch_K1000", "held launch, K=1000", "held_launch", floor_key="held_launch_K1000"),
    Figure("exec_set_arg", "exec 1-arg update (set_arg / raw tuple)", "exec_set_arg",
           floor_key="exec_set_params_3args"),
    Figure("exec_set_arg_alt", "  alt path (set_params / raw prepacked)", "exec_set_arg",
           floor_key="exec_set_params_3args"),
    Figure("build_per_node", "build per kernel node (3 args, 1000)", "build", floor_key="build_per_node"),
    Figure("instantiate_per_node", "instantiate per node (1000)", "build",
           floor_key="instantiate_per_node"),
    Figure("exec_update_per_node", "whole-graph exec update per node", "build",
           floor_key="exec_update_per_node"),
    Figure("recapture_instantiate_1000", "capture 1000 launches + instantiate", "recapture",
           floor_key="recapture_instantiate_1000"),
    Figure("update_vs_recapture", "CuPy recapture+inst / this 1-arg update", "derived", unit="x"),
    Figure("gpu_per_node", "GPU time per node (K=1000 chain)", "gpu_per_node", floor_key="gpu_per_node"),
    Figure("eager_launch", "eager launch per kernel (held)", "eager_launch", floor_key="eager_launch"),
    Figure("mlp_eager_iter", "MLP eager, per iteration", "mlp"),
    Figure("mlp_graph_iter", "MLP graph replay, per iteration", "mlp"),
    Figure("mlp_gpu_iter", "MLP GPU-only, per iteration", "mlp"),
    Figure("mlp_graph_over_gpu", "MLP graph replay / GPU-only", "mlp", unit="x"),
    Figure("tp_eager_p50", "TP MLP step, 2 GPUs, eager p50", "tp"),
    Figure("tp_eager_p99", "TP MLP step, 2 GPUs, eager p99", "tp"),
    Figure("tp_graph_p50", "TP MLP step, 2 GPUs, graph p50", "tp"),
    Figure("tp_graph_p99", "TP MLP step, 2 GPUs, graph p99", "tp"),
)
BY_KEY = {f.key: f for f in FIGURES}

#: Names ``--only`` accepts: these groups, or any figure key (selects its group).
GROUPS = ("floor", "held_launch", "exec_set_arg", "build", "recapture", "gpu_per_node",
          "eager_launch", "mlp", "tp")

#: Table columns: (key, header, module, class). "floor" is the C++ program.
PEERS = (
    ("floor", "C++ floor", None, None),
    ("raw", "raw cuda.bindings", "peers_raw", "RawPeer"),
    ("cudacore", "cuda.core", "peers_cudacore", "CudaCorePeer"),
    ("cupy", "CuPy", "peers_cupy", "CupyPeer"),
    ("torch", "PyTorch*", "peers_torch", "TorchPeer"),
    ("pcg", "pycudagraph", "peers_pcg", "PcgPeer"),
)
PEER_KEYS = tuple(p[0] for p in PEERS)
#: The order peers run in (torch last: its import and allocator are the heaviest).
RUN_ORDER = ("raw", "pcg", "cudacore", "cupy", "torch")

TORCH_NOTE = ("* PyTorch's graph nodes are x.add_(1) kernels on a 1-element tensor, not empty "
              "kernels; its eager launch is one x.add_(1).")

#: (group, method, kwargs, figure keys it fills)
TASKS = (
    ("held_launch", "held_launch", {"k": 1}, ("held_launch_K1",)),
    ("held_launch", "held_launch", {"k": 100}, ("held_launch_K100",)),
    ("held_launch", "held_launch", {"k": 1000}, ("held_launch_K1000",)),
    ("exec_set_arg", "exec_set_arg", {}, ("exec_set_arg", "exec_set_arg_alt")),
    ("build", "build", {}, ("build_per_node", "instantiate_per_node", "exec_update_per_node")),
    ("recapture", "recapture", {}, ("recapture_instantiate_1000",)),
    ("gpu_per_node", "gpu_per_node", {}, ("gpu_per_node",)),
    ("eager_launch", "eager_launch", {}, ("eager_launch",)),
    ("mlp", "mlp", {}, ("mlp_eager_iter", "mlp_graph_iter", "mlp_gpu_iter", "mlp_graph_over_gpu")),
    ("tp", "tp_step", {}, ("tp_eager_p50", "tp_eager_p99", "tp_graph_p50", "tp_graph_p99")),
)


def parse_only(text: str | None) -> set[str]:
    """Groups selected by ``--only``; raises ValueError naming what is unknown."""
    if not text:
        return set(GROUPS)
    out = set()
    for name in (t.strip() for t in text.split(",")):
        if not name:
            continue
        if name in GROUPS:
            out.add(name)
        elif name in BY_KEY and BY_KEY[name].group in GROUPS:
            out.add(BY_KEY[name].group)
        elif name in BY_KEY:  # a derived figure: needs its inputs
            out.update({"exec_set_arg", "recapture"})
        else:
            raise ValueError(f"unknown figure {name!r}; choose from {', '.join(GROUPS)} "
                             f"or a figure key ({', '.join(BY_KEY)})")
    return out


def fill_derived(results: dict) -> None:
    """update_vs_recapture = CuPy recapture+instantiate / each peer's one-arg update."""
    fig = results.setdefault("update_vs_recapture", {})
    cupy = results.get("recapture_instantiate_1000", {}).get("cupy")
    for peer in PEER_KEYS:
        if peer == "floor":
            fig[peer] = na("the floor does no Python-level update")
            continue
        upd = results.get("exec_set_arg", {}).get(peer)
        if cupy is None or cupy.status != "ok":
            fig[peer] = na("needs CuPy's recapture figure")
        elif upd is None or upd.status != "ok" or not upd.value:
            fig[peer] = na("no one-arg update figure")
        else:
            fig[peer] = ok(cupy.value / upd.value, f"{fmt(cupy.value)} us / {fmt(upd.value)} us")


# ----------------------------------------------------------------------------------
# Targets


def _val(results, fig, peer):
    c: Cell | None = results.get(fig, {}).get(peer)
    return c.value if c is not None and c.status == "ok" else None


def _judge(name: str, checks: list) -> dict:
    """``checks``: (text, lhs, op, rhs) with rhs already scaled; None means unknown."""
    parts, verdicts = [], []
    for text, lhs, op, rhs in checks:
        if lhs is None or rhs is None:
            parts.append(f"{text}: n/a")
            continue
        good = lhs <= rhs if op == "<=" else lhs >= rhs
        verdicts.append(good)
        parts.append(f"{text}: {fmt(lhs)} {op} {fmt(rhs)} {'ok' if good else 'NO'}")
    if not verdicts:
        status = "n/a"
    elif all(verdicts):
        status = "PASS" if len(verdicts) == len(checks) else "PASS (partial)"
    else:
        status = "MISS"
    return {"target": name, "status": status, "detail": "; ".join(parts)}


def evaluate_targets(results: dict) -> list[dict]:
    v = lambda fig, peer: _val(results, fig, peer)  # noqa: E731
    scaled = lambda x, f: None if x is None else x * f  # noqa: E731
    out = []
    for k in (1, 100, 1000):
        fig = f"held_launch_K{k}"
        out.append(_judge(f"held launch K={k}: pcg <= raw and <= CuPy", [
            ("pcg vs raw", v(fig, "pcg"), "<=", v(fig, "raw")),
            ("pcg vs CuPy", v(fig, "pcg"), "<=", v(fig, "cupy")),
        ]))
    out.append(_judge("one-arg update <= 2.5x C++ floor and <= 0.5x cuda.core", [
        ("pcg vs 2.5x floor", v("exec_set_arg", "pcg"), "<=", scaled(v("exec_set_arg", "floor"), 2.5)),
        ("pcg vs 0.5x cuda.core", v("exec_set_arg", "pcg"), "<=", scaled(v("exec_set_arg", "cudacore"), 0.5)),
    ]))
    out.append(_judge("build per node <= 0.8x raw tuple and <= 0.5x cuda.core", [
        ("pcg vs 0.8x raw", v("build_per_node", "pcg"), "<=", scaled(v("build_per_node", "raw"), 0.8)),
        ("pcg vs 0.5x cuda.core", v("build_per_node", "pcg"), "<=",
         scaled(v("build_per_node", "cudacore"), 0.5)),
    ]))
    out.append(_judge("1-arg update in a 1000-node graph >= 1000x faster than CuPy recapture", [
        ("CuPy recapture / pcg set_arg", v("update_vs_recapture", "pcg"), ">=", 1000.0),
    ]))
    out.append(_judge("demo MLP graph replay per iteration <= 1.15x its GPU-only time", [
        ("replay / GPU-only", v("mlp_graph_over_gpu", "pcg"), "<=", 1.15),
    ]))
    out.append(_judge("demo MLP GPU-only per iteration <= PyTorch's (cuBLAS) on the same GPU", [
        ("pcg vs PyTorch", v("mlp_gpu_iter", "pcg"), "<=", v("mlp_gpu_iter", "torch")),
    ]))
    return out
