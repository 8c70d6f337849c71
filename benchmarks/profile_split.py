"""Profile 7: pycudagraph's bookkeeping around its instantiate and whole-graph update calls,
made to compare two versions of the package on one machine (``bash tools/gpu_verify.sh
split-ab``: an earlier commit in ``./.before`` and this tree, alternating).

Each round builds a 1,000-node chain of the 3-argument kernel, times ``g.instantiate()`` split
into the time before its driver call, the call and the time after it (``fast`` wrapped to
read the clock on each side), does the same for ``exe.update(g2)``, then runs the suite's own
pycudagraph and raw cuda.bindings instantiate / update rounds and a round of the bare
``cuGraphExecUpdate`` (``bare.c``) on an exec pycudagraph instantiated, in a random order.
Prints the medians, the median per-round ratio pycudagraph / raw and, for the update, what
each costs beyond the bare call of its round (median per-round difference, for the whole
1000-node update). Whichever ``pycudagraph`` comes
first on ``PYTHONPATH`` is timed (its path is printed). (Not part of the suite; behind
docs/HOT_PATH.md.)

Run from the repository root on a GPU: ``python benchmarks/profile_split.py [ROUNDS] [LABEL]``.
"""
from __future__ import annotations

import os
import random
import statistics
import sys

# The repository root last: a pycudagraph earlier on PYTHONPATH (another version) is the one timed.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pycudagraph as pcg  # noqa: E402
from pycudagraph._cuda import fast  # noqa: E402
from benchmarks.common import elapsed_us, now  # noqa: E402
from benchmarks.peers_driver import profile_peers  # noqa: E402
from benchmarks.peers_raw import RawPeer  # noqa: E402
from benchmarks.timing import gc_paused, split_around  # noqa: E402
try:  # a real instantiate: no released exec is reused
    from pycudagraph.graph.exec_reuse import paused as reuse_paused  # noqa: E402
except ImportError:  # a version without exec reuse
    from contextlib import nullcontext as reuse_paused  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
LABEL = sys.argv[2] if len(sys.argv) > 2 else "this tree"
PARTS = ("before", "call", "after")


def bare_update_round(pcg_peer, bare):
    """The suite's pycudagraph update round with the bare driver call in place of
    ``exe.update(g2)`` (us per node)."""
    def one() -> float:
        g1, g2 = pcg_peer.chain_of(3, 1000)[0], pcg_peer.chain_of(3, 1000, 2.0)[0]
        with reuse_paused():
            exe = g1.instantiate()
        e, h2 = int(exe.handle), int(g2.handle)
        t0 = now()
        bare.exec_update(e, h2)
        us = elapsed_us(t0) / 1000
        exe.close()
        g1.close()
        g2.close()
        return us
    return one


def main() -> None:
    env, pcg_peer, driver = profile_peers()
    raw = RawPeer(env, pcg_peer.settings)
    raw.setup()
    inst, upd = {p: [] for p in PARTS}, {p: [] for p in PARTS}
    suite = {("pycudagraph", "instantiate"): pcg_peer.r_instantiate().fn,
             ("raw", "instantiate"): raw.r_instantiate().fn,
             ("pycudagraph", "update"): pcg_peer.r_update().fn,
             ("raw", "update"): raw.r_update().fn,
             ("bare", "update"): bare_update_round(pcg_peer, driver.bare)}
    rounds = {key: [] for key in suite}
    with gc_paused():
        for _ in range(ROUNDS):
            g = pcg_peer.chain_of(3, 1000)[0]
            with reuse_paused():
                exe = split_around(inst, fast, "graph_instantiate", g.instantiate)
            g2 = pcg_peer.chain_of(3, 1000, 2.0)[0]
            split_around(upd, fast, "exec_update", lambda: exe.update(g2))
            exe.close()
            g.close()
            g2.close()
            for key in random.sample(list(suite), len(suite)):
                rounds[key].append(suite[key]())
    raw.close()
    med = statistics.median
    print(f"[{LABEL}] pycudagraph from {pcg.__file__}, median of {ROUNDS}")
    for title, res in (("g.instantiate()", inst), ("exe.update(g2)", upd)):
        print(f"[{LABEL}] {title:16s} before / call / after the driver call, us: " +
              " / ".join(f"{med(res[p]):.1f}" for p in PARTS))
    for what in ("instantiate", "update"):
        mine, theirs = rounds["pycudagraph", what], rounds["raw", what]
        ratio = med(a / b for a, b in zip(mine, theirs))
        print(f"[{LABEL}] the suite's {what} rounds: pycudagraph {med(mine):.3f}, raw "
              f"{med(theirs):.3f} us per node; pycudagraph / raw x{ratio:.3f}")
    bare = rounds["bare", "update"]
    print(f"[{LABEL}] beyond the bare call of the round, per 1000-node update: " + ", ".join(
        f"{who} {1000 * med(a - b for a, b in zip(rounds[who, 'update'], bare)):.1f} us"
        for who in ("pycudagraph", "raw")))


if __name__ == "__main__":
    main()
