"""Adapter for mini-infer 0.2.5 (pip install mini-infer==0.2.5): mini_infer.speculative.speculative_step.

speculative_step(target_model, draft_model, prefix_ids, k_draft, temperature) runs a whole cycle: it
drafts k_draft tokens with the draft model, scores them with the target in one forward, and accepts,
rejects and resamples. It is handed two stand-in models that answer from the gate's laws: the prefix is
one dummy token, and the logits at position i are the law after the first i drafted tokens.

    rheo gate --impl examples/field/field_mini_infer.py:SpeculativeStep
"""

from __future__ import annotations

import torch
from mini_infer.speculative.verifier import speculative_step

FILTERS = ("draft_top_k", "target_top_k", "target_top_p", "target_min_p")
PREFIX = 0  # the dummy prompt token; the laws ignore it


class _LawModel:
    """A stand-in for Qwen2ForCausalLM: model(ids [1, L]) -> (logits [1, L, V], None).

    Position i answers laws(path) for path = ids[0, 1 : i + 1]; with last_only, only the last
    position is asked (the other rows are zeros), which is all a drafter reads."""

    def __init__(self, laws, last_only):
        self.laws, self.last_only = laws, last_only

    def __call__(self, ids):
        tokens = tuple(int(t) for t in ids[0, 1:])
        positions = [len(tokens)] if self.last_only else range(len(tokens) + 1)
        rows = torch.as_tensor(self.laws([tokens[:i] for i in positions]), dtype=torch.float64)
        if self.last_only:
            out = torch.zeros(len(tokens) + 1, rows.shape[-1], dtype=torch.float64)
            out[-1] = rows[0]
            rows = out
        return rows[None], None


class SpeculativeStep:
    """mini_infer.speculative.verifier.speculative_step; T = 0 is its greedy branch."""

    follows_uniforms = False

    def supports(self, config):
        return config["K"] == 1 and all(config[f] is None for f in FILTERS)

    def cycle(self, draft_logits, target_logits, config, temperature):
        k = min(int(config["depth"]), int(config["budget"]))
        tokens, _ = speculative_step(
            _LawModel(target_logits, last_only=False),
            _LawModel(draft_logits, last_only=True),
            torch.tensor([[PREFIX]]),
            k_draft=k,
            temperature=float(temperature),
        )
        return [int(t) for t in tokens]
