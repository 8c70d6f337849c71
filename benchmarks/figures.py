"""What is measured: the figures (table rows), the groups ``--only`` selects, the contestants
(table columns), and the targets judged per run.

A figure of kind ``K`` with argument ``arg`` is measured by each contestant's ``r_K(arg)``
(``common.Peer``) and by the C++ floor's request ``floor``. ``contest`` figures decide
"ahead": pycudagraph against every peer, by the median over rounds of pcg / peer. The
``driver`` column is the bare driver call pycudagraph makes (``bare.c``), for the split
"pcg X = driver Y + Z of pycudagraph"; it is no peer.
"""

from __future__ import annotations

from dataclasses import dataclass

from .argsets import COUNTS


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    group: str
    kind: str | None  # the r_<kind> method; None for figures measured otherwise (mlp, tp, derived)
    arg: int = 0
    floor: str | None = None  # the floor.cu request, or None
    unit: str = "us"
    contest: bool = True  # counts for "ahead of every peer"
    floor_target: float | None = None  # pcg / floor must be <= this in every run
    #: rounds of this figure per ``--rounds``: more for figures whose round is one call of
    #: about a millisecond that moves by several percent from round to round (the median
    #: ratio over 11 such rounds moves by 2-3% from run to run)
    round_factor: int = 1


def _n_figures() -> list:
    out = []
    for n in COUNTS:
        out.append(Figure(f"eager_{n}", f"eager launch, {n} args", "eager", "eager", n,
                          f"eager {n}", floor_target={3: 1.2, 30: 1.35}.get(n)))
    for n in COUNTS:
        out.append(Figure(f"set_arg_{n}", f"exec 1-arg update, {n}-arg kernel", "set_arg",
                          "set_arg", n, f"set_arg {n}", floor_target=1.3))
    for n in COUNTS:
        out.append(Figure(f"set_all_{n}", f"exec all-arg update, {n} args", "set_all",
                          "set_all", n, f"set_all {n}", floor_target=1.3))
    for n in COUNTS:
        out.append(Figure(f"build_{n}", f"build per kernel node, {n} args", "build", "build", n,
                          f"build {n}", floor_target=2.5))
    return out


FIGURES = (
    *[Figure(f"held_launch_K{k}", f"held launch, K={k}", "held_launch", "held", k, f"held {k}",
             floor_target=1.2) for k in (1, 100, 1000)],
    *_n_figures(),
    Figure("instantiate_per_node", "instantiate per node (1000)", "instantiate", "instantiate",
           floor="instantiate", floor_target=1.1, round_factor=8),
    Figure("exec_update_per_node", "whole-graph exec update per node", "instantiate", "update",
           floor="update", floor_target=1.1, round_factor=8),
    Figure("recapture_instantiate_1000", "capture 1000 launches + instantiate", "recapture",
           "capture", floor="capture", floor_target=1.2),
    Figure("update_vs_recapture", "CuPy recapture+inst / this 1-arg update", "derived", None,
           unit="x", contest=False),
    Figure("gpu_per_node", "GPU time per node (K=1000 chain)", "gpu_per_node", "gpu_per_node",
           floor="gpu_per_node", contest=False),
    Figure("mlp_eager_iter", "MLP eager, per iteration", "mlp", None, contest=False),
    Figure("mlp_graph_iter", "MLP graph replay, per iteration", "mlp", None, contest=False),
    Figure("mlp_gpu_iter", "MLP GPU-only, per iteration", "mlp", None, contest=False),
    Figure("mlp_graph_over_gpu", "MLP graph replay / GPU-only", "mlp", None, unit="x",
           contest=False),
    Figure("tp_eager_p50", "TP MLP step, 2 GPUs, eager p50", "tp", None, contest=False),
    Figure("tp_eager_p99", "TP MLP step, 2 GPUs, eager p99", "tp", None, contest=False),
    Figure("tp_graph_p50", "TP MLP step, 2 GPUs, graph p50", "tp", None, contest=False),
    Figure("tp_graph_p99", "TP MLP step, 2 GPUs, graph p99", "tp", None, contest=False),
)
BY_KEY = {f.key: f for f in FIGURES}
CONTESTS = tuple(f for f in FIGURES if f.contest)

#: Names ``--only`` accepts: these groups, or any figure key (selects its group).
GROUPS = ("held_launch", "eager", "set_arg", "set_all", "build", "instantiate", "recapture",
          "gpu_per_node", "mlp", "tp")

#: Table columns: (key, header, module, class). "floor" is the C++ program, "driver" the bare
#: driver call pycudagraph makes (no peer), "pcg" pycudagraph.
PEERS = (
    ("floor", "C++ floor", "floor", "FloorPeer"),
    ("driver", "driver call", "peers_driver", "DriverPeer"),
    ("raw", "raw cuda.bindings", "peers_raw", "RawPeer"),
    ("cudacore", "cuda.core", "peers_cudacore", "CudaCorePeer"),
    ("cupy", "CuPy", "peers_cupy", "CupyPeer"),
    ("torch", "PyTorch*", "peers_torch", "TorchPeer"),
    ("pcg", "pycudagraph", "peers_pcg", "PcgPeer"),
)
PEER_KEYS = tuple(p[0] for p in PEERS)
#: The contestants pycudagraph must be ahead of.
RIVALS = ("raw", "cudacore", "cupy", "torch")
#: The order they are set up in (pcg before driver, which borrows its objects; torch last:
#: its import and allocator are the heaviest).
SETUP_ORDER = ("pcg", "driver", "raw", "cudacore", "cupy", "torch", "floor")

TORCH_NOTE = ("* PyTorch's graph nodes are x.add_(1) kernels on a 1-element tensor, not empty "
              "kernels; it launches no kernel of our own, so its eager, update and build "
              "cells are n/a.")


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
            out.update({"set_arg", "recapture"})
        else:
            raise ValueError(f"unknown figure {name!r}; choose from {', '.join(GROUPS)} "
                             f"or a figure key ({', '.join(BY_KEY)})")
    return out
