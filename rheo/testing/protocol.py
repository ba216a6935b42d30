"""The fastpath through the gate's batched protocol (``build_tree_batch`` / ``verify_batch``,
rheo.checks.batched), and planted bugs in the same shape that the batched checks must catch.

    rheo gate --impl rheo.testing.protocol:Fastpath                # passes: the fastpath itself
    rheo gate --impl rheo.testing.protocol:FastpathOwnGenerator    # passes: its own draws
    rheo gate --impl rheo.testing.protocol:ReusedUniformBatched    # fails: one uniform twice
    rheo gate --impl rheo.testing.protocol:SampleLastBatched       # fails: sample_last verifier

Specification: docs/spec.md §1-§4 and §7 (what the fastpath computes).
"""

from __future__ import annotations

import torch

from rheo.fastpath import DraftTree, Params, Uniforms, VerifyResult, build_tree, verify
from rheo.testing.planted import reuse_sample_uniform


class Fastpath:
    """``rheo.fastpath.build_tree`` and ``verify`` on the uniforms the gate hands over."""

    def build_tree_batch(
        self, draft_logits, params: Params, temperature: torch.Tensor, uniforms: Uniforms
    ) -> DraftTree:
        return build_tree(draft_logits, params, temperature, uniforms)

    def verify_batch(
        self, tree: DraftTree, target_logits: torch.Tensor, params: Params, temperature: torch.Tensor, uniforms
    ) -> VerifyResult:
        return verify(tree, target_logits, temperature, params, uniforms)


class FastpathOwnGenerator(Fastpath):
    """The fastpath drawing its own uniforms from the generator the gate hands over (an
    engine with its own randomness): build and verify draw independently."""

    follows_uniforms = False

    def _uniforms(self, params: Params, b: int, generator: torch.Generator) -> Uniforms:
        return Uniforms.random(b, params.K, params.B, params.depth, generator, device=generator.device)

    def build_tree_batch(self, draft_logits, params, temperature, generator) -> DraftTree:
        return build_tree(draft_logits, params, temperature, self._uniforms(params, temperature.shape[0], generator))

    def verify_batch(self, tree, target_logits, params, temperature, generator) -> VerifyResult:
        u = self._uniforms(params, temperature.shape[0], generator)
        return verify(tree, target_logits, temperature, params, u)


class ReusedUniformBatched(Fastpath):
    """Planted bug: the first deterministic coin reuses the stochastic coin's uniform."""

    def verify_batch(self, tree, target_logits, params, temperature, uniforms) -> VerifyResult:
        u = Uniforms(uniforms.u_draw, uniforms.u_sample, uniforms.u_det.clone(), uniforms.u_final)
        reuse_sample_uniform(u)
        return verify(tree, target_logits, temperature, params, u)


class SampleLastBatched(Fastpath):
    """Planted bug: the stochastic step is verified last (docs/spec.md §4's control)."""

    def supports(self, config: dict) -> bool:
        return config["policy"] == "rheo" and config["K"] > 1  # the order matters only beside other children

    def verify_batch(self, tree, target_logits, params, temperature, uniforms) -> VerifyResult:
        return verify(tree, target_logits, temperature, params.replace(verify="sample_last"), uniforms)
