"""A graph captured from PyTorch keeps working after PyTorch's cuBLAS workspaces are
dropped and their memory given back to the driver (``torch.compile``'s CUDA graphs drop
them around each recording): the capture's matrix products use a workspace from the
capture's pool, not the stream's workspace from before the capture. Each check runs in a
child process (a replay through freed memory faults)."""

import pytest

from tests.support.watchdog import run_ok

HEAD = """
import sys
try:
    import torch
except ImportError:
    print("SKIP no torch"); sys.exit(0)
import pycudagraph as pcg
torch.manual_seed(0)

def drop_and_reuse():
    torch._C._cuda_clearCublasWorkspaces()       # what torch.compile's CUDA graphs do
    torch.cuda.synchronize()
    torch.cuda.empty_cache()                     # the freed workspaces go to the driver
    return [torch.full((1 << 22,), float("nan"), device="cuda") for _ in range(32)]
"""

MATMULS = HEAD + """
w1 = torch.randn(256, 1024, device="cuda") / 16
w2 = torch.randn(1024, 256, device="cuda") / 32

def mlp(x):
    return torch.relu(x @ w1) @ w2

x = torch.randn(128, 256, device="cuda")
with torch.no_grad():
    want = mlp(x)
    f = pcg.graphed(mlp)
    torch.testing.assert_close(f(x), want)
    side = torch.cuda.Stream()
    s = pcg.Stream.wrap(side)
    with torch.cuda.stream(side):
        mlp(x)
        side.synchronize()
        with pcg.capture(s, mode="thread_local") as cap:
            y = mlp(x)
    exe = cap.graph.instantiate()
    junk = drop_and_reuse()
    for _ in range(3):
        torch.testing.assert_close(f(x), want)
        exe.launch(s)
        s.synchronize()
        torch.testing.assert_close(y, want)
    torch.cuda.synchronize()
    assert (x @ w1).isfinite().all()             # eager products work after it too
print("OK")
"""

GPT2_THEN_COMPILE = HEAD + """
try:
    import transformers
except ImportError:
    print("SKIP no transformers"); sys.exit(0)
config = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, n_positions=128)
model = transformers.GPT2LMHeadModel(config).cuda().eval().requires_grad_(False)
ids = torch.randint(0, config.vocab_size, (2, 64), device="cuda")

def step(ids):
    return model(ids, use_cache=False).logits

with torch.no_grad():
    want = step(ids)
    f = pcg.graphed(step)
    torch.testing.assert_close(f(ids), want, rtol=1e-3, atol=1e-3)
    compiled = torch.compile(lambda a, b: torch.relu(a @ b), mode="reduce-overhead")
    a, b = torch.randn(128, 256, device="cuda"), torch.randn(256, 512, device="cuda")
    for _ in range(4):
        compiled(a, b)
    torch.cuda.synchronize()
    junk = drop_and_reuse()
    for _ in range(3):
        torch.testing.assert_close(f(ids), want, rtol=1e-3, atol=1e-3)
    torch.cuda.synchronize()
print("OK")
"""


@pytest.mark.gpu
def test_graphs_survive_dropped_cublas_workspaces():
    print(run_ok(MATMULS))


@pytest.mark.gpu
def test_graphed_gpt2_survives_torch_compile_and_empty_cache():
    print(run_ok(GPT2_THEN_COMPILE, timeout=240))
