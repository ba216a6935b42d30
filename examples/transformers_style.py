"""transformers' assisted generation with sampling (``_speculative_sampling`` and the
assistant's drafting loop), written from its published description
(summarised in docs/gate.md, "The example implementations"), to the ``rheo gate --impl`` protocol.

A chain, not a tree: configurations with K = 1, policy "rheo", m = 0 only (``supports``;
``GreedyDraftChain`` also needs T > 0, from the config's "temperature" when it is given),
where every node has one child, a sample (kind 1, slot 0) whose ``sample_probs`` row is the
law q it was drawn from; node i's parent is node i-1 (node 0's is the root, -1).

Verification, ``_speculative_sampling``: with p_i the target law at the parent of node i
and q_i the node's law, token i is accepted while ``r_i <= p_i / q_i``,
``r = torch.rand_like(ratio)``; at the first rejection the replacement is drawn from
normalised (p - q)+ at that position, and if all are accepted the bonus from p at the last
node (``torch.multinomial``). The target law is transformers' own warpers' (``sampler_law``,
the protocol's optional method that the gate judges the output law against): temperature,
top-k keeping every token tied with the k-th, top-p in ``torch.sort``'s order, min-p. On
tied laws it differs from docs/spec.md §0's: a different but legitimate target sampler.

- ``ChainVerifier``: lossless (rejection sampling of each token against the law it was
  drawn from).
- ``GreedyDraftChain``: lossy at T > 0: the assistant drafts greedily yet reports its
  tempered law as q (transformers#32867, 4.42-4.44); at T = 0 greedy *is* that law.
- ``EarlyStopChain``: lossless: the assistant samples from q and stops after the first
  token whose probability is below 0.4 (that token is kept: dropping it would make its
  presence depend on its value), so only the chain's length varies.

Randomness is its own (``follows_uniforms = False``; the handed uniforms and u_draw are
ignored): ``torch.rand_like`` for the acceptance tests, ``torch.multinomial`` for drafted,
replacement and bonus tokens. Tensors are float32.

    rheo gate --impl examples.transformers_style:ChainVerifier       # passes (output law)
    rheo gate --impl examples.transformers_style:GreedyDraftChain    # fails (output law)
    rheo gate --impl examples.transformers_style:EarlyStopChain      # passes (output law)
"""

from __future__ import annotations

import numpy as np
import torch


