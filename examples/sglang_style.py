"""SGLang's tree verifier at T > 0 (``tree_speculative_sampling_target_only``), written from
its published description (summarised in docs/gate.md, "The example implementations"),
to the ``rheo gate --impl`` protocol.

A verifier only: the gate builds the tree with the reference. Draft probabilities are
unused. One coin per level: at the current node, with p the target law there, the children
are visited in slot (sibling) order with a running sum of their target probabilities, and
the first child whose running sum exceeds the coin is accepted (then the next level, a new
coin). If none is, the correction token is drawn from p with the visited children removed,
renormalised; at a node without children the bonus token is drawn from p.

- ``SGLangVerifier``: lossless: the coin lands in child x's interval with probability p(x),
  and beyond all of them with the mass the correction law carries.
- ``SGLangThreshold``: lossy: ``threshold_single = 0.5`` accepts a child outright when its
  target probability is at least 0.5, i.e. more often than p(x) (SGLang's knob below 1).

Randomness is its own (``follows_uniforms = False``; the handed uniforms are ignored):
``torch.rand(1)`` for each level's coin, ``torch.multinomial`` for bonus and correction
tokens. Laws are float32 tensors; the target law is docs/spec.md §0's (``eagle_style``).

    rheo gate --impl examples.sglang_style:SGLangVerifier     # passes (output law)
    rheo gate --impl examples.sglang_style:SGLangThreshold    # fails (output law)
"""

from __future__ import annotations

import numpy as np
import torch

from examples.eagle_style import children_in_slot_order, target_law


class SGLangVerifier:
    """One coin per level against the running sum of the children's target probabilities."""

    follows_uniforms = False
    threshold_single = 1.0  # accept a child outright at p(x) >= this; 1 = off (lossless)

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        tokens = np.asarray(tree["tokens"]).tolist()  # [R]
        logits = np.asarray(target_logits)  # [R+1, V]: row 0 the root, row i+1 node i
        children = children_in_slot_order(tree)
        node, out, accepted = -1, [], []
        while True:
            p = target_law(logits[node + 1], config, temperature)  # [V] float32
            kids = children.get(node, [])
            if not kids:  # bonus token
                out.append(int(torch.multinomial(p, 1)))
                return {"tokens": out, "accepted": accepted}
            coin = torch.rand(1)
            running = torch.zeros(1)
            moved = None
            for i in kids:
                running = running + p[tokens[i]]
                if running > coin or p[tokens[i]] >= self.threshold_single:
                    moved = i
                    break
            if moved is None:
                rest = p.clone()
                rest[[tokens[i] for i in kids]] = 0.0
                if rest.sum() > 0:  # correction token from p without the visited children
                    out.append(int(torch.multinomial(rest / rest.sum(), 1)))
                    return {"tokens": out, "accepted": accepted}
                # the children hold all the mass and float rounding left their sum a hair
                # below the coin: the last child with mass (as an inverse CDF would)
                moved = [i for i in kids if p[tokens[i]] > 0][-1]
            out.append(tokens[moved])
            accepted.append(moved)
            node = moved


class SGLangThreshold(SGLangVerifier):
    threshold_single = 0.5
