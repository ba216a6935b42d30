"""An engine-format verifier behind the gate: EAGLE's tree verifier at T > 0
(SafeAILab/EAGLE, ``evaluate_posterior``), written the way the engine writes it, on EAGLE's
tensors, and the few lines that let ``rheo gate --impl`` run it.

``evaluate_posterior`` reads only what EAGLE's reads: the candidates per root-to-leaf path
(root token first, -1 padded) and the target logits gathered along the same paths
(``retrieve_indices``). Its rule (docs/gate.md, "The example implementations"): draft probabilities are not
used (q = 1); at the accepted node, with p' the target law there, its distinct children
are tried in path order (the rows of ``retrieve_indices``); child x is accepted when
Python's ``random.random() <= p'(x)``, else p'(x) := 0 and p' is renormalised; if none is
accepted the correction token is drawn from p', and after a whole path the bonus token
from the target law at its last node. The caller draws that token (``torch.multinomial``).

``EagleFormatAdapter.verify`` is the adapter: the gate's protocol tree goes to EAGLE's
format (``rheo.integrations.tree_formats.protocol_to_eagle``), the target logits are put in
EAGLE's index order and gathered per path, and the engine's answer (best row, accepted
length, token) comes back as the protocol's result. The tree is the reference's
(docs/spec.md §3); the verifier is lossless on it because each step hands child x exactly
p'(x) and the correction the rest (docs/spec.md §5 judges the output law).

    rheo gate --impl examples.engine_format_adapter:EagleFormatAdapter --profile smoke

Randomness is its own (``follows_uniforms = False``). The target law is docs/spec.md §0's
(``examples.eagle_style.target_law``: temperature, then top_k, top_p, min_p), so that the
gate judges the verifier and the format round trip, not a sampler.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from examples.eagle_style import target_law
from rheo.integrations.tree_formats import eagle_result_to_protocol, gather_paths, protocol_rows, protocol_to_eagle

# The protocol does not hold the last committed token; EAGLE only reads it as column 0 of
# every path, the same on every row, so any id serves.
ROOT_TOKEN = 0


def evaluate_posterior(logits: torch.Tensor, candidates: torch.Tensor, law) -> tuple[int, int, torch.Tensor]:
    """EAGLE's T > 0 rule on per-path tensors.

    logits:     [P, W, V] target logits along each path (column c: after its first c + 1 tokens)
    candidates: [P, W] token ids along each path, the root token first, -1 padded
    law:        logits [V] -> the target law [V] (EAGLE's logits processor, then softmax)
    Returns (best_candidate, accept_length, sample_p): the row whose path holds the accepted
    tokens, how many draft tokens were accepted, and the law of the token drawn after them.
    """
    accepted = candidates[0, :1]  # the root token
    best = 0
    for i in range(1, candidates.shape[1]):
        on_path = torch.nonzero((candidates[:, :i] == accepted).all(dim=1)).flatten().tolist()
        p = law(logits[on_path[0], i - 1])  # p' at the accepted node
        tried: set[int] = set()
        moved = False
        for j in on_path:  # its children, in path order
            x = int(candidates[j, i])
            if x == -1 or x in tried:
                continue
            tried.add(x)
            if random.random() <= p[x]:
                accepted = torch.cat([accepted, candidates[j, i : i + 1]])
                best, moved = j, True
                break
            p[x] = 0.0
            p = p / p.sum()
        if not moved:
            if tried:  # every child rejected: the correction token from p'
                return best, i - 1, p
            break  # the accepted node is a leaf
    return best, len(accepted) - 1, law(logits[best, len(accepted) - 1])  # the bonus token's law


class EagleFormatAdapter:
    """EAGLE's verifier on EAGLE's tensors, run on the gate's protocol trees."""

    follows_uniforms = False

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        eagle = protocol_to_eagle(tree, ROOT_TOKEN)
        logits = torch.as_tensor(np.asarray(target_logits))[protocol_rows(eagle)]  # [N+1, V], EAGLE's order
        best, length, sample_p = evaluate_posterior(
            gather_paths(eagle, logits), eagle.candidates, lambda row: target_law(row.numpy(), config, temperature)
        )
        token = int(torch.multinomial(sample_p, 1))
        return eagle_result_to_protocol(eagle, best, length, token)
