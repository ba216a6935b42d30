"""Adapters for economize 0.3.2 (pip install economize==0.3.2): the verifiers of its decoding loop
(economize.decoding.verifiers), called the way economize.decoding.loop calls them.

Selectors: T > 0 is economize's TopPSampler (temperature and nucleus; sampler_law below is its own
distributions(), so the gate judges against the law economize samples from without drafts); T = 0 is
its GreedySelector. TopPSampler draws from a private torch.Generator seeded with `seed`; the gate's
exact certification follows only unseeded draws, so `_UnseededTopP` returns no generator from
generator_for (economize then uses torch's global generator; see economize's selector_generator).
Nothing else changes: the laws, the coins' comparisons and the residuals are economize's.

    rheo gate --impl examples/field/field_economize.py:RejectionVerifyTree
"""

from __future__ import annotations

import torch
from economize.decoding.config import DecodeConfig
from economize.decoding.protocols import Draft
from economize.decoding.selectors import GreedySelector, TopPSampler
from economize.decoding.verifiers import GreedyVerifier, RejectionVerifier, TypicalVerifier

PREFIX = 0  # the dummy last committed token; the selectors ignore the history


class _UnseededTopP(TopPSampler):
    """TopPSampler drawing from torch's global generator (for exact certification)."""

    def generator_for(self, device):
        return None


def _top_p(config):
    return 1.0 if config["target_top_p"] is None else float(config["target_top_p"])


def _selector(config, temperature):
    if temperature == 0:
        return GreedySelector()
    return _UnseededTopP(temperature=float(temperature), top_p=_top_p(config), seed=0)


class _Economize:
    follows_uniforms = False

    def supports(self, config):
        # target top_p is TopPSampler's; top_k and min_p have no economize selector
        return (
            config["K"] == 1
            and config["draft_top_k"] is None
            and config["target_top_k"] is None
            and config["target_min_p"] is None
        )

    def sampler_law(self, logits, config, temperature):
        logits = torch.as_tensor(logits, dtype=torch.float64)
        if temperature == 0:
            return GreedySelector().distributions(logits).double().numpy()
        return TopPSampler(float(temperature), _top_p(config)).distributions(logits).double().numpy()

    def selector(self, config, temperature):
        return _selector(config, temperature)

    def cycle(self, draft_logits, target_logits, config, temperature):
        return self.cycle_batch(draft_logits, target_logits, config, temperature, 1)[0]


class RejectionVerify(_Economize):
    """RejectionVerifier.draft for every draft, then RejectionVerifier.verify: the row-by-row chain path
    (one coin per draft verified, then one draw for the residual or the selector's bonus)."""

    verifier = "rejection"

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        return [self._one(draft_logits, target_logits, config, temperature) for _ in range(rows)]

    def _one(self, draft_logits, target_logits, config, temperature):
        verifier = RejectionVerifier(DecodeConfig(verifier=self.verifier))
        selector = self.selector(config, temperature)
        k = min(int(config["depth"]), int(config["budget"]))
        drafts, probs = [], []
        for _ in range(k):
            logits = torch.as_tensor(draft_logits([tuple(drafts)])[0], dtype=torch.float32)
            token, dist = verifier.draft(logits, selector, torch.tensor([PREFIX] + drafts))
            drafts.append(int(token))
            probs.append(dist)
        exact = torch.as_tensor(target_logits([tuple(drafts[:i]) for i in range(k + 1)]), dtype=torch.float32)
        history = torch.tensor([PREFIX] + drafts)
        accepted, following = verifier.verify(exact, drafts, torch.stack(probs), selector, history, 1)
        return drafts[:accepted] + [int(following)]


class RejectionVerifyBatch(_Economize):
    """RejectionVerifier.draft_many per position, then RejectionVerifier.verify_batch: the batched
    chain path (a [B, width] block of coins, then one draw per row)."""

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        verifier = RejectionVerifier(DecodeConfig(verifier="rejection"))
        selector = self.selector(config, temperature)
        k = min(int(config["depth"]), int(config["budget"]))
        paths = [() for _ in range(rows)]
        tokens, probs = [], []
        for _ in range(k):
            logits = torch.as_tensor(draft_logits(paths), dtype=torch.float32)
            x, dist = verifier.draft_many(logits, selector)
            tokens.append(x)
            probs.append(dist)
            paths = [path + (int(t),) for path, t in zip(paths, x)]
        ids = torch.stack(tokens, 1)
        draft = Draft(ids, [k] * rows, probs=torch.stack(probs, 1))
        exact = torch.as_tensor(
            target_logits([path[:i] for path in paths for i in range(k + 1)]), dtype=torch.float32
        ).view(rows, k + 1, -1)
        seq = torch.cat([torch.full((rows, 1), PREFIX), ids], 1)
        accepted, following = verifier.verify_batch(exact, draft, selector, seq, [1] * rows)
        return [list(paths[r][: int(accepted[r])]) + [int(following[r])] for r in range(rows)]


