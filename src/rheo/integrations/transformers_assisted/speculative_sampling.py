"""transformers' chain verifier alone: ``_speculative_sampling`` run as the protocol's
``verify`` on chain trees.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.generation.utils import _speculative_sampling

from rheo.integrations.transformers_assisted.generators import (
    GENERATE_PARAMETERS,
    PROCESSORS,
    context_of,
    is_chain,
    one_thread,
    parameters_set,
    sampling_refusal,
)


class SpeculativeSampling:
    """``transformers.generation.utils._speculative_sampling`` as the protocol's ``verify``
    on chain trees: candidate_logits log q (the nodes' ``sample_probs`` rows, so that its
    softmax is the law each token was drawn from), new_logits the target rows (the root,
    then each node) through transformers' processors, as ``_assisted_decoding`` prepares
    them. T = 0 is not this function's case (greedy decoding takes another path).

    Sampling parameters: the processors read ``input_ids`` = [anchor V] + prompt + generated
    + the chain up to each row, over V + 1 tokens (the anchor's logit -inf), as
    ``generate``'s adapters give them (``Processors``)."""

    follows_uniforms = False
    sampling_parameters = GENERATE_PARAMETERS

    def supports(self, config: dict) -> bool:
        return (
            is_chain(config)
            and config.get("temperature", 1.0) > 0
            and sampling_refusal(config, self.sampling_parameters) is None
        )

    def sampler_law(self, logits, config: dict, temperature: float, history=None) -> np.ndarray:
        return PROCESSORS.law(logits, config, temperature, history)

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        parents = [int(p) for p in np.asarray(tree["parents"]).tolist()]
        child = {p: i for i, p in enumerate(parents)}
        chain, node = [], -1
        while node in child:
            node = child[node]
            chain.append(node)
        L = len(chain)
        if L == 0:
            raise NotImplementedError("an empty chain: _assisted_decoding does not call _speculative_sampling")
        tokens = [int(np.asarray(tree["tokens"])[i]) for i in chain]
        rows = np.asarray(target_logits, dtype=np.float64)[[0] + [i + 1 for i in chain]]  # [L + 1, V]
        V = rows.shape[1]
        if parameters_set(config):  # the history before the root: the anchor, prompt + generated
            before = [V, *context_of(config)]
            rows = np.concatenate([rows, np.full((L + 1, 1), -np.inf)], axis=1)  # the anchor's column
        else:
            before = [0]  # the root's token
        ids = torch.tensor([before + tokens], dtype=torch.long)  # [1, len(before) + L]
        processors = PROCESSORS.get(config, temperature)
        with one_thread():
            new_logits = torch.as_tensor(rows, dtype=torch.float32)[None].clone()  # [1, L + 1, V (+ 1)]
            for i in range(L + 1):
                new_logits[:, i, :] = processors(ids[:, : len(before) + i], new_logits[:, i, :])
            new_logits = new_logits[:, :, :V].contiguous()
            q = np.asarray(tree["sample_probs"], dtype=np.float64)[chain]  # [L, V]
            with np.errstate(divide="ignore"):
                candidate_logits = torch.as_tensor(np.log(q), dtype=torch.float32)[None]  # [1, L, V]
            valid, n_matches = _speculative_sampling(ids, candidate_logits, L, new_logits)
        return {"tokens": [int(t) for t in valid[0].tolist()], "accepted": chain[: int(n_matches)]}
