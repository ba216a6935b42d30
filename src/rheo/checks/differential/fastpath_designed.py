"""Designed decision examples for the fastpath's decision-equality check, run first in every
profile (smoke included), before the random ones: edge cases a few random draws rarely
reach (issue 24). Each is an example dict of ``fast_examples``' shape, so the check runs and
reports it as it does the random ones. Needs torch.

- **the proxy above 1**: m = 0 with epsilon 1, so q(x_1) + epsilon > 1 at every node and the
  proxy is its cap, 1 (docs/spec.md §2); a fastpath or reference without the cap scores the
  sample's subtree higher and builds another tree;
- **filters that interact**: target_top_k, target_top_p and target_min_p together, where
  top_p must read the law top_k renormalised (docs/spec.md §0's worked compositions), at
  three temperatures and over several tables.

Exact boundaries (a top-p run of exactly p, min_p at exactly the threshold) are decided
exactly only in Fraction arithmetic; the fastpath computes in floats, where such a
decision is rounding's (and set aside as near a threshold). They are designed cases of the
gate's exact matrix instead (``rheo.checks.gate.reference_checks.designed_cases``).
"""

from __future__ import annotations

from rheo.fastpath import FastConfig, TargetFilters


def designed_examples() -> list[dict]:
    """The designed examples, in the order the check runs them."""
    out = []
    for seed in (11, 12, 13):
        for K, depth, beam, budget in ((3, 3, 2, 6), (2, 2, 2, 4)):
            cfg = FastConfig(K=K, depth=depth, budget=budget, m=0, beam=beam, epsilon=1.0, draft_top_k=None)
            out.append({"case": (5, cfg), "seed": seed, "noise": 1.0, "zeros": 0.0, "temps": [1.0, 0.5, 0.0]})
    interacting = TargetFilters(top_k=3, top_p=0.75, min_p=0.2)
    for seed in (21, 22, 23, 24):
        for m, policy in ((1, "rheo"), (0, "rheo"), (0, "topk")):
            cfg = FastConfig(K=2, depth=2, budget=4, m=m, policy=policy, draft_top_k=None, filters=interacting)
            out.append({"case": (5, cfg), "seed": seed, "noise": 1.0, "zeros": 0.0, "temps": [1.0, 0.5, 0.8]})
    return out
