"""Peer: PyTorch. ``torch.cuda.CUDAGraph`` captured on a side stream; each node is
``x.add_(1)`` on a 1-element float tensor (an elementwise kernel, NOT an empty kernel).
Capture uses ``capture_begin()`` / ``capture_end()`` (what ``torch.cuda.graph`` calls,
without its synchronize + gc.collect + empty_cache); ``capture_end`` instantiates."""

from __future__ import annotations

from .common import NotSupported, Peer, elapsed_us, now, ok
from .timing import gpu_time_per_launch, held_batch, held_launch, timed_repeats

_NO_NODE_API = "PyTorch builds graphs only by stream capture; it has no node or exec-update API"
_ADD = "nodes are x.add_(1) kernels, not empty"


class TorchPeer(Peer):
    key = "torch"
    label = "PyTorch"
    unsupported = {"exec_set_arg": _NO_NODE_API, "build": _NO_NODE_API}

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
        if k in self._chains:
            return self._chains[k]
        with self.torch.cuda.stream(self.stream):
            g = self._capture(k)
            for _ in range(3):
                g.replay()
        self.stream.synchronize()
        self._chains[k] = g
        return g

    def held_launch(self, k: int):
        s = self.settings
        g = self._chain(k)
        with self.torch.cuda.stream(self.stream):
            cell = held_launch(self.env, g.replay, (), self.s_int,
                               s.held_per_spin[k], s.held_spins[k], s.spin_ms)
        cell.note = f"g.replay(); {_ADD}; {cell.note}"
        return cell

    def recapture(self):
        s = self.settings

        def once():
            with self.torch.cuda.stream(self.stream):
                t0 = now()
                g = self._capture(1000)
                us = elapsed_us(t0)
            g.reset()
            return us

        return ok(timed_repeats(once, s.repeats), f"capture_begin/x.add_(1) x1000/capture_end; {_ADD}")

    def gpu_per_node(self):
        s = self.settings
        g = self._chain(1000)
        with self.torch.cuda.stream(self.stream):
            us = gpu_time_per_launch(self.env, g.replay, (), self.s_int, s.gpu_launches, s.gpu_repeats)
        return ok(us / 1000.0, f"events around {s.gpu_launches} replays; {_ADD}")

    def eager_launch(self):
        s = self.settings
        with self.torch.cuda.stream(self.stream):
            cell = held_batch(self.env, self.x.add_, (1,), self.s_int, s.eager_batch, s.repeats,
                              s.eager_spin_ms)
        cell.note = f"x.add_(1), not an empty kernel; {cell.note}"
        return cell

    def mlp(self):
        from .mlp import torch_mlp
        return torch_mlp(self.env, self.settings)

    def close(self) -> None:
        if hasattr(self, "stream"):
            self.stream.synchronize()
        for g in getattr(self, "_chains", {}).values():
            g.reset()
        self._chains = {}
