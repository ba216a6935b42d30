"""One draft-verify cycle for a batch: build T_R, run the target once over it, verify.

>>> import torch
>>> from rheo.fastpath import FastConfig, run_cycle
>>> from rheo.testing import HashTableModel
>>> model = HashTableModel(1000, batch=4, seed=1)
>>> cfg = FastConfig(K=4, depth=3, budget=8, m=1)
>>> tree, result = run_cycle(model, cfg, torch.tensor([1.0, 0.7, 0.0, 1.3]),
...                          generator=torch.Generator().manual_seed(0))
>>> tree.tokens.shape, result.tokens.shape, bool((result.lengths >= 1).all())
(torch.Size([4, 8]), torch.Size([4, 4]), True)
"""
from __future__ import annotations

import torch

from .config import FastConfig
from .tree import DraftTree, build_tree
from .uniforms import Uniforms
from .verify import VerifyResult, verify


def run_cycle(model, cfg: FastConfig, temperature: torch.Tensor, uniforms: Uniforms | None = None,
              generator: torch.Generator | None = None) -> tuple[DraftTree, VerifyResult]:
    """Draft, verify and commit one cycle. temperature: [b] (or a float for all requests).
    Randomness: explicit ``uniforms`` (SPEC 7) or fresh ones from ``generator``."""
    T = torch.as_tensor(temperature, dtype=torch.float64, device=model.device)
    if T.dim() == 0:
        T = T.expand(model.batch)
    if uniforms is None:
        device = model.device if generator is None else generator.device
        uniforms = Uniforms.random(T.shape[0], cfg.K, cfg.B, cfg.depth, generator, device=device)
    uniforms = uniforms.to(device=model.device)
    tree = build_tree(model.draft_logits, cfg, T, uniforms)
    result = verify(tree, model.target_logits(tree), T, cfg, uniforms)
    model.advance(tree, result)
    return tree, result
