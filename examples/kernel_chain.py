"""A chain verifier written the way serving engines write theirs: torch, in place, with the
random values handed to code the gate cannot follow symbolically (``.item()``, ``div_`` then
argmax, a batch of rows). Exact certification certifies it through concrete draws
(``rheo.checks.exact.concrete``; docs/gate.md, "Concrete draws").

    rheo gate --impl examples.kernel_chain:KernelChain          # lossless, certified exactly
    rheo gate --impl examples.kernel_chain:KernelChainRows      # the same, many probe values per call
    rheo gate --impl examples.kernel_chain:ResidualFromTarget   # exits 1: the correction ignores the draft
    rheo gate --impl examples.kernel_chain:SeededFusedBonus     # exact certification refuses its randint

One cycle drafts L = min(depth, budget) tokens from the tempered draft law (``torch.multinomial``),
accepts draft i while ``u_i <= p(x_i) / q(x_i)`` (``torch.rand`` in float64, compared in a Python
``float``), draws the correction from ``max(p - q, 0)`` and the bonus from p by exponential races
written in place (``probs.div_(E).argmax()``). Chains only (K = 1, policy rheo, m = 0), T > 0,
no filters.
"""

from __future__ import annotations

import torch

FILTERS = ("target_top_k", "target_top_p", "target_min_p", "draft_top_k")


def _law(logits, temperature: float) -> torch.Tensor:
    p = torch.softmax(torch.as_tensor(logits, dtype=torch.float32) / temperature, dim=-1)
    if not bool(torch.isfinite(p).all()):  # a row of NaN, or of -inf everywhere: no law to sample
        raise ValueError("a logits row without a law (NaN, or -inf everywhere)")
    return p


class KernelChain:
    """Lossless: the standard chain rejection sampler, engine-style."""

    follows_uniforms = False

    def supports(self, config: dict) -> bool:
        chain = config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0
        return chain and config["temperature"] > 0 and all(config.get(k) is None for k in FILTERS)

    def correction(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return torch.clamp(p - q, min=0)

    def bonus(self, p: torch.Tensor) -> torch.Tensor:
        E = torch.empty_like(p).exponential_()
        return p.clone().div_(E).argmax(dim=-1)

    def cycles(self, draft_logits, target_logits, config: dict, temperature: float, rows: int) -> list[list[int]]:
        L = int(min(config["depth"], config["budget"]))
        drafts = torch.zeros(rows, L, dtype=torch.long)
        qs = []
        paths: list[list[tuple]] = [[() for _ in range(rows)]]
        for i in range(L):
            q = torch.stack([_law(draft_logits([path])[0], temperature) for path in paths[-1]])  # [rows, V]
            drafts[:, i] = torch.multinomial(q, 1)[:, 0]
            qs.append(q)
            paths.append([path + (int(drafts[r, i]),) for r, path in enumerate(paths[-1])])
        u = torch.rand(rows * L, dtype=torch.float64).view(rows, L)
        out = []
        fixes = []
        for r in range(rows):
            ps = _law(target_logits([paths[i][r] for i in range(L + 1)]), temperature)  # [L+1, V]
            tokens, fixed = [], None
            for i in range(L):
                x = int(drafts[r, i])
                if float(u[r, i].item()) <= float(ps[i, x] / qs[i][r, x]):
                    tokens.append(x)
                    continue
                fixed = self.correction(ps[i], qs[i][r])
                break
            fixes.append(fixed if fixed is not None else ps[L])
            out.append(tokens)
        picks = self.bonus(torch.stack(fixes))  # one race per row: [rows]
        return [tokens + [int(picks[r])] for r, tokens in enumerate(out)]

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        return self.cycles(draft_logits, target_logits, config, temperature, 1)[0]


class KernelChainRows(KernelChain):
    """``KernelChain`` with ``cycle_batch``: the probe values of a bisection in one call."""

    def cycle_batch(self, draft_logits, target_logits, config: dict, temperature: float, rows: int) -> list[list[int]]:
        return self.cycles(draft_logits, target_logits, config, temperature, rows)


class ResidualFromTarget(KernelChain):
    """Lossy: a rejected draft is corrected from p itself, not from max(p - q, 0)."""

    def correction(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return p


class SeededFusedBonus(KernelChain):
    """The bonus drawn by a generator seeded from ``torch.randint`` (as a fused kernel is):
    exact certification cannot follow the seeded generator and says so."""

    def bonus(self, p: torch.Tensor) -> torch.Tensor:
        seeds = torch.randint(0, 2**31, (p.shape[0],))
        out = []
        for r in range(p.shape[0]):
            g = torch.Generator().manual_seed(int(seeds[r]))
            out.append(int(torch.multinomial(p[r], 1, generator=g)))
        return torch.tensor(out)
