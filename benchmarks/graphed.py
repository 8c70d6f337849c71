"""``python -m benchmarks.graphed``: a graphed call next to what a PyTorch user would pick.

Three functions: a tiny one (``x * 2 + 1`` on 1024 floats: the call is all overhead), an
MLP (3 x (Linear 1024 -> 1024 + ReLU), batch 32) and GPT-2 (transformers ``GPT2Config``, 2
layers, 256 wide, random weights, 2 x 64 tokens; skipped without transformers). Each is
called, per column:

- eager PyTorch;
- ``torch.cuda.CUDAGraph.replay()`` on static inputs (captured by hand, no copy): the floor,
  every ratio is to it;
- the same replay after copying the input into the static input (``copy_``);
- ``torch.cuda.make_graphed_callables`` (copies the input in);
- ``torch.compile(mode="reduce-overhead")`` (CUDA graphs behind guards; copies inputs in);
- ``pcg.graphed``, the same input every call;
- ``pcg.graphed``, a new input address on every call (two inputs, alternating): the exec is
  rebound (``cuGraphExecKernelNodeSetParams`` per node that reads the input), nothing copied.

Every column but the static ones alternates between two inputs. A figure is the wall time
of ``--iters`` calls and one synchronize, over ``--iters``, the median of ``--repeats``;
microseconds per call, under ``torch.no_grad()``. Every contestant's result is checked
against eager first. ``--runs N`` measures the whole table N times in this one process
(everything is set up and compiled once) and then says, per run, whether ``pcg.graphed``
met its targets: the tiny function within 1.5x of the floor (same input) and 2.0x (new
address), the MLP and GPT-2 within 1.02x. Prints the GPU and versions first; exits 0 with
one sentence without PyTorch, 1 without a GPU.
"""

from __future__ import annotations

import argparse
import copy
import platform
import sys
import time

COLUMNS = ("eager", "torch replay (static)", "torch replay + copy in",
           "make_graphed_callables", "torch.compile reduce-overhead",
           "pcg.graphed same input", "pcg.graphed new address")
FLOOR = COLUMNS[1]
#: function -> (pcg column -> the most pcg / floor may be)
TARGETS = {"tiny": {COLUMNS[5]: 1.5, COLUMNS[6]: 2.0},
           "mlp": {COLUMNS[5]: 1.02, COLUMNS[6]: 1.02},
           "gpt2": {COLUMNS[5]: 1.02, COLUMNS[6]: 1.02}}


# --- the functions -------------------------------------------------------------------

def _tiny(torch):
    def tiny(x):
        return x * 2 + 1
    return "tiny: x * 2 + 1, 1024 floats", tiny, \
        [torch.randn(1024, device="cuda") for _ in range(2)], 1e-5


def _mlp(torch):
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda().eval().requires_grad_(False)
    return "MLP 3 x (1024 Linear + ReLU), batch 32", model, \
        [torch.randn(32, 1024, device="cuda") for _ in range(2)], 1e-4


def _gpt2(torch):
    import transformers
    config = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=128)

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.GPT2LMHeadModel(config)

        def forward(self, ids):
            return self.model(ids, use_cache=False).logits

    model = Logits().cuda().eval().requires_grad_(False)
    ids = [torch.randint(0, config.vocab_size, (2, 64), device="cuda") for _ in range(2)]
    return (f"GPT-2 (transformers {transformers.__version__}, 2 layers, 256 wide), "
            "2 x 64 tokens"), model, ids, 1e-3


FUNCTIONS = {"tiny": _tiny, "mlp": _mlp, "gpt2": _gpt2}


# --- the contestants: each returns call(i), having checked one result against eager -----

def _check(torch, got, want, tol, who):
    try:
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    except AssertionError as exc:
        raise RuntimeError(f"{who}: result differs from eager: {str(exc)[:200]}") from None


