"""Peer: PyTorch. ``torch.cuda.CUDAGraph`` captured on a side stream; each node is
``x.add_(1)`` on a 1-element float tensor (an elementwise kernel, NOT an empty kernel).
Capture uses ``capture_begin()`` / ``capture_end()`` (what ``torch.cuda.graph`` calls,
without its synchronize + gc.collect + empty_cache); ``capture_end`` instantiates. PyTorch
launches no kernel of our own, so the eager, update and build figures are n/a."""

from __future__ import annotations

from .common import Entry, NotSupported, Peer, elapsed_us, now
from .timing import gpu_round, held_round

_NO_NODE_API = "PyTorch builds graphs only by stream capture; it has no node or exec-update API"
_NO_KERNEL = "PyTorch launches no kernel of our own (no argument list to pass)"
_ADD = "nodes are x.add_(1) kernels, not empty"


class TorchPeer(Peer):
    key = "torch"
    label = "PyTorch"
    unsupported = {"eager": _NO_KERNEL, "set_arg": _NO_NODE_API, "set_all": _NO_NODE_API,
                   "build": _NO_NODE_API, "update": _NO_NODE_API,
                   "instantiate": "capture_end instantiates: see the capture figure"}

    def setup(self) -> None:
        try:
            import torch
        except ImportError as exc:
            raise NotSupported(f"PyTorch is not installed ({exc})") from exc
        if not torch.cuda.is_available():
            raise NotSupported("this PyTorch build has no usable CUDA")
        self.torch = torch
        torch.cuda.set_device(0)
        self.stream = torch.cuda.Stream()
        self.s_int = int(self.stream.cuda_stream)
        self.x = torch.zeros(1, device="cuda")
        with torch.cuda.stream(self.stream):
            self.x.add_(1)
        self.stream.synchronize()
        self._chains = {}

    def _capture(self, k: int):
        torch, x = self.torch, self.x
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        try:
            for _ in range(k):
                x.add_(1)
        finally:
            g.capture_end()
        return g

    def _chain(self, k: int):
        if k not in self._chains:
            with self.torch.cuda.stream(self.stream):
                g = self._capture(k)
                for _ in range(3):
                    g.replay()
            self.stream.synchronize()
            self._chains[k] = g
        return self._chains[k]

    def _on_stream(self, one):
        def run() -> float:
            with self.torch.cuda.stream(self.stream):
                return one()
        return run

    def r_held(self, k: int) -> Entry:
        s = self.settings
        one = held_round(self.env, self._chain(k).replay, (), self.s_int, s.held_per_spin[k],
                         s.spin_ms)
        return Entry(self._on_stream(one), note=f"g.replay(); {_ADD}")

    def r_capture(self, _arg=0) -> Entry:
        count = self.settings.captured

        def one() -> float:
            t0 = now()
            g = self._capture(count)
            us = elapsed_us(t0)
            g.reset()
            return us

        return Entry(self._on_stream(one),
                     note=f"capture_begin/x.add_(1) x{count}/capture_end; {_ADD}")

    def r_gpu_per_node(self, _arg=0) -> Entry:
        one = gpu_round(self.env, self._chain(1000).replay, (), self.s_int,
                        self.settings.gpu_launches, 1000)
        return Entry(self._on_stream(one), note=_ADD)

    def mlp(self):
        from .mlp import torch_mlp
        return torch_mlp(self.env, self.settings)

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.synchronize()
        for g in getattr(self, "_chains", {}).values():
            g.reset()
        self._chains = {}
