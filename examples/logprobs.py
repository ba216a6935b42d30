"""A chain verifier that reports log-probabilities beside its tokens, the way serving engines
return them to evals and RL pipelines (docs/adapters.md, "Reported values"). Every run of
every check compares each reported value with log p of the law the adapter declares.

    rheo gate --impl examples.logprobs:ChainWithLogprobs --only exact       # lossless, values right
    rheo gate --impl examples.logprobs:DraftLogprobs --only exact           # exits 1
    rheo gate --impl examples.logprobs:RowBeforeLogprobs --only exact       # exits 1
    rheo gate --impl examples.logprobs:RawLogprobs --only exact             # lossless: raw values, declared

The tokens are the standard chain rejection sampler's (every class samples the same law);
what differs is the value reported:

- ``ChainWithLogprobs``: log p_T(token | the cycle's tokens before it) from the target row
  the verifier used (``logprobs = "processed"``: after temperature and filters);
- ``RawLogprobs``: log softmax of the untempered target logits (``logprobs = "raw"``);
- ``DraftLogprobs``: for an accepted draft, the draft law's log q (the value a drafter hands
  on);
- ``RowBeforeLogprobs``: the target row one position early (a row index off by one).

Chains (K = 1, policy rheo, m = 0), T > 0, any target filters, no draft top-k.
"""

from __future__ import annotations

import torch

from examples.filter_composition import filtered


class ChainWithLogprobs:
    """Lossless, its logprobs right."""

    follows_uniforms = False
    logprobs = "processed"

    def supports(self, config: dict) -> bool:
        chain = config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0
        return chain and config["draft_top_k"] is None and config["temperature"] > 0

    def value(self, i: int, token: int, ps: list, qs: list, raw: torch.Tensor, accepted: bool) -> float:
        return float(torch.log(ps[i][token]))

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> dict:
        length = int(min(config["depth"], config["budget"]))
        drafts: list[int] = []
        qs = []
        for _ in range(length):
            q = torch.softmax(torch.as_tensor(draft_logits([tuple(drafts)])[0], dtype=torch.float64) / temperature, -1)
            drafts.append(int(torch.multinomial(q, 1)))
            qs.append(q)
        raw = torch.as_tensor(target_logits([tuple(drafts[:i]) for i in range(length + 1)]), dtype=torch.float64)
        ps = [filtered(row, temperature, config, "top_k_first") for row in raw]
        coins = torch.rand(length, dtype=torch.float64)
        final, tokens, values = ps[length], [], []
        for i, x in enumerate(drafts):
            if float(coins[i]) * float(qs[i][x]) <= float(ps[i][x]):
                tokens.append(x)
                values.append(self.value(i, x, ps, qs, raw[i], True))
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)
            final = residual / residual.sum()
            break
        last = int(torch.multinomial(final, 1))
        i = len(tokens)
        tokens.append(last)
        values.append(self.value(i, last, ps, qs, raw[i], False))
        return {"tokens": tokens, "logprobs": values}


class RawLogprobs(ChainWithLogprobs):
    """Lossless, its logprobs the raw logits' log softmax, and declared so."""

    logprobs = "raw"

    def value(self, i, token, ps, qs, raw, accepted):
        return float(torch.log_softmax(raw, -1)[token])


class DraftLogprobs(ChainWithLogprobs):
    """An accepted draft's logprob taken from the draft law."""

    def value(self, i, token, ps, qs, raw, accepted):
        return float(torch.log(qs[i][token])) if accepted else super().value(i, token, ps, qs, raw, accepted)


class RowBeforeLogprobs(ChainWithLogprobs):
    """Each token's logprob read from the target row one position early."""

    def value(self, i, token, ps, qs, raw, accepted):
        return float(torch.log(ps[max(i - 1, 0)][token]))