class ChainVerifier:
    """``_speculative_sampling`` on a chain of drafted tokens."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        return config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0

    def sampler_law(self, logits, config: dict, temperature: float) -> np.ndarray:
        """transformers' warpers on untempered logits [V] -> probs [V] (float64).

        >>> law = ChainVerifier().sampler_law(np.log([0.4, 0.2, 0.2, 0.2]), {"target_top_k": 2}, 1.0)
        >>> np.round(law, 6).tolist()  # the 2nd place (0.2) is tied with two more: all stay
        [0.4, 0.2, 0.2, 0.2]
        """
        scores = torch.as_tensor(np.asarray(logits), dtype=torch.float32)  # [V]
        if temperature == 0:  # greedy decoding: the argmax, lowest id on ties
            p = np.zeros(len(scores))
            p[int(torch.argmax(scores))] = 1.0
            return p
        scores = scores / float(temperature)
        top_k, top_p, min_p = config.get("target_top_k"), config.get("target_top_p"), config.get("target_min_p")
        if top_k is not None and top_k < len(scores):
            kth = torch.topk(scores, top_k).values[-1]
            scores = scores.masked_fill(scores < kth, -float("inf"))
        if top_p is not None and top_p < 1:
            ascending, order = torch.sort(scores, descending=False)
            cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
            remove = cumulative <= 1 - top_p
            remove[-1] = False  # keep at least one token
            scores = scores.masked_fill(remove.scatter(0, order, remove), -float("inf"))
        if min_p is not None and min_p > 0:
            probs = scores.softmax(dim=-1)
            scores = scores.masked_fill(probs < min_p * probs.max(), -float("inf"))
        return scores.softmax(dim=-1).double().numpy()

    def chain(self, tree: dict) -> list[int]:
        """The node indices from the root down (each node has at most one child)."""
        child = {int(parent): i for i, parent in enumerate(np.asarray(tree["parents"]).tolist())}
        node, out = -1, []
        while node in child:
            node = child[node]
            out.append(node)
        return out

    def verify(self, tree: dict, target_logits, config: dict, temperature: float, uniforms: dict) -> dict:
        chain = self.chain(tree)
        n = len(chain)
        tokens = [int(np.asarray(tree["tokens"])[i]) for i in chain]
        logits = np.asarray(target_logits)  # [R+1, V]: row 0 the root, row i+1 node i
        rows = [0] + [i + 1 for i in chain]  # p at the parent of each chain node, then at the last
        p = torch.stack([torch.as_tensor(self.sampler_law(logits[r], config, temperature)) for r in rows]).float()
        q = torch.as_tensor(np.asarray(tree["sample_probs"])[chain], dtype=torch.float32)  # [n, V]
        ids = torch.tensor(tokens, dtype=torch.int64)[:, None]  # [n, 1]
        ratio = p[:n].gather(1, ids)[:, 0] / q.gather(1, ids)[:, 0]  # [n]
        r = torch.rand_like(ratio)
        is_accepted = r <= ratio
        n_matches = int(((~is_accepted).cumsum(dim=-1) < 1).sum())
        if n_matches == n:  # all accepted: the bonus token from p at the last node
            last = torch.multinomial(p[n], 1)
        else:
            residual = torch.clamp(p[n_matches] - q[n_matches], min=0)
            if residual.sum() <= 0:  # p == q up to rounding: nothing to correct towards
                residual = p[n_matches]
            last = torch.multinomial(residual / residual.sum(), 1)
        return {"tokens": tokens[:n_matches] + [int(last)], "accepted": chain[:n_matches]}


class AssistantChain(ChainVerifier):
    """An assistant that drafts a chain of up to min(depth, budget) tokens, then verifies it."""

    def draft_law(self, logits, config: dict, temperature: float) -> torch.Tensor:
        """q_T [V] float32: draft_top_k truncation (ties: lower id), then softmax(logits / T)."""
        scores = torch.as_tensor(np.asarray(logits), dtype=torch.float32)  # [V]
        k = config.get("draft_top_k")
        if k is not None and k < len(scores):
            drop = torch.sort(scores, descending=True, stable=True).indices[k:]
            scores = scores.clone()
            scores[drop] = -float("inf")
        if temperature == 0:
            q = torch.zeros_like(scores)
            q[int(torch.argmax(scores))] = 1.0
            return q
        return torch.softmax(scores / float(temperature), dim=-1)

    def next_token(self, logits, q: torch.Tensor) -> int:
        raise NotImplementedError

    def stops_after(self, q: torch.Tensor, token: int) -> bool:
        return False

    def build_tree(self, draft_logits, config: dict, temperature: float, u_draw) -> dict:
        path: tuple[int, ...] = ()
        laws = []
        for _ in range(min(config["depth"], config["budget"])):
            logits = np.asarray(draft_logits([path]), dtype=np.float64)[0]  # [V]
            q = self.draft_law(logits, config, temperature)
            token = self.next_token(logits, q)
            path += (token,)
            laws.append(q)
            if self.stops_after(q, token):
                break
        n = len(path)
        return {
            "tokens": np.array(path, dtype=np.int64),
            "parents": np.arange(-1, n - 1, dtype=np.int64),
            "kinds": np.ones(n, dtype=np.int64),  # every node a sample
            "slots": np.zeros(n, dtype=np.int64),
            "sample_probs": torch.stack(laws).double().numpy(),  # [n, V]: the law each token was drawn from
        }


class GreedyDraftChain(AssistantChain):
    """transformers#32867: greedy drafting, the tempered draft law reported as q."""

    def supports(self, config: dict) -> bool:  # at T = 0 greedy drafting is sampling q_0: no bug
        return super().supports(config) and config.get("temperature", 1.0) > 0

    def next_token(self, logits, q: torch.Tensor) -> int:
        return int(torch.argmax(torch.as_tensor(logits, dtype=torch.float32)))  # lowest id on ties


class EarlyStopChain(AssistantChain):
    """Sampled drafting that stops after a token the assistant is not confident about."""

    confidence_threshold = 0.4

    def next_token(self, logits, q: torch.Tensor) -> int:
        return int(torch.multinomial(q, 1))

    def stops_after(self, q: torch.Tensor, token: int) -> bool:
        return bool(q[token] < self.confidence_threshold)
