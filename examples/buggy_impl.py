"""The loop implementation with one realistic bug each; ``rheo gate --impl`` catches both.

    rheo gate --impl examples.buggy_impl:TokenTieBreak    # exits 1, counterexample saved
    rheo gate --impl examples.buggy_impl:ReusedUniform    # exits 1, counterexample saved

- ``TokenTieBreak``: the tree builder ranks nodes with equal scores by their *token* path
  (what ``sorted`` over (score, tokens) or a top-k over flattened token ids gives you).
  Which equal-score node survives pruning then depends on the drawn token, so survival
  carries information about Y and the verifier's law for it is wrong (docs/spec.md §3).
- ``ReusedUniform``: the verifier flips the first deterministic child's coin with the
  sample's uniform (one uniform per depth instead of one per decision), so the two
  decisions are correlated (docs/spec.md §7).
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
