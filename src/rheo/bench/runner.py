"""What the fastpath benchmarks time on (``rheo bench fastpath``, ``rheo.bench.captured``,
``bench/gpu_profile.py``): a table model per batch size whose roots are reset before every
run, and a host clock that waits for the device."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from rheo.fastpath import Uniforms, build_tree, verify
from rheo.testing import HashTableModel

SCALE, DRAFT_NOISE = 6.0, 0.3  # target logits 6 x N(0, 1), draft = target + 0.3 x N(0, 1)


def sync_device(device) -> None:
    """Wait for the device (CUDA) so a host clock reads the work done; elsewhere nothing."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class TableRunner:
    """One batch size: a table model whose context is reset before every run, so every
    variant sees the same roots and the same uniforms."""

    def __init__(self, V, b, device, seed=0, dtype=torch.float32):
        self.model = HashTableModel(
            V, b, seed=seed, rows=8, scale=SCALE, draft_noise=DRAFT_NOISE, dtype=dtype, device=device
        )
        self.context = self.model.context.clone()
        self.T = torch.ones(b, dtype=torch.float64, device=device)
        self.device = device
        self.b = b

    def uniforms(self, cfg, seed):
        g = torch.Generator(device=self.device).manual_seed(seed)
        return Uniforms.random(self.b, cfg.K, cfg.B, cfg.depth, g, device=self.device)

    def _timed(self, fn):
        self.model.context = self.context.clone()
        self.model.forward_seconds = 0.0
        sync_device(self.device)
        t0 = time.perf_counter()
        out = fn()
        sync_device(self.device)
        return time.perf_counter() - t0 - self.model.forward_seconds, out

    def cycle(self, cfg, u):
        def run():
            tree = build_tree(self.model.draft_logits, cfg, self.T, u)
            return verify(tree, self.model.target_logits(tree), self.T, cfg, u)

        return self._timed(run)

    def build(self, cfg, u, expand_fn=None):
        return self._timed(lambda: build_tree(self.model.draft_logits, cfg, self.T, u, expand_fn=expand_fn))


def timed_call(fn: Callable[[], object], device: str) -> float:
    """Seconds ``fn()`` takes, the device's work included."""
    sync_device(device)
    t0 = time.perf_counter()
    fn()
    sync_device(device)
    return time.perf_counter() - t0
