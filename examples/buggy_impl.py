"""The loop implementation with one deviation each, all following the handed uniforms.
``rheo gate --impl`` catches every one by decision equality; the output law also fails
the lossy ones and passes the two lossless ones (another algorithm, not a lossy one).

    rheo gate --impl examples.buggy_impl:TokenTieBreak    # exits 1, counterexample saved
    rheo gate --impl examples.buggy_impl:ReusedUniform    # exits 1, counterexample saved

Lossy:

- ``TokenTieBreak``: the tree builder ranks nodes with equal scores by their *token* path
  (what ``sorted`` over (score, tokens) or a top-k over flattened token ids gives you).
  Which equal-score node survives pruning then depends on the drawn token, so survival
  carries information about Y and the verifier's law for it is wrong (docs/spec.md §3).
- ``ReusedUniform``: the verifier flips the first deterministic child's coin with the
  sample's uniform (one uniform per depth instead of one per decision), so the two
  decisions are correlated (docs/spec.md §7).
- ``SkippedFilters``: the verifier ignores target_top_k, target_top_p and target_min_p, so
  it verifies against (and emits from) the unfiltered law (docs/spec.md §0).

Lossless, yet not docs/spec.md's algorithm (the tree differs, the verification law is right):

- ``IgnoresDraftTopK``: the builder ignores draft_top_k: it ranks and draws from the whole
  draft law, and reports that residual law, which the verifier then uses (docs/spec.md §1).
- ``UntemperedResidual``: the builder draws the sample from the untempered residual law and
  reports that law (docs/spec.md §1, "which law where").
"""

from __future__ import annotations

from examples.loop_impl import LoopImplementation


class TokenTieBreak(LoopImplementation):
    def order_key(self, node: dict) -> tuple:
        return (-node["score"], len(node["path"]), node["path"])


class ReusedUniform(LoopImplementation):
    def coin_uniform(self, uniforms: dict, d: int, step: int, stochastic: bool) -> float:
        if stochastic or step == 0:
            return float(uniforms["u_sample"][d])
        return float(uniforms["u_det"][d][step])


class SkippedFilters(LoopImplementation):
    def target_law(self, logits, config: dict, temperature: float):
        unfiltered = {**config, "target_top_k": None, "target_top_p": None, "target_min_p": None}
        return super().target_law(logits, unfiltered, temperature)


class IgnoresDraftTopK(LoopImplementation):
    def draft_law(self, logits, config: dict):
        return super().draft_law(logits, {**config, "draft_top_k": None})


class UntemperedResidual(LoopImplementation):
    def expand(self, parent: dict, logits, config: dict, temperature: float, u: float) -> list[dict]:
        return super().expand(parent, logits, config, 1.0, u)
