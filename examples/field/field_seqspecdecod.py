"""Adapters for sequential-speculative-decoding 0.1.1 (pip install sequential-speculative-decoding==0.1.1,
import name seqspecdecod): its three step functions, each one whole cycle.

Each step(draft_model, target_model, input_ids, gamma, draft_temperature, target_temperature) calls
model(ids).logits; it is handed stand-in models that answer from the gate's laws (the prompt is one
dummy token; position i's logits are the law after the first i new tokens). The step returns the
extended sequence; the adapter returns the new tokens. Both temperatures are the gate's T.

    rheo gate --impl examples/field/field_seqspecdecod.py:StandardStep
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from seqspecdecod.capped_hsd import capped_hsd_step
from seqspecdecod.naive_hsd import naive_hsd_step
from seqspecdecod.standard_sd import standard_speculative_step

FILTERS = ("draft_top_k", "target_top_k", "target_top_p", "target_min_p")
PREFIX = 0  # the dummy prompt token; the laws ignore it


class _LawModel:
    """A stand-in for a transformers causal LM: model(ids [1, L]).logits is [1, L, V]; position i
    answers laws(ids[0, 1 : i + 1]). With last_only (the drafter: the steps read only its last
    position) the other rows are zeros."""

    def __init__(self, laws, last_only, depth=None, vocab=None):
        self.laws, self.last_only, self.depth, self.vocab = laws, last_only, depth, vocab

    def __call__(self, ids):
        tokens = tuple(int(t) for t in ids[0, 1:])
        if self.last_only and self.depth is not None and len(tokens) >= self.depth:
            # naive_hsd_step drafts once more after its last resampled token and discards the
            # result; the gate has no draft law that deep, so this forward answers zeros
            return SimpleNamespace(logits=torch.zeros(1, len(tokens) + 1, self.vocab, dtype=torch.float64))
        positions = [len(tokens)] if self.last_only else range(len(tokens) + 1)
        rows = torch.as_tensor(self.laws([tokens[:i] for i in positions]), dtype=torch.float64)
        if self.last_only:
            out = torch.zeros(len(tokens) + 1, rows.shape[-1], dtype=torch.float64)
            out[-1] = rows[0]
            rows = out
        return SimpleNamespace(logits=rows[None])


class _Step:
    follows_uniforms = False
    step = None

    def supports(self, config):
        return config["K"] == 1 and all(config[f] is None for f in FILTERS)

    def cycle(self, draft_logits, target_logits, config, temperature):
        gamma = min(int(config["depth"]), int(config["budget"]))
        prompt = torch.tensor([[PREFIX]])
        out, _, _ = type(self).step(
            _LawModel(draft_logits, last_only=True, depth=gamma, vocab=int(config["vocab_size"])),
            _LawModel(target_logits, last_only=False),
            prompt,
            gamma=gamma,
            draft_temperature=float(temperature),
            target_temperature=float(temperature),
        )
        return [int(t) for t in out[0, 1:]]


class StandardStep(_Step):
    """seqspecdecod.standard_sd.standard_speculative_step (Leviathan et al.)."""

    step = staticmethod(standard_speculative_step)


class NaiveHSDStep(_Step):
    """seqspecdecod.naive_hsd.naive_hsd_step (naive hierarchical speculative decoding)."""

    step = staticmethod(naive_hsd_step)


class CappedHSDStep(_Step):
    """seqspecdecod.capped_hsd.capped_hsd_step (capped hierarchical speculative decoding, Algorithm 2
    of its paper)."""

    step = staticmethod(capped_hsd_step)
