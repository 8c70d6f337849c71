"""What the profiler builds and sees on a GPU, printed: ``python -m tests.support.profile_check``
(from the repository root, ``PYTHONPATH=$PWD``).

For the graphs the profile GPU tests use (a child graph, a ``while`` loop) and for the
showcase graph of ``python -m pycudagraph show``, it prints:

- the node types of every graph and body (kernels with their names);
- whether CUDA instantiates the graph a second time while its first exec lives, and once
  that exec is closed (the CUPTI twin and the in-place stamped graph need the first);
- every stamped graph the stamps method builds (stamps inside conditional bodies and
  outside them only): its node types per graph and body, and whether CUDA instantiates it
  with the profiled exec alive and with no other exec (CUDA's error names the failing
  node where it can);
- for CUPTI, with no exec and with the exec alive: how the twin or the exec was timed,
  which node ids CUPTI reported copies for, which records no node was found for;
- the table ``exe.profile`` prints with each method, and whether the graph still computes
  the right result afterwards;
- first of all, the same for the showcase's exec made before anything loaded CUPTI (as a
  user's exec is): whether CUPTI records the work of an exec it did not see instantiated.

An exception out of ``exe.profile`` prints a line starting ``PROFILE RAISED``; the last
line is ``PROFILE CHECK DONE``. Each section catches its own errors, so one refusal does
not hide the next.
"""

from __future__ import annotations

import traceback

import numpy as np

import pycudagraph as pcg
from pycudagraph.profile import cupti as profile_cupti
from pycudagraph.profile import stamps as profile_stamps
from pycudagraph.inspect.tree import node_label, walk

#: The kernels of the profile checks and GPU tests: spin_ns(ns) busy-waits ns nanoseconds
#: on one thread, tiny(y, n) adds 1 to n floats.
SRC = r"""
extern "C" __global__ void spin_ns(unsigned long long ns) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void tiny(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1.0f;
}
"""


def tree_lines(graph) -> list:
    """One line per graph or body of ``graph``: where it sits, then its nodes' types."""
    by: dict = {}
    for pl in walk(graph):
        where = pl.path.rsplit("/", 1)[0] if "/" in pl.path else "top"
        t = str(pl.node.type)
        by.setdefault(where, []).append(f"{t} {node_label(pl.node)}" if t == "kernel" else t)
    return [f"    {where}: " + ", ".join(items) for where, items in by.items()]


def _try(graph, what: str) -> None:
    try:
        graph.instantiate().close()
        print(f"  {what}: instantiates")
    except pcg.CudaError as exc:
        print(f"  {what}: REFUSED {exc}")


def _stamped(graph) -> None:
    places = walk(graph)
    for bodies in (True, False):
        exe = graph.instantiate()  # the profiled exec, made before the stamps go in
        try:
            with profile_stamps.Instrumented(graph, places, bodies=bodies) as inst:
                print(f"  stamped graph, stamps in bodies={bodies}, in {inst.where}: "
                      f"{len(inst.stamped)} nodes stamped, {len(inst.skipped)} left out")
                print("\n".join(tree_lines(inst.graph)))
                _try(inst.graph, "the stamped graph, with the profiled exec alive")
                exe.close()
                _try(inst.graph, "the stamped graph, with no other exec")
        except Exception as exc:  # noqa: BLE001 - a diagnosis goes on
            print(f"  stamped graph, bodies={bodies}: building it raised {exc!r}")
        finally:
            exe.close()


def _cupti(graph, stream) -> None:
    why = profile_cupti.unavailable()
    if why is not None:
        print(f"  cupti: not available ({why})")
        return
    places = walk(graph)
    paths = {pl.node: pl.path for pl in places}
    for alive in (False, True):
        exe = graph.instantiate() if alive else None
        try:
            s = profile_cupti.measure(graph, places, stream, 3, exe)
            d = s.detail
            print(f"  cupti, {'the exec alive' if alive else 'no other exec'}: mode "
                  f"{d.get('mode')}, complete {s.complete}, {d.get('records')} records, "
                  f"{d.get('copies')} copies reported, {d.get('by_signature')} named by "
                  f"signature, unnamed {d.get('unnamed')}")
            ids = d.get("ids", {})
            print("    node ids: " + ", ".join(f"{paths[n]}={i}" for i, n in ids.items()))
            copied = list(d.get("copied", {}).items())
            print(f"    copies (exec id -> graph id): {copied[:40]}")
            print(f"    unnamed record streams (exec id, signature): "
                  f"{d.get('unnamed_streams')}")
            for note in s.notes:
                print(f"    note: {note}")
        except Exception as exc:  # noqa: BLE001 - a diagnosis goes on
            print(f"  cupti, alive={alive}: measure raised {exc!r}")
        finally:
            if exe is not None:
                exe.close()


