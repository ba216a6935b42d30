"""A stateful model for the ``SpecModel`` interface: a tiny causal transformer with a KV
cache and tree attention (the target), and an EAGLE-style recurrent head on its hidden
states (the draft). Random, seeded weights; small vocabularies; tests and examples only.
It answers the fastpath's queries of docs/spec.md §3 (the draft at the expanded nodes) and
§4 (the target at every node of T_R).

Per cycle, as in a serving engine:

- the root is the last emitted token (its key/value is not cached yet);
- ``draft_logits``: the head starts from the target's hidden state at the last cached
  position and the root token, then follows each query row's parent row (``parent_rows``)
  and token: g_child = tanh(A g_parent + E[token]); logits = W g;
- ``target_logits``: one forward over the root and the draft nodes, attending to the cache
  and, among themselves, through ``tree.attention_mask`` at ``tree.position_ids`` + the
  cache length;
- ``advance``: the root and the accepted nodes' keys/values join the cache; the final
  (bonus/correction) token becomes the next root.

``full_logits(i, tokens)`` recomputes the target from scratch (no cache, causal mask), and
``reference_instance`` hands the reference engine those laws, so the fastpath driving this
model is compared with the reference decision by decision (tests/test_fastpath_models.py).
"""

from __future__ import annotations

import math

import torch

from rheo.fastpath import DraftQuery, DraftTree, VerifyResult
from rheo.testing.tables import _TableBase


