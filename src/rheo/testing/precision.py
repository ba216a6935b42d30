"""float32 against float64 on the fastpath (docs/spec.md §7): how often the trees and
outputs agree on the same uniforms, and how far scores and residual laws move."""

from __future__ import annotations

import torch

from rheo.fastpath import FastConfig, Uniforms, build_tree, verify
from rheo.testing.tables import HashTableModel


def float32_deviation(*, vocab: int = 2000, batch: int = 256, cycles: int = 4, seed: int = 0, device="cpu") -> dict:
    """The float32 path against the float64 one on random instances, same uniforms: the
    share of requests whose tree / output agree, and the largest |difference| of a path
    score or a sample's residual probability where the trees agree."""
    cfg = FastConfig(K=6, depth=5, budget=24, m=1)
    agree_tree = agree_out = total = 0
    max_score = max_prob = 0.0
    for c in range(cycles):
        m64 = HashTableModel(vocab, batch, seed=seed + c, rows=64, dtype=torch.float64, device=device)
        m32 = HashTableModel(vocab, batch, seed=seed + c, rows=64, dtype=torch.float32, device=device)
        g = torch.Generator(device=device).manual_seed(seed + c)
        u = Uniforms.random(batch, cfg.K, cfg.B, cfg.depth, g, device=device)
        T = torch.rand(batch, generator=g, device=device, dtype=torch.float64) * 1.5
        trees, results = [], []
        for model in (m64, m32):
            tree = build_tree(model.draft_logits, cfg, T, u)
            trees.append(tree)
            results.append(verify(tree, model.target_logits(tree), T, cfg, u))
        same_tree = ((trees[0].tokens == trees[1].tokens) & (trees[0].parents == trees[1].parents)).all(1)
        same_out = (results[0].tokens == results[1].tokens).all(1)
        total += batch
        agree_tree += int(same_tree.sum())
        agree_out += int(same_out.sum())
        if bool(same_tree.any()):
            max_score = max(max_score, float((trees[0].scores - trees[1].scores)[same_tree].abs().max()))
            dp = (trees[0].sample_probs - trees[1].sample_probs.to(torch.float64))[same_tree].abs().max()
            max_prob = max(max_prob, float(dp))
    return {
        "requests": total,
        "tree_agreement": agree_tree / total,
        "output_agreement": agree_out / total,
        "max_abs_score_deviation": max_score,
        "max_abs_residual_prob_deviation": max_prob,
    }
