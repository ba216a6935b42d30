"""One draft-verify cycle for a batch (docs/spec.md §3-§4, on the uniforms of §7): build
T_R, run the target once over it, verify, commit.

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

from rheo.reference.params import Params

from .inputs import expect, expect_params
from .models import SpecModel
from .tree import DraftTree, build_tree
from .uniforms import Uniforms
from .verify import VerifyResult, verify


def run_cycle(
    model: SpecModel,
    params: Params,
    temperature: torch.Tensor | float,
    uniforms: Uniforms | None = None,
    generator: torch.Generator | None = None,
) -> tuple[DraftTree, VerifyResult]:
    """Draft, verify and commit one cycle. temperature: [b] (or a float for all requests).
    Randomness: explicit ``uniforms`` (docs/spec.md §7) or fresh ones from ``generator``."""
    expect_params("run_cycle", params)
    T = torch.as_tensor(temperature, dtype=torch.float64, device=model.device)
    if T.dim() == 0:
        T = T.expand(model.batch)
    expect("run_cycle", "temperature", T, "[b] (b = model.batch) or a float", (model.batch,), "float")
    if uniforms is None:
        device = model.device if generator is None else generator.device
        uniforms = Uniforms.random(model.batch, params.K, params.B, params.depth, generator, device=device)
    uniforms = uniforms.expect_for("run_cycle", params, model.batch).to(device=model.device)
    tree = build_tree(model.draft_logits, params, T, uniforms)
    result = verify(tree, model.target_logits(tree), T, params, uniforms)
    model.advance(tree, result)
    return tree, result
