"""Stand-ins that let the benchmark suite's head-to-head runner run on a CPU.

With ``tests/support/driver_stub.c`` as libcuda (``tests/support/native_driver.py``'s
prelude sets that up): :class:`StubPcgPeer` is the suite's pycudagraph contestant on fake
kernels, buffers, streams and graphs; :class:`StubDriverPeer` the bare driver calls
(``benchmarks/bare.c``) bound to the stub; :class:`FixedPeer` a rival whose rounds take a
fixed time (so the verdicts are known); :data:`FLOOR_SCRIPT` a child process that speaks
``floor.cu``'s protocol. :class:`StubEnv` is what the rounds need of ``cudaenv.RawEnv``.
"""

from __future__ import annotations

import time

from benchmarks import argsets
from benchmarks.common import Entry, Peer
from benchmarks.peers_driver import DriverPeer
from benchmarks.peers_pcg import PcgPeer

#: A floor that answers every round with 0.5 us, and "build" with an error.
FLOOR_SCRIPT = """
import sys
print("ready", flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "quit":
        break
    answer = {"sizes": "ok", "info": "stub floor", "build": "error no build here"}
    print(answer.get(words[0], "0.5"), flush=True)
"""


class StubEnv:
    """The spin kernel's stand-in: nothing to wait for."""

    arch, gpu_name, expired = "sm_90", "stub", 0

    def queue_spin(self, stream, ms) -> None:
        pass

    def spin_finished(self) -> bool:
        return False

    def sync(self, stream) -> None:
        pass


class StubPcgPeer(PcgPeer):
    """The pycudagraph contestant on fake kernels, buffers, a fake stream and fake graphs."""

    def setup(self) -> None:
        import pycudagraph as pcg
        from tests.support.fakes import fake_buffer, fake_graph, fake_kernel
        self.pcg = pcg
        self.stream = pcg.Stream.__new__(pcg.Stream)
        self.stream._h, self.stream._dev, self.stream._addr = 0x5000, 0, 0x5000
        self.s_int = self.stream.ptr
        self.k_empty = fake_kernel("", "empty")
        self.kernels = {n: fake_kernel(argsets.signature(n), argsets.name(n))
                        for n in argsets.COUNTS}
        self.bufs = [fake_buffer(64) for _ in range(4)]
        for b in self.bufs:
            b._addr, b._dev = b.ptr, 0
        self._chains = {}
        self.new_graph = fake_graph

    def chain(self, k: int):
        if k not in self._chains:
            g = self.new_graph()
            prev = None
            for _ in range(k):
                prev = g.add_kernel(self.k_empty, 1, 1, (), deps=(prev,) if prev else ())
            self._chains[k] = g.instantiate()
        return self._chains[k]


    def close(self) -> None:
        for item in self._chains.values():
            (item[0] if isinstance(item, tuple) else item).close()
        self._chains = {}


class StubDriverPeer(DriverPeer):
    def function(self, kernel) -> int:
        return kernel.last_function[0]  # a fake kernel's function: no cudaGetDevice


class FixedPeer(Peer):
    """A rival whose every round of a figure of kind ``K`` returns ``times[K]`` microseconds
    (after a short sleep, so the rounds really alternate); other kinds are n/a."""

    unsupported = {}

    def __init__(self, key: str, times: dict):
        super().__init__(None, None)
        self.key = self.label = key
        self.times = times
        self.calls = 0

    def __getattr__(self, name: str):
        kind = name[2:] if name.startswith("r_") else None
        if kind not in self.__dict__.get("times", {}):
            raise AttributeError(name)

        def make(_arg=0) -> Entry:
            def one() -> float:
                self.calls += 1
                time.sleep(1e-4)
                return self.times[kind]
            return Entry(one, note=f"fixed {self.times[kind]} us")
        return make
