"""A PyTorch graph captured by pycudagraph, saved with its tensors as slots, loaded in
another process that supplies a resolver for PyTorch's kernels (the recipe of
docs/graph_files.md: one probe capture of the same operations). Without a slot for every
tensor the save names the node and argument; without a resolver the save warns and the
load names the nodes. Each step runs in its own process."""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

COMMON = '''
import sys
import torch
import pycudagraph as pcg

path, N = sys.argv[1], 1 << 12
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
stream = pcg.Stream.wrap(side)


def work(x, t, y):
    torch.mul(x, 2.0, out=t)
    torch.add(t, 1.0, out=y)


def captured(x, t, y):
    with torch.cuda.stream(side):
        work(x, t, y)  # eager first: PyTorch loads its kernels
        side.synchronize()
        with pcg.capture(stream, mode="thread_local") as cap:
            work(x, t, y)
    return cap.graph
'''

SAVE = COMMON + '''
import warnings
x, t, y = torch.randn(N, device="cuda"), torch.empty(N, device="cuda"), torch.empty(N, device="cuda")
torch.cuda.synchronize()
g = captured(x, t, y)
print("CAPTURED", [str(n.type) for n in g.nodes])
try:
    g.save(path, slots={"x": x, "y": y})
    raise SystemExit("saved without a slot for t")
except pcg.GraphFileError as exc:
    assert "belongs to no slot" in str(exc) and "argument" in str(exc), exc
    print("REFUSED", exc)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    g.save(path, slots={"x": x, "t": t, "y": y})
msgs = [str(w.message) for w in caught if issubclass(w.category, pcg.errors.GraphFileWarning)]
assert msgs and "resolve=" in msgs[0], msgs
print("WARNED", msgs[0])
'''

LOAD = COMMON + '''
x, t, y = torch.randn(N, device="cuda"), torch.empty(N, device="cuda"), torch.empty(N, device="cuda")
torch.cuda.synchronize()
bind = {"x": x, "t": t, "y": y}
try:
    pcg.load(path, bind=bind)
    raise SystemExit("loaded without a resolver")
except pcg.GraphFileError as exc:
    assert "pass resolve=" in str(exc) and "kernel node(s)" in str(exc), exc
    print("NEEDS", exc)

# The recipe: a probe capture of the same operations on scratch tensors names PyTorch's
# kernels; one probe serves every graph saved from these operations.
probe = captured(*(torch.empty(N, device="cuda") for _ in range(3)))
table = {n.mangled_name: n.function for n in probe.nodes if n.type == "kernel"}
g = pcg.load(path, bind=bind, resolve=table.__getitem__)
exe = g.instantiate()
with torch.cuda.stream(side):
    exe.launch(stream)
    side.synchronize()
assert torch.equal(y, x * 2.0 + 1.0), (y[:4], x[:4])
print("LOADED", len(g.nodes), "nodes")

names = sorted(table)
if len(names) > 1:
    try:
        pcg.load(path, bind=bind, resolve=lambda name: table[names[0] if name != names[0] else names[1]])
        raise SystemExit("a wrong resolver was accepted")
    except pcg.GraphFileError as exc:
        assert "returned the function" in str(exc), exc
        print("WRONG RESOLVER REFUSED")
print("HEALTHY")
'''


def _run(script: str, *args) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONFAULTHANDLER="1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-4000:]}"
    return out


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_a_captured_pytorch_graph_is_saved_and_loaded_with_a_resolver(tmp_path):
    path = tmp_path / "torch.pcgraph"
    out = _run(SAVE, path)
    assert "REFUSED" in out and "WARNED" in out, out
    out = _run(LOAD, path)
    assert "NEEDS" in out and "LOADED" in out and "HEALTHY" in out, out