def _by_hand(torch, fn, xs):
    """A CUDA graph captured by hand on a static input (warm-up on a side stream first)."""
    static_x = xs[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            fn(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        static_y = fn(static_x)
    return g, static_x, static_y


def setup(torch, pcg, column, fn, xs, want, tol, first):
    """``call(i)`` of one contestant; ``first`` gets the seconds of its first call(s)."""
    if column == "eager":
        return lambda i: fn(xs[i & 1])
    if column in (COLUMNS[1], COLUMNS[2]):
        g, static_x, static_y = _by_hand(torch, fn, xs)
        static_x.copy_(xs[1])
        g.replay()
        _check(torch, static_y, want, tol, column)
        static_x.copy_(xs[0])
        replay = g.replay
        if column == COLUMNS[1]:
            return lambda i: replay()

        def copy_in(i):
            static_x.copy_(xs[i & 1])
            replay()
        return copy_in
    if column == "make_graphed_callables":
        target = copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn
        graphed = torch.cuda.make_graphed_callables(target, (xs[0].clone(),))
        with torch.no_grad():
            _check(torch, graphed(xs[1]), want, tol, column)
        return lambda i: graphed(xs[i & 1])
    if column == "torch.compile reduce-overhead":
        compiled = torch.compile(fn, mode="reduce-overhead")
        t0 = time.perf_counter()
        with torch.no_grad():
            for k in range(4):
                compiled(xs[k & 1])
            torch.cuda.synchronize()
            first["torch.compile warm-up"] = time.perf_counter() - t0
            _check(torch, compiled(xs[1]).clone(), want, tol, column)
        return lambda i: compiled(xs[i & 1])
    f = pcg.graphed(fn)
    t0 = time.perf_counter()
    f(xs[0])
    torch.cuda.synchronize()
    first["pcg.graphed first call"] = time.perf_counter() - t0
    f(xs[0])
    _check(torch, f(xs[1]).clone(), want, tol, column)
    x0 = xs[0]
    if column == "pcg.graphed same input":
        return lambda i: f(x0)
    return lambda i: f(xs[i & 1])


def _time(torch, call, iters: int, repeats: int) -> float:
    """Microseconds per call: the median over ``repeats`` of (``iters`` calls + one
    synchronize) / ``iters``."""
    out = []
    with torch.no_grad():
        for k in range(2):  # warm
            call(k)
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(iters):
                call(i)
            torch.cuda.synchronize()
            out.append((time.perf_counter() - t0) * 1e6 / iters)
    return sorted(out)[len(out) // 2]


def prepare(torch, pcg, name: str) -> dict:
    """One function's contestants, set up and checked: {"label", "calls", "errors", "first"}."""
    torch.manual_seed(0)
    label, fn, xs, tol = FUNCTIONS[name](torch)
    with torch.no_grad():
        want = fn(xs[1]).clone()
    calls, errors, first = {}, {}, {}
    for column in COLUMNS:
        try:
            calls[column] = setup(torch, pcg, column, fn, xs, want, tol, first)
        except Exception as exc:  # noqa: BLE001 - one cell says error, the table goes on
            errors[column] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return {"label": label, "calls": calls, "errors": errors, "first": first}


def measure(torch, prepared: dict, iters: int, repeats: int) -> dict:
    """{function: {column: us or None}} for one run of the table."""
    out = {}
    for name, p in prepared.items():
        row = {}
        for column in COLUMNS:
            call = p["calls"].get(column)
            row[column] = _time(torch, call, iters, repeats) if call is not None else None
        out[name] = row
    return out


# --- the report: plain functions of the figures ----------------------------------------

def ratios(row: dict) -> dict:
    """column -> figure / the floor's figure (None where either is missing)."""
    floor = row.get(FLOOR)
    return {c: (v / floor if v is not None and floor else None) for c, v in row.items()}


def table(run: dict, labels: dict) -> list[str]:
    """The Markdown table of one run: microseconds per call (ratio to the floor)."""
    lines = ["| function | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, row in run.items():
        r = ratios(row)
        cells = ["error" if row[c] is None else
                 f"{row[c]:.1f}" + ("" if r[c] is None else f" ({r[c]:.2f}x)") for c in COLUMNS]
        lines.append(f"| {labels.get(name, name)} | " + " | ".join(cells) + " |")
    return lines


def verdicts(runs: list) -> list[str]:
    """Per target: in how many runs pcg / floor met it, and the ratio of each run."""
    lines = []
    for name, targets in TARGETS.items():
        for column, most in targets.items():
            got = [ratios(run[name])[column] for run in runs if name in run]
            if not got:
                continue
            met = sum(1 for g in got if g is not None and g <= most)
            shown = ", ".join("error" if g is None else f"{g:.2f}" for g in got)
            lines.append(f"{name}, {column}: <= {most}x in {met} of {len(got)} runs ({shown})")
    return lines


def versions(torch, pcg) -> str:
    from pycudagraph._cuda import fast, versions as v
    try:
        import transformers
        tv = transformers.__version__
    except ImportError:
        tv = "not installed"
    return (f"GPU {torch.cuda.get_device_name()}; driver "
            f"{v.format_version(v.driver_version())}; Python {platform.python_version()}; "
            f"PyTorch {torch.__version__}; transformers {tv}; cuda-bindings "
            f"{v.BINDINGS_VERSION}; pycudagraph {pcg.__version__} ({fast.native_status()})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.graphed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1,
                        help="measure the whole table this many times in this process")
    parser.add_argument("--iters", type=int, default=300, help="calls per figure (300)")
    parser.add_argument("--repeats", type=int, default=5, help="figures per median (5)")
    parser.add_argument("--only", default="tiny,mlp,gpt2",
                        help="functions to measure, of tiny, mlp, gpt2")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("benchmarks.graphed skipped: PyTorch is not installed.")
        return 0
    if not torch.cuda.is_available():
        print("benchmarks.graphed needs an NVIDIA GPU; PyTorch sees none.")
        return 1
    import pycudagraph as pcg
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in FUNCTIONS]
    if unknown:
        parser.error(f"--only: unknown function(s) {unknown}; choose from {list(FUNCTIONS)}")
    print(versions(torch, pcg))
    print(f"microseconds per call (ratio to {FLOOR}): {args.iters} calls + one synchronize, "
          f"median of {args.repeats}; two inputs alternating except the static and same-input "
          "columns")
    prepared, labels = {}, {}
    for name in names:
        try:
            prepared[name] = p = prepare(torch, pcg, name)
        except ImportError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        labels[name] = p["label"]
        for column, why in p["errors"].items():
            print(f"{name}, {column}: {why}")
        for what, s in p["first"].items():
            print(f"{name}: {what} {s * 1e3:.1f} ms")
    runs = []
    for k in range(args.runs):
        run = measure(torch, prepared, args.iters, args.repeats)
        runs.append(run)
        print(f"\nrun {k + 1} of {args.runs}")
        print("\n".join(table(run, labels)))
    print("\npcg.graphed against its targets (pcg / torch replay of static inputs):")
    print("\n".join(verdicts(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