class TypicalVerify(_Economize):
    """TypicalVerifier (verifier="typical", documented lossy; default options threshold 0.09,
    alpha 0.3): its own drafts (the drafter's argmax), then TypicalVerifier.verify."""

    def cycle_batch(self, draft_logits, target_logits, config, temperature, rows):
        return [self._one(draft_logits, target_logits, config, temperature) for _ in range(rows)]

    def _one(self, draft_logits, target_logits, config, temperature):
        verifier = TypicalVerifier(DecodeConfig(verifier="typical"))
        selector = self.selector(config, temperature)
        k = min(int(config["depth"]), int(config["budget"]))
        drafts = []
        for _ in range(k):
            logits = torch.as_tensor(draft_logits([tuple(drafts)])[0], dtype=torch.float32)
            token, _ = verifier.draft(logits, selector, torch.tensor([PREFIX] + drafts))
            drafts.append(int(token))
        exact = torch.as_tensor(target_logits([tuple(drafts[:i]) for i in range(k + 1)]), dtype=torch.float32)
        accepted, following = verifier.verify(exact, drafts, None, selector, torch.tensor([PREFIX] + drafts), 1)
        return drafts[:accepted] + [int(following)]


def _verify_in_order(verifier, selector, tokens, parents, order, target_logits, probs=None):
    """``verifier.verify_tree`` on the gate's tree with its nodes listed in ``order`` (a list of
    the gate's node indices; parents before children), target rows and node indices mapped both
    ways; probs: [1, n, V] each listed node's draft law (None: greedy). Returns the gate's answer."""
    count = len(order)
    new_of = {old: new for new, old in enumerate(order)}
    draft = Draft(
        torch.tensor([[tokens[old] for old in order]], dtype=torch.long).view(1, count),
        [count],
        parents=torch.tensor(
            [[-1 if parents[old] == -1 else new_of[parents[old]] for old in order]], dtype=torch.long
        ).view(1, count),
        **({} if probs is None else {"probs": probs}),
    )
    logits = torch.as_tensor(target_logits, dtype=torch.float32)[[0] + [old + 1 for old in order]][None]
    paths, following = verifier.verify_tree(logits, draft, selector)
    accepted = [order[new] for new in paths[0]]
    return {"tokens": [tokens[i] for i in accepted] + [int(following[0])], "accepted": accepted}


class RejectionVerifyTree:
    """RejectionVerifier.verify_tree (recursive rejection sampling, SpecInfer) on the gate's trees.

    economize tries a node's children in node order, each against "the distribution the drafter drew
    the child from given its earlier siblings". The gate hands nodes in order-key order, so the
    adapter lists them by (depth, slot path): a pool's leads, then its sample, then its fills (the
    order in which they are drawn), with a one-hot law for leads and fills and sample_probs for the
    sample. Target rows and node indices are mapped both ways."""

    follows_uniforms = False

    def supports(self, config):
        return config["target_top_k"] is None and config["target_min_p"] is None

    def sampler_law(self, logits, config, temperature):
        return _Economize.sampler_law(self, logits, config, temperature)

    def verify(self, tree, target_logits, config, temperature, uniforms):
        parents = [int(p) for p in tree["parents"]]
        slots = [int(s) for s in tree["slots"]]
        kinds = [int(k) for k in tree["kinds"]]
        tokens = [int(t) for t in tree["tokens"]]
        count = len(parents)

        def slot_path(i):
            path = []
            while i != -1:
                path.append(slots[i])
                i = parents[i]
            return tuple(reversed(path))

        order = sorted(range(count), key=lambda i: (len(slot_path(i)), slot_path(i)))
        sample_probs = torch.as_tensor(tree["sample_probs"], dtype=torch.float32) if count else None
        probs = torch.zeros(1, count, int(config["vocab_size"]))
        for new, old in enumerate(order):
            if kinds[old] == 1:
                probs[0, new] = sample_probs[old]
            else:
                probs[0, new, tokens[old]] = 1.0
        verifier = RejectionVerifier(DecodeConfig(verifier="rejection"))
        return _verify_in_order(verifier, _selector(config, temperature), tokens, parents, order, target_logits, probs)


class GreedyVerifyTree:
    """GreedyVerifier.verify_tree (T = 0) on the gate's trees: it follows the child whose token is the
    target's argmax, node by node, and appends the argmax after the last one."""

    follows_uniforms = False

    def supports(self, config):
        return config["temperature"] == 0 and config["target_top_k"] is None and config["target_min_p"] is None

    def verify(self, tree, target_logits, config, temperature, uniforms):
        parents = [int(p) for p in tree["parents"]]
        tokens = [int(t) for t in tree["tokens"]]
        count = len(parents)
        depth = {}

        def level(i):
            if i not in depth:
                depth[i] = 0 if parents[i] == -1 else level(parents[i]) + 1
            return depth[i]

        order = sorted(range(count), key=level)  # topological, as economize's Draft asks
        verifier = GreedyVerifier(DecodeConfig(verifier="greedy"))
        return _verify_in_order(verifier, GreedySelector(), tokens, parents, order, target_logits)
