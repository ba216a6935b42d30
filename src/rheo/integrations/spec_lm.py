"""A real target and its EAGLE-style head behind the fastpath's ``SpecModel`` interface,
and the speculative generation loop (one request at a time).

Per cycle, as in ``rheo.testing.tiny_model`` (``TinyTreeLM``, its table-free twin):

- the root is the last committed token; its key/value is not in the target's cache yet
  (after a cycle the root is the bonus/correction token, which the target has never seen,
  so the first cycle is made the same way: the prompt minus its last token is prefilled);
- ``draft_logits``: at layer 0 the head consumes the pairs (true feature f_t, token
  x_{t+1}) committed since the last cycle, ending with the root's, into its own KV cache;
  its output at the root gives the root's draft law. At layer d it runs on the depth-d
  nodes (parent's predicted feature, node token) at position root + d, each attending to
  the committed pairs, its ancestors' entries and itself; those entries are dropped after
  the cycle;
- ``target_logits``: one forward over the root and the R draft nodes, a boolean 4D mask
  [1, 1, R+1, C+R+1] (the C cached tokens, then ``tree.attention_mask``: the root and
  each node's ancestors) at positions C + ``tree.position_ids``; logits at all R+1 rows;
- ``advance``: the root's and the accepted nodes' keys/values are kept in the cache (the
  rest of the tree's are cut out), their features become the head's next pairs, and the
  last output token becomes the next root.

``target_law_after(tokens)`` recomputes the target from scratch (no cache, no tree), which
is what the losslessness checks compare with.

Specification: docs/spec.md §3-§4 (tree forward and verification), §7.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from rheo.fastpath import DraftQuery, DraftTree, Params, VerifyResult, run_cycle


def _keep_rows(cache, start: int, rows: torch.Tensor) -> None:
    """Keep cache positions [0, start) and start + rows (in that order); drop the rest."""
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name)
            setattr(layer, name, torch.cat([t[..., :start, :], t[..., start + rows, :]], -2))


class SpecLM:
    """``SpecModel`` for one request: a transformers causal LM (the target) and an
    ``EagleHead`` on its features (the draft). ``prompt`` is token ids (at least 2)."""

    batch = 1

    def __init__(self, target, head, prompt: list[int]):
        from transformers import DynamicCache

        if len(prompt) < 2:
            raise ValueError(f"prompt: needs at least 2 tokens, got {len(prompt)}")
        self.target, self.head = target, head
        self.vocab_size = target.config.vocab_size
        self.device = next(target.parameters()).device
        self.dtype = next(target.parameters()).dtype
        self.tokens = list(prompt)  # committed; the last one is the root
        self.cache, self.head_cache = DynamicCache(), DynamicCache()
        ids = torch.tensor([prompt[:-1]], device=self.device)
        with torch.no_grad():
            feats = self.target.model(input_ids=ids, cache=self.cache, use_cache=True).last_hidden_state[0]
        self.cached = len(prompt) - 1  # target cache length C (the root is not in it)
        self.pending = (feats, torch.tensor(prompt[1:], device=self.device))  # head pairs not consumed yet
        self.head_len = 0
        self.forwards = 0
        self.seconds = {"target": 0.0, "draft": 0.0}

    def fork(self) -> SpecLM:
        """An independent copy of this request's state (caches cloned, weights shared)."""
        new = copy.copy(self)
        new.cache, new.head_cache = copy.deepcopy(self.cache), copy.deepcopy(self.head_cache)
        new.tokens, new.seconds = list(self.tokens), dict(self.seconds)
        return new

    # ---- the draft head ----
    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.target.model.embed_tokens(tokens)

    def draft_logits(self, query: DraftQuery) -> torch.Tensor:
        t0 = time.perf_counter()
        with torch.no_grad():
            if query.layer == 0:
                feats, toks = self.pending
                n = toks.shape[0]
                pos = torch.arange(self.head_len + 1, self.head_len + n + 1, device=self.device).unsqueeze(0)
                mask = torch.ones((n, self.head_len + n), dtype=torch.bool, device=self.device)
                mask[:, self.head_len :] = torch.ones((n, n), dtype=torch.bool, device=self.device).tril()
                out = self.head(
                    feats.unsqueeze(0),
                    self._embed(toks).unsqueeze(0),
                    pos,
                    mask.view(1, 1, n, -1),
                    cache=self.head_cache,
                )
                self.head_len += n
                self._h = out[:, -1:]  # [1, 1, H] the root's predicted feature
                self._anc = torch.zeros((1, 0), dtype=torch.bool, device=self.device)
            else:
                parents = query.parent_rows[0].clamp(min=0)
                n = parents.shape[0]
                # a row sees its parent's row of entries (the parent's ancestors and itself) and itself
                anc = torch.cat([self._anc[parents], torch.eye(n, dtype=torch.bool, device=self.device)], 1)
                mask = torch.cat([torch.ones((n, self.head_len), dtype=torch.bool, device=self.device), anc], 1)
                pos = torch.full((1, n), self.head_len + query.layer, device=self.device)
                toks = query.tokens[0].clamp(min=0)
                out = self.head(
                    self._h[0, parents].unsqueeze(0),
                    self._embed(toks).unsqueeze(0),
                    pos,
                    mask.view(1, 1, n, -1),
                    cache=self.head_cache,
                )
                self._h, self._anc = out, anc
            logits = self.head.logits(self.target.lm_head, out[:, -1:] if query.layer == 0 else out)
        self.seconds["draft"] += time.perf_counter() - t0
        return logits

    # ---- the target over the tree ----
    def target_logits(self, tree: DraftTree) -> torch.Tensor:
        t0 = time.perf_counter()
        C = self.cached
        toks = torch.cat([torch.tensor([self.tokens[-1]], device=self.device), tree.tokens[0]]).unsqueeze(0)
        n = toks.shape[1]
        mask = torch.cat([torch.ones((n, C), dtype=torch.bool, device=self.device), tree.attention_mask[0]], 1)
        pos = (C + tree.position_ids[0]).unsqueeze(0)
        with torch.no_grad():
            feats = self.target.model(
                input_ids=toks,
                attention_mask=mask.view(1, 1, n, -1),
                position_ids=pos,
                cache=self.cache,
                use_cache=True,
            ).last_hidden_state
            logits = self.target.lm_head(feats)
        self._tree_feats = feats[0]
        self.forwards += 1
        self.seconds["target"] += time.perf_counter() - t0
        return logits

    def advance(self, tree: DraftTree, result: VerifyResult) -> None:
        n_acc = int(result.lengths[0]) - 1
        keep = torch.cat([torch.zeros(1, dtype=torch.int64, device=self.device), result.accepted[0, :n_acc] + 1])
        _keep_rows(self.cache, self.cached, keep)
        _keep_rows(self.head_cache, self.head_len, keep[:0])  # drop the tree's head entries
        self.cached += n_acc + 1
        out = list(result.output(0))
        self.pending = (self._tree_feats[keep], torch.tensor(out, device=self.device))
        self.tokens.extend(out)

    # ---- exact laws, recomputed (for the losslessness checks) ----
    def target_logits_after(self, tokens: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return self.target(input_ids=torch.tensor([tokens], device=self.device)).logits[0, -1]


@dataclass
class Generation:
    tokens: list[int]
    cycles: int
    lengths: list[int] = field(default_factory=list)  # |O| per cycle (untruncated)
    seconds: float = 0.0
    stopped: str = "max_new_tokens"
    split: dict = field(default_factory=dict)  # seconds in the target's tree forwards and in the draft

    @property
    def tau(self) -> float:
        """Mean tokens per target forward (accepted draft tokens + the bonus/correction)."""
        return sum(self.lengths) / max(1, len(self.lengths))

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0


def speculative_generate(
    target,
    head,
    prompt: list[int],
    cfg: Params,
    temperature: float,
    max_new_tokens: int,
    seed: int = 0,
    eos: set | None = None,
    on_tokens=None,
) -> Generation:
    """Generate up to ``max_new_tokens`` after ``prompt`` by draft-verify cycles. Stops at
    the first end-of-sequence token (``eos``), also inside an accepted draft path (the
    tokens after it are dropped). ``on_tokens(new_tokens)`` is called after each cycle."""
    eos = eos or set()
    t0 = time.perf_counter()
    model = SpecLM(target, head, prompt)
    gen = torch.Generator().manual_seed(seed)
    T = torch.tensor([float(temperature)], dtype=torch.float64)
    out: list[int] = []
    lengths: list[int] = []
    stopped = "max_new_tokens"
    while len(out) < max_new_tokens:
        _, result = run_cycle(model, cfg, T, generator=gen)
        new = list(result.output(0))
        lengths.append(len(new))
        for i, t in enumerate(new):
            if t in eos:
                new, stopped = new[: i + 1], "eos"
                break
        new = new[: max_new_tokens - len(out)]
        out += new
        if on_tokens:
            on_tokens(new)
        if stopped == "eos":
            break
    return Generation(out, len(lengths), lengths, time.perf_counter() - t0, stopped, dict(model.seconds))


def autoregressive_generate(
    target,
    prompt: list[int],
    temperature: float,
    max_new_tokens: int,
    seed: int = 0,
    eos: set | None = None,
    on_tokens=None,
) -> Generation:
    """Plain sampling with a KV cache, one target forward per token (the baseline, and the
    law speculative decoding must reproduce). T = 0 is greedy."""
    from transformers import DynamicCache

    eos = eos or set()
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    cache = DynamicCache()
    ids = torch.tensor([prompt])
    out: list[int] = []
    stopped = "max_new_tokens"
    with torch.no_grad():
        while len(out) < max_new_tokens:
            logits = (
                target(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[0, -1].to(torch.float64)
            )
            if temperature == 0:
                t = int(logits.argmax())
            else:
                t = int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen))
            out.append(t)
            if on_tokens:
                on_tokens([t])
            if t in eos:
                stopped = "eos"
                break
            ids = torch.tensor([[t]])
    return Generation(out, len(out), [1] * len(out), time.perf_counter() - t0, stopped)
