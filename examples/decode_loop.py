"""A decode-style loop that stops itself on the GPU when a kernel sees the stop token.

A generation loop usually runs on the host: launch one step, copy the new token back,
check for the stop token, repeat. The host check is the sync that stops a graph from
covering the loop. Here the loop and the check are inside ONE graph:

    while(handle) { logits = W[token] + bias[step]      (decode_logits)
                    token = argmax(logits); step += 1;   (decode_pick, which calls
                    go on while token != STOP and step < MAX_STEPS   cudaGraphSetConditional) }

The toy "model" is a table lookup, so numpy can replay it exactly. Each launch decodes
from a start token written by a memset node (changed in the exec between launches with
``exe.set_params``, i.e. ``cudaGraphExecMemsetNodeSetParams``), runs as many steps as the
data asks for, and the host looks only at the result. Printed: the steps each launch ran,
and that the tokens match numpy's replay.
"""

import numpy as np

import pycudagraph as pcg

V = 64  # vocabulary
MAX_STEPS = 48
STOP = 0


def reference(W, bias, start):
    tokens = [start]
    for s in range(MAX_STEPS):
        nxt = int(np.argmax(W[tokens[-1]] + bias[s]))
        tokens.append(nxt)
        if nxt == STOP:
            break
    return tokens


def main():
    ctl = pcg.Module.from_file("graph_control.cu")
    rng = np.random.default_rng(10)
    W = (2.0 * rng.standard_normal((V, V))).astype(np.float32)
    bias = rng.standard_normal((MAX_STEPS, V)).astype(np.float32)
    bias[:, STOP] += np.linspace(-2.0, 2.0, MAX_STEPS, dtype=np.float32)  # stop grows likelier

    stream = pcg.Stream()
    d_W = pcg.DeviceBuffer.from_array(W, stream=stream)
    d_bias = pcg.DeviceBuffer.from_array(bias, stream=stream)
    d_tokens = pcg.DeviceBuffer(4 * (MAX_STEPS + 1))
    d_step, d_logits = pcg.DeviceBuffer(4), pcg.DeviceBuffer(4 * V)

    g = pcg.Graph()
    init = [g.add_memset(d_tokens, 0, MAX_STEPS + 1, element_size=4),
            g.add_memset(d_step, 0, 1, element_size=4)]
    first = g.add_memset(d_tokens, 1, 1, element_size=4, deps=init)  # tokens[0] = start
    h = g.conditional_handle(default=1)
    loop = g.add_while(h, deps=[first])
    logits = loop.body.add_kernel(ctl["decode_logits"], 1, V,
                                  (d_W, d_bias, d_tokens, d_step, d_logits, V))
    loop.body.add_kernel(ctl["decode_pick"], 1, 1,
                         (d_logits, d_tokens, d_step, V, STOP, MAX_STEPS, h), deps=[logits])
    exe = g.instantiate(upload_stream=stream)

    stopped_early = 0
    for start in (1, 5, 17, 33, 60):
        exe.set_params(first, value=start)  # cudaGraphExecMemsetNodeSetParams
        exe.launch(stream)
        stream.synchronize()
        steps = int(d_step.to_numpy(np.int32)[0])
        tokens = d_tokens.to_numpy(np.int32)[: steps + 1].tolist()
        ref = reference(W, bias, start)
        why = "stop token" if tokens[-1] == STOP else "max steps"
        print(f"start {start:2d}: {steps:2d} decode steps ran inside the graph ({why}); "
              f"tokens {tokens[:8]}{' ...' if len(tokens) > 8 else ''}")
        assert tokens == ref, f"start {start}: GPU {tokens} != numpy {ref}"
        stopped_early += tokens[-1] == STOP and steps < MAX_STEPS
    assert stopped_early, "no launch stopped on the stop token"
    print(f"{stopped_early} of 5 launches stopped on the stop token before {MAX_STEPS} steps")
    print("OK")


if __name__ == "__main__":
    with pcg.errors.needs_gpu():  # no GPU: one sentence, no traceback
        main()
