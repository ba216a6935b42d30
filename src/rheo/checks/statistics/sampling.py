"""Statistical evidence: the fastpath's empirical cycle law against the reference's exact law.

``sample_cycles`` runs the fastpath for many independent cycles of one reference instance
(batched, a seeded ``torch.Generator``) and counts the outputs; ``cycle_law_test`` compares
the counts with the exact cycle law from ``rheo.reference`` by ``rheo.checks.statistics.goodness_of_fit.gof``.
``tamper`` plants an implementation bug in the uniforms (e.g. one uniform reused for two
decisions) for the calibration tests.

Specification: docs/spec.md §5 (the cycle law and Theorem 1's continued law).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable

import torch

from rheo.checks.statistics.goodness_of_fit import GofResult, gof
from rheo.fastpath import FastConfig, TargetFilters, Uniforms, build_tree, run_cycle, target_law, verify
from rheo.reference import cycle_law, target_sequence_probability
from rheo.reference.params import Params
from rheo.testing import HashTableModel, ReferenceTableModel


def sample_cycles(
    inst,
    cycles: int,
    *,
    seed: int = 0,
    batch: int = 20_000,
    cfg: Params | None = None,
    tamper: Callable[[Uniforms], None] | None = None,
    device="cpu",
    dtype=torch.float64,
    continue_to: int | None = None,
) -> Counter:
    """Outputs of ``cycles`` independent fastpath cycles of ``inst`` (counts by token tuple).

    ``continue_to`` = L continues every output by sampling the target (p_T with the
    filters, by the fastpath's own ``target_law``) to length L: Theorem 1 says the counts
    then follow p_T(Seq) on V^L (docs/spec.md §5)."""
    cfg = cfg or inst.config.in_arithmetic("float64")
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
        T = torch.full((b,), inst.config.temperature.value, dtype=torch.float64, device=device)
        _, result = run_cycle(model, cfg, T, uniforms=u)
        toks, lens = result.tokens, result.lengths
        if continue_to is not None:
            toks, lens = _continue(model, cfg, T, toks, lens, continue_to, g)
        toks, lens = toks.cpu(), lens.cpu()
        for L in range(1, toks.shape[1] + 1):
            _count_rows(counts, toks[lens == L, :L])
        done += b
    return counts


def _continue(model, cfg, T, toks, lens, L, g):
    """Extend each output (tokens [b, D+1], lengths [b]) by target samples to length L
    (``model.prefix_logits``: a table model's logits at token paths)."""
    b = toks.shape[0]
    out = torch.full((b, L), -1, dtype=torch.int64, device=toks.device)
    w = min(L, toks.shape[1])
    out[:, :w] = toks[:, :w]
    for pos in range(L):
        need = (lens <= pos).nonzero().squeeze(1)  # outputs shorter than pos + 1
        if need.numel() == 0:
            continue
        prefix = torch.full((need.numel(), L), -1, dtype=torch.int64, device=toks.device)
        prefix[:, :pos] = out[need, :pos]
        p = target_law(model.prefix_logits(prefix, requests=need), T[need], cfg.target_filters)
        out[need, pos] = torch.multinomial(p, 1, generator=g).squeeze(1)
    return out, torch.full_like(lens, L)


def continued_law(inst, L: int) -> dict:
    """p_T(Seq) for every Seq in V^L with positive probability (docs/spec.md §5), as floats."""
    law = {}
    for seq in itertools.product(range(inst.n), repeat=L):
        pr = float(target_sequence_probability(inst, seq))
        if pr > 0:
            law[seq] = pr
    return law


def exact_cycle_law(inst) -> dict:
    """Pr(O = o) from the reference (class enumerator), as floats."""
    return {o: float(p) for o, p in cycle_law(inst, "classes", count_draws=False).law.items()}


def cycle_law_test(inst, counts: Counter, alpha: float) -> GofResult:
    return gof(counts, exact_cycle_law(inst), alpha)


def random_instance(V: int, cfg: Params, T: float, seed: int, noise: float = 1.0, scale: float = 0.8):
    """A reference instance whose laws come from random logits (scale x N(0, 1); the draft
    adds noise x N(0, 1))."""
    model = HashTableModel(V, 1, seed=seed, rows=4096, scale=scale, draft_noise=noise, dtype=torch.float64)
    return model.reference_instance(0, cfg, T)


def quiet_cases() -> dict:
    """(V, cfg, T) of the cycle-law cases: the fastpath must match the reference's law."""
    return {
        "rheo_m1_fills": (5, FastConfig(K=3, depth=3, budget=6, m=1, beam=2, draft_top_k=None), 1.0),
        "rheo_m0_sparse_top_p": (
            6,
            FastConfig(K=3, depth=2, budget=7, m=0, draft_top_k=4, filters=TargetFilters(top_p=0.9)),
            0.5,
        ),
        "topk": (5, FastConfig(K=2, depth=3, budget=5, policy="topk", beam=2, draft_top_k=None), 1.0),
        "rheo_m2_min_p": (
            4,
            FastConfig(K=3, depth=3, budget=5, m=2, beam=1, draft_top_k=None, filters=TargetFilters(min_p=0.05)),
            1.5,
        ),
    }


def sample_first_two(
    model, cfg: Params, temperature: float, cycles: int, *, seed: int = 0, batch: int = 2000
) -> tuple[Counter, Counter]:
    """Cycles of a shared-context ``HashTableModel`` (the root never moves): counts of the
    first emitted token, and of (first, second) where an output of length 1 is continued
    by one target sample (so the second token's law given the first is p_T(. | first))."""
    dev = model.device
    g = torch.Generator(device=dev).manual_seed(seed)
    first: Counter = Counter()
    pairs: Counter = Counter()
    done = 0
    while done < cycles:
        b = min(batch, cycles - done)
        if model.batch != b:
            model.batch, model.context = b, model.context[:1].expand(b).clone()
        T = torch.full((b,), float(temperature), dtype=torch.float64, device=dev)
        u = Uniforms.random(b, cfg.K, cfg.B, cfg.depth, g, device=dev)
        tree = build_tree(model.draft_logits, cfg, T, u)
        result = verify(tree, model.target_logits(tree), T, cfg, u)
        toks, _ = _continue(model, cfg, T, result.tokens, result.lengths, 2, g)
        _count_rows(pairs, toks)
        done += b
    for (t1, _), c in pairs.items():
        first[t1] += c
    return first, pairs


def _count_rows(counts: Counter, rows: torch.Tensor) -> None:
    """Add each distinct row of ``rows`` [n, L] to ``counts`` (keyed by token tuple)."""
    if rows.numel():
        uniq, cnt = torch.unique(rows.cpu(), dim=0, return_counts=True)
        for row, c in zip(uniq.tolist(), cnt.tolist()):
            counts[tuple(row)] += c


def table_law(model, prefix: tuple, cfg: Params, temperature: float) -> dict:
    """p_T(. | prefix) of request 0 of a table model, as {token: prob} (float64)."""
    logits = model.logits_at(0, prefix, "target").to(torch.float64).unsqueeze(0)
    p = target_law(logits, torch.tensor([float(temperature)], dtype=torch.float64), cfg.target_filters)[0]
    nz = (p > 0).nonzero().squeeze(1)
    return dict(zip(nz.tolist(), p[nz].tolist()))
