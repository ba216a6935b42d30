"""Planted bugs through the gate's batched protocol (``build_tree_batch`` / ``verify_batch``,
rheo.checks.statistics.batched) that its checks must catch; the fastpath itself through the protocol
is rheo.integrations.fastpath_protocol.

    rheo gate --impl rheo.testing.protocol:ReusedUniformBatched    # fails: one uniform twice
    rheo gate --impl rheo.testing.protocol:SampleLastBatched       # fails: sample_last verifier

Specification: docs/spec.md §1-§4 and §7 (what the fastpath computes).
"""

from __future__ import annotations

import torch

from rheo.fastpath import Params, Uniforms, VerifyResult, build_tree, verify
from rheo.testing.planted import reuse_sample_uniform


class _Batched:
    """The fastpath, through the batched protocol, on the uniforms the gate hands over."""

    def build_tree_batch(self, draft_logits, params: Params, temperature: torch.Tensor, uniforms: Uniforms):
        return build_tree(draft_logits, params, temperature, uniforms)


class ReusedUniformBatched(_Batched):
    """Planted bug: the first deterministic coin reuses the stochastic coin's uniform."""

    def verify_batch(self, tree, target_logits, params, temperature, uniforms) -> VerifyResult:
        u = Uniforms(uniforms.u_draw, uniforms.u_sample, uniforms.u_det.clone(), uniforms.u_final)
        reuse_sample_uniform(u)
        return verify(tree, target_logits, temperature, params, u)


class SampleLastBatched(_Batched):
    """Planted bug: the stochastic step is verified last (docs/spec.md §4's control)."""

    def supports(self, config: dict) -> bool:
        return config["policy"] == "rheo" and config["K"] > 1  # the order matters only beside other children

    def verify_batch(self, tree, target_logits, params, temperature, uniforms) -> VerifyResult:
        return verify(tree, target_logits, temperature, params.replace(verify="sample_last"), uniforms)