class TinyTreeLM(_TableBase):
    def __init__(
        self,
        vocab_size: int,
        prompts: torch.Tensor,
        *,
        d: int = 16,
        max_len: int = 256,
        seed: int = 0,
        draft_noise: float = 0.5,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        """prompts: [b, P] token ids (P >= 1); the last prompt token is the first root."""
        g = torch.Generator().manual_seed(seed)
        dev = torch.device(device or "cpu")

        def w(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return (scale * torch.randn(shape, generator=g, dtype=torch.float64)).to(device=dev, dtype=dtype)

        self.vocab_size, self.d, self.max_len, self.dtype, self.device = vocab_size, d, max_len, dtype, dev
        self.emb, self.pos = w(vocab_size, d), w(max_len, d, scale=0.3)
        self.Wq, self.Wk, self.Wv = (w(d, d, scale=1 / math.sqrt(d)) for _ in range(3))
        self.W1, self.W2 = w(d, 2 * d, scale=1 / math.sqrt(d)), w(2 * d, d, scale=1 / math.sqrt(2 * d))
        self.out = w(d, vocab_size, scale=2 / math.sqrt(d))
        # the draft head: its own recurrence and a noisy copy of the target's output layer
        self.A, self.B = w(d, d, scale=1 / math.sqrt(d)), w(d, d, scale=1 / math.sqrt(d))
        self.E = w(vocab_size, d)
        self.head_out = self.out + w(d, vocab_size, scale=draft_noise / math.sqrt(d))
        prompts = prompts.to(dev)
        b, P = prompts.shape
        self.batch = b
        self.tokens = [list(map(int, row)) for row in prompts.tolist()]  # committed, root last
        self.k = torch.zeros((b, max_len, d), dtype=dtype, device=dev)
        self.v = torch.zeros_like(self.k)
        self.h = torch.zeros_like(self.k)
        self.length = torch.zeros(b, dtype=torch.int64, device=dev)
        if P > 1:  # prefill everything but the root
            k, v, h = self._layer(
                prompts[:, :-1],
                torch.arange(P - 1, device=dev).expand(b, P - 1),
                torch.ones((b, P - 1, P - 1), dtype=torch.bool, device=dev).tril(),
            )
            self.k[:, : P - 1], self.v[:, : P - 1], self.h[:, : P - 1] = k, v, h
            self.length[:] = P - 1
        self._rows_g: torch.Tensor | None = None  # [b, n, d] the head's states at the last query's rows
        self._tree: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # k, v, h [b, R+1, d] of the tree

    # ---- the transformer ----
    def _layer(
        self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """tokens, positions [b, n]; mask [b, n, n] among the new tokens; with ``cache`` the
        new tokens also attend to the cached positions < length. Returns k, v, h [b, n, d]."""
        x = self.emb[tokens] + self.pos[positions]
        q, k, v = x @ self.Wq, x @ self.Wk, x @ self.Wv
        scores = q @ k.transpose(1, 2) / math.sqrt(self.d)
        scores = scores.masked_fill(~mask, float("-inf"))
        if cache:
            L = int(self.length.max()) if self.length.numel() else 0
            cs = q @ self.k[:, :L].transpose(1, 2) / math.sqrt(self.d)
            seen = torch.arange(L, device=self.device).unsqueeze(0) < self.length.unsqueeze(1)
            cs = cs.masked_fill(~seen.unsqueeze(1), float("-inf"))
            att = torch.softmax(torch.cat([cs, scores], -1), -1)
            a = att[..., :L] @ self.v[:, :L] + att[..., L:] @ v
        else:
            a = torch.softmax(scores, -1) @ v
        y = x + a
        h = y + torch.tanh(y @ self.W1) @ self.W2
        return k, v, h

    def full_logits(self, i: int, tokens: list[int]) -> torch.Tensor:
        """Target logits after ``tokens`` (request i, from scratch, no cache): [V]."""
        t = torch.tensor([tokens], device=self.device)
        n = t.shape[1]
        _, _, h = self._layer(
            t,
            torch.arange(n, device=self.device).unsqueeze(0),
            torch.ones((1, n, n), dtype=torch.bool, device=self.device).tril(),
        )
        return (h[0, -1] @ self.out).cpu()

    # ---- the draft head ----
    def _head_root(self) -> torch.Tensor:  # -> [b, d]
        b = self.batch
        last = (self.length - 1).clamp(min=0)
        h_last = self.h[torch.arange(b, device=self.device), last] * (self.length > 0).unsqueeze(1)
        root = torch.tensor([t[-1] for t in self.tokens], device=self.device)
        return torch.tanh(h_last @ self.B + self.E[root])

    def draft_logits(self, query: DraftQuery) -> torch.Tensor:
        if query.layer == 0:
            g = self._head_root().unsqueeze(1)  # [b, 1, d]
        else:
            assert self._rows_g is not None, "the root is drafted first (layer 0)"
            parent = self._rows_g.gather(1, query.parent_rows.clamp(min=0).unsqueeze(-1).expand(-1, -1, self.d))
            g = torch.tanh(parent @ self.A + self.E[query.tokens.clamp(min=0)])
        self._rows_g = g
        return g @ self.head_out

    def head_logits(self, i: int, prefix: tuple[int, ...]) -> torch.Tensor:
        """The draft head's logits at a token path (request i), recomputed: [V]."""
        g = self._head_root()[i]
        for t in prefix:
            g = torch.tanh(g @ self.A + self.E[t])
        return (g @ self.head_out).cpu()

    # ---- the target over the tree ----
    def target_logits(self, tree: DraftTree) -> torch.Tensor:
        root = torch.tensor([t[-1] for t in self.tokens], device=self.device).unsqueeze(1)
        toks = torch.cat([root, tree.tokens], 1)
        pos = self.length.unsqueeze(1) + tree.position_ids
        k, v, h = self._layer(toks, pos.clamp(max=self.max_len - 1), tree.attention_mask, cache=True)
        self._tree = (k, v, h)
        return h @ self.out

    def advance(self, tree: DraftTree, result: VerifyResult) -> None:
        """Cache the root and the accepted nodes; the final token becomes the next root."""
        assert self._tree is not None, "advance follows target_logits"
        k, v, h = self._tree
        b = self.batch
        n_acc = result.lengths - 1
        keep = torch.cat([torch.zeros((b, 1), dtype=torch.int64, device=self.device), result.accepted + 1], 1)
        for j in range(keep.shape[1]):  # a loop over depth, not requests
            live = j <= n_acc
            rows = live.nonzero().squeeze(1)
            at = self.length[rows] + j
            src = keep[rows, j]
            self.k[rows, at], self.v[rows, at], self.h[rows, at] = k[rows, src], v[rows, src], h[rows, src]
        self.length += n_acc + 1
        for i in range(b):
            self.tokens[i].extend(result.output(i))

    # ---- the same laws for the reference engine (``reference_instance`` from _TableBase) ----
    def logits_at(self, i: int, prefix: tuple[int, ...], side: str) -> torch.Tensor:
        if side == "target":
            return self.full_logits(i, self.tokens[i] + list(prefix))
        return self.head_logits(i, prefix)
