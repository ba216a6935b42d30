"""Statistical evidence: the fastpath's empirical cycle law against the reference's exact law.

``sample_cycles`` runs the fastpath for many independent cycles of one reference instance
(batched, a seeded ``torch.Generator``) and counts the outputs; ``cycle_law_test`` compares
the counts with the exact cycle law from ``rheo.reference`` by ``rheo.stats.gof``.
``tamper`` plants an implementation bug in the uniforms (e.g. one uniform reused for two
decisions) for the calibration tests.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import torch

from rheo.fastpath import FastConfig, ReferenceTableModel, Uniforms, run_cycle
from rheo.reference import cycle_law
from rheo.stats import GofResult, gof


def temperature_of(inst) -> float:
    t = inst.config.temperature
    return 0.0 if t.zero else float(t.value)


def sample_cycles(inst, cycles: int, *, seed: int = 0, batch: int = 20_000, cfg: FastConfig | None = None,
                  tamper: Callable[[Uniforms], None] | None = None, device="cpu", dtype=torch.float64) -> Counter:
    """Outputs of ``cycles`` independent fastpath cycles of ``inst`` (counts by token tuple)."""
    cfg = cfg or FastConfig.from_reference(inst.config)
    g = torch.Generator(device=device).manual_seed(seed)
    counts: Counter = Counter()
    done = 0
    model = ReferenceTableModel(inst, batch, dtype=dtype, device=device)
    while done < cycles:
        b = min(batch, cycles - done)
        model.batch = b
        u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g, device=device)
        if tamper is not None:
            tamper(u)
        T = torch.full((b,), temperature_of(inst), dtype=torch.float64, device=device)
        _, result = run_cycle(model, cfg, T, uniforms=u)
        toks = result.tokens.cpu()
        lens = result.lengths.cpu()
        for L in range(1, cfg.depth + 2):
            rows = toks[lens == L, :L]
            if rows.numel():
                uniq, cnt = torch.unique(rows, dim=0, return_counts=True)
                for row, c in zip(uniq.tolist(), cnt.tolist()):
                    counts[tuple(row)] += c
        done += b
    return counts


def exact_cycle_law(inst) -> dict:
    """Pr(O = o) from the reference (class enumerator), as floats."""
    return {o: float(p) for o, p in cycle_law(inst, "classes", count_draws=False).law.items()}


def cycle_law_test(inst, counts: Counter, alpha: float) -> GofResult:
    return gof(counts, exact_cycle_law(inst), alpha)


def reuse_sample_uniform(u: Uniforms) -> None:
    """Planted bug: the first deterministic coin reuses the stochastic coin's uniform."""
    u.u_det[:, :, 0] = u.u_sample