def _profiles(graph, stream, check) -> None:
    exe = graph.instantiate()
    try:
        for method in ("auto", "cupti", "stamps"):
            try:
                p = exe.profile(stream, repeats=5, method=method)
                print(f"  profile(method={method!r}):")
                print("\n".join("    " + line for line in str(p).splitlines()))
            except pcg.NotSupportedError as exc:
                print(f"  profile(method={method!r}): not supported here ({exc})")
            except Exception:  # noqa: BLE001 - the one thing this check must report
                print(f"PROFILE RAISED for method={method!r}:")
                traceback.print_exc()
        exe.launch(stream)
        stream.synchronize()
        print(f"  after profiling, one launch computes the right result: {check()}")
    finally:
        exe.close()


def check_graph(name: str, graph, stream, check) -> None:
    """Every section above for ``graph``; ``check()`` says whether its last launch was right."""
    print(f"== {name} ==")
    print("\n".join(tree_lines(graph)))
    exe = graph.instantiate()
    _try(graph, "a second exec while the first lives")
    exe.close()
    _try(graph, "an exec once the first is closed")
    for section in (lambda: _stamped(graph), lambda: _cupti(graph, stream),
                    lambda: _profiles(graph, stream, check)):
        try:
            section()
        except Exception:  # noqa: BLE001 - a diagnosis goes on
            traceback.print_exc()


def _child_graph(mod, buf):
    sub = pcg.Graph()
    inner = sub.add_kernel(mod["spin_ns"], 1, 32, (20_000,))
    sub.add_kernel(mod["tiny"], 4, 256, (buf, 1024), deps=[inner])
    g = pcg.Graph()
    first = g.add_kernel(mod["tiny"], 4, 256, (buf, 1024))
    g.add_child_graph(sub, deps=[first])
    return g, lambda: True


def _while_graph(mod, counter):
    ctl = pcg.Module.from_file("graph_control.cu")
    g = pcg.Graph()
    zero = g.add_memset(counter, 0, 1, element_size=4)
    h = g.conditional_handle(default=1)
    loop = g.add_while(h, deps=[zero])
    step = loop.body.add_kernel(mod["spin_ns"], 1, 32, (5_000,))
    loop.body.add_kernel(ctl["count_while_below"], 1, 1, (counter, 5, h), deps=[step])
    return g, lambda: int(counter.to_numpy(np.int32)[0]) == 5


def _early(graph, exe, stream, check) -> None:
    """The showcase's exec made before anything loaded CUPTI, as a user's would be:
    does CUPTI record the work of an exec instantiated before it attached?"""
    print("== the showcase graph, its exec made before CUPTI was loaded ==")
    try:
        if profile_cupti.unavailable() is None:
            s = profile_cupti.measure(graph, walk(graph), stream, 3, exe)
            print(f"  cupti on that exec: mode {s.detail.get('mode')}, complete "
                  f"{s.complete}, {s.detail.get('records')} records, unnamed "
                  f"{s.detail.get('unnamed')}")
        p = exe.profile(stream, repeats=5)
        print("\n".join("    " + line for line in str(p).splitlines()))
        exe.launch(stream)
        stream.synchronize()
        print(f"  after profiling, one launch computes the right result: {check()}")
    except Exception:  # noqa: BLE001 - the one thing this check must report
        print("PROFILE RAISED for the exec made before CUPTI was loaded:")
        traceback.print_exc()
    finally:
        exe.close()


def main() -> None:
    from pycudagraph.cli.show import build_showcase
    stream = pcg.Stream()
    showcase, check, keep = build_showcase()
    early = showcase.instantiate()  # before anything below loads CUPTI
    mod = pcg.Program(SRC, name="profile_check.cu").compile()
    buf, counter = pcg.DeviceBuffer(4 * 1024), pcg.DeviceBuffer(4)
    _early(showcase, early, stream, check)
    for name, (graph, ok) in (("a child graph", _child_graph(mod, buf)),
                              ("a while loop", _while_graph(mod, counter)),
                              ("the showcase graph", (showcase, check))):
        check_graph(name, graph, stream, ok)
    del keep
    print("PROFILE CHECK DONE")


if __name__ == "__main__":
    main()
