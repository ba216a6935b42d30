"""Implementations of a slice of the configuration space: each declares what it implements
with ``supports(config)``, and ``rheo gate --impl`` draws its cases from that slice only
(``rheo.checks.cases.space``), reporting per dimension what it covered, supported and
refused. All follow the handed uniforms (``examples.loop_impl``), so decision equality,
exact certification and the output law all run.

    rheo gate --impl examples.restricted:TopKTrees          # passes: Top-K trees, no filters
    rheo gate --impl examples.restricted:GreedyOnly         # passes on exact certification alone
    rheo gate --impl examples.restricted:ChainBonusUntempered   # exits 1: a finding at T != 1

Lossless:

- ``TopKTrees``: Top-K trees only, without target filters.
- ``Chains``: chains only (K = 1: sampled drafts under Rheo, the greedy draft under Top-K).
- ``GreedyDraftChains``: greedy-draft chains only (policy topk, K = 1).
- ``OneLeadHalfTemperature``: Rheo trees with m = 1 at T = 1/2 only.
- ``GreedyOnly``: T = 0 only; its output law is a point mass per cycle, so exact
  certification decides alone and the output-law check is "not applicable".

Lossy:

- ``ChainBonusUntempered``: chains only; the bonus token after the last draft is drawn
  from the *untempered* target law. At T = 1 that is the same law, so the bug shows only
  at T != 1, where exact certification finds it.
"""

from __future__ import annotations

import numpy as np

from examples.loop_impl import LoopImplementation

FILTERS = ("target_top_k", "target_top_p", "target_min_p")


def unfiltered(config: dict) -> bool:
    return all(config.get(k) is None for k in FILTERS)


class TopKTrees(LoopImplementation):
    def supports(self, config: dict) -> bool:
        return config["policy"] == "topk" and config["K"] > 1 and unfiltered(config)


class Chains(LoopImplementation):
    def supports(self, config: dict) -> bool:
        return config["K"] == 1


class GreedyDraftChains(LoopImplementation):
    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["policy"] == "topk"


class OneLeadHalfTemperature(LoopImplementation):
    def supports(self, config: dict) -> bool:
        return config["policy"] == "rheo" and config.get("m") == 1 and config["temperature"] == 0.5


class GreedyOnly(LoopImplementation):
    def supports(self, config: dict) -> bool:
        return config["temperature"] == 0


class ChainBonusUntempered(Chains):
    def bonus_law(self, p: np.ndarray, logits: np.ndarray, config: dict, temperature: float) -> np.ndarray:
        return self.target_law(logits, config, 1.0 if temperature > 0 else 0.0)
