"""EAGLE's tree verifier at T > 0 (SafeAILab/EAGLE, ``evaluate_posterior``), written from
its published description (summarised in docs/gate.md, "The example implementations"),
to the ``rheo gate --impl`` protocol.

A verifier only: the gate builds the tree with the reference. The draft probabilities are
not used ("q = 1" for every child, sample children included). At the current node, with
p' the target law there, the children are tried in slot order; child x is accepted when
``random.random() <= p'[x]``, else p'[x] := 0 and p' is renormalised. If none is accepted
the correction token is drawn from p'; at a node without children the bonus token is drawn
from the target law there.

- ``EagleVerifier``: lossless on any tree drawn independently of its coins (Top-K and Rheo
  trees): each step hands out exactly p'(x) to child x and the rest to the correction.
- ``EagleReleaseBonusBug``: lossy whenever T != 1 or a target filter is on: the bonus token
  comes from the raw target logits (the EAGLE-2 release bug, 2024-06 to 2025-04).

Randomness is its own (``follows_uniforms = False``; the handed uniforms are ignored):
Python's ``random.random()`` for the coins, ``torch.multinomial`` for bonus and correction
tokens. Laws are float32 tensors, as in the engine.

    rheo gate --impl examples.eagle_style:EagleVerifier           # passes (output law)
    rheo gate --impl examples.eagle_style:EagleReleaseBonusBug    # fails (output law)

The target law follows docs/spec.md §0 (temperature, then top_k, top_p, min_p with its tie
rules), not EAGLE's own filter order, so that the gate judges the verifier and not the
sampler. ``sglang_style`` reuses it.
"""

from __future__ import annotations

import random

import numpy as np
import torch

# float32 sums of exact boundary cases (a top-p run of mass exactly p, a token at exactly
# min_p times the largest) may round either way; both are kept, as in exact arithmetic
SLACK = 1e-6


def _keep(p: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """p restricted to the mask ``keep`` [V], renormalised."""
    p = torch.where(keep, p, torch.zeros_like(p))
    return p / p.sum()


def _ranked(p: torch.Tensor) -> torch.Tensor:
    """Token ids by probability, high to low; equal probabilities by id, low to high."""
    return torch.sort(p, descending=True, stable=True).indices


def target_law(logits, config: dict, temperature: float) -> torch.Tensor:
    """p_T [V] float32 from untempered target logits [V] (docs/spec.md §0).

    >>> [round(x, 6) for x in target_law(np.log([0.5, 0.25, 0.25]), {"target_top_k": 2}, 1.0).tolist()]
    [0.666667, 0.333333, 0.0]
    """
    x = torch.as_tensor(np.asarray(logits), dtype=torch.float32)  # [V]
    if temperature == 0:  # greedy: the best token, lowest id on ties (argmax takes the first)
        p = torch.zeros_like(x)
        p[int(torch.argmax(x))] = 1.0
        return p
    p = torch.softmax(x / float(temperature), dim=-1)
    k, top_p, min_p = config.get("target_top_k"), config.get("target_top_p"), config.get("target_min_p")
    if k is not None:
        keep = torch.zeros_like(p, dtype=torch.bool)
        keep[_ranked(p)[:k]] = True
        p = _keep(p, keep)
    if top_p is not None:
        order = _ranked(p)
        cum = torch.cumsum(p[order], dim=0)
        n = min(int((cum < top_p * (1 - SLACK)).sum()) + 1, len(p))  # shortest run with mass >= top_p
        keep = torch.zeros_like(p, dtype=torch.bool)
        keep[order[:n]] = True
        p = _keep(p, keep)
    if min_p is not None:
        p = _keep(p, p >= min_p * p.max() * (1 - SLACK))
    return p


def children_in_slot_order(tree: dict) -> dict[int, list[int]]:
    """parent index (-1 = the root) -> its children's node indices, in slot order."""
    parents, slots = np.asarray(tree["parents"]).tolist(), np.asarray(tree["slots"]).tolist()
    children: dict[int, list[int]] = {}
    for i in sorted(range(len(parents)), key=lambda i: slots[i]):
        children.setdefault(parents[i], []).append(i)
    return children


class EagleVerifier:
    """One-hot verification of a draft tree, EAGLE's ``evaluate_posterior`` at T > 0."""

    follows_uniforms = False

    def bonus_law(self, logits, config: dict, temperature: float) -> torch.Tensor:
        return target_law(logits, config, temperature)

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        tokens = np.asarray(tree["tokens"]).tolist()  # [R]
        logits = np.asarray(target_logits)  # [R+1, V]: row 0 the root, row i+1 node i
        children = children_in_slot_order(tree)
        node, out, accepted = -1, [], []
        while True:
            kids = children.get(node, [])
            if not kids:  # a whole path accepted: the bonus token
                p = self.bonus_law(logits[node + 1], config, temperature)
                out.append(int(torch.multinomial(p, 1)))
                return {"tokens": out, "accepted": accepted}
            p = target_law(logits[node + 1], config, temperature)  # p', float32
            moved = None
            for i in kids:
                x = tokens[i]
                if random.random() <= p[x]:  # EAGLE's coin (inclusive: a 0.0 accepts p'[x] = 0)
                    moved = i
                    break
                p[x] = 0.0
                p = p / p.sum()
            if moved is None:  # every child rejected: the correction token from p'
                out.append(int(torch.multinomial(p, 1)))
                return {"tokens": out, "accepted": accepted}
            out.append(tokens[moved])
            accepted.append(moved)
            node = moved


class EagleReleaseBonusBug(EagleVerifier):
    """The bonus token from softmax of the raw target logits (no temperature, no filters)."""

    def bonus_law(self, logits, config: dict, temperature: float) -> torch.Tensor:
        return torch.softmax(torch.as_tensor(np.asarray(logits), dtype=torch.float32), dim=-1)
