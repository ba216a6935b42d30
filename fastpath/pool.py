"""The candidate pool of an expanded node, batched: the draft laws at a node (docs/spec.md §1)
and its K slots (§2).

Must equal ``rheo.reference.instance.Instance.node_laws`` and the reference's pools on the
same uniforms (§7). ``expand`` takes the draft logits at the n nodes being expanded and
follows the spec step by step:

1. §1 the draft law q: the ``draft_top_k`` best logits ranked (value desc, id asc), then
   softmax, untempered (``ranked_draft_law``);
2. §2 Top-K: the slots hold x_1..x_K (``topk_pool``). Rheo: leads x_1..x_m, the residual law
   r = (q on U)^(1/T) (``residual_law``), Y ~ r by inverse CDF from its ``u_draw`` entry
   (§7), the fills, the proxy as the sample's factor (``rheo_slots``, ``rheo_proxy``);
3. the law the verifier checks Y against (§4 step 3): r itself.

The wrong-on-purpose proxies ("self", a constant) and draft laws ("dense", "untempered")
change steps 2 and 3; they live in ``variants`` and are called at the one place each
changes. Ranking, proxy, draw and residual law touch only the kept k entries.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from rheo.reference.params import Params

from . import variants
from .inputs import expect, expect_params
from .laws import inverse_cdf, ranked_topk, softmax_or_zero, tempered

LEAD, SAMPLE, FILL, PAD = 0, 1, 2, -1
KIND_NAMES = {LEAD: "lead", SAMPLE: "sample", FILL: "fill"}


@dataclass
class Pool:
    """The K-slot pools of n expanded nodes per request (docs/spec.md §2)."""

    tokens: torch.Tensor  # [b, n, K] the token in each slot
    kinds: torch.Tensor  # [b, n, K] int8 LEAD / SAMPLE / FILL
    ranks: torch.Tensor  # [b, n, K] the slot's rank in the node's draft law
    factors: torch.Tensor  # [b, n, K] q(x), the proxy for the sample
    ok: torch.Tensor  # [b, n, K] bool: the slot holds a child
    ids: torch.Tensor  # [b, n, W] kept token ids in rank order
    residual: torch.Tensor  # [b, n, W] r in rank order (zeros on leads)
    check: torch.Tensor  # [b, n, W] the law the stochastic step uses (r unless a draft_law control)
    dense: torch.Tensor | None  # [b, n, V] ``draft_law: "dense"`` only

    def expect(self, where: str, b: int, n: int, K: int) -> Pool:
        """This pool, checked to be n expanded nodes' K-slot pools for b requests: the dtypes
        and shapes above (factors, residual and check floating point, residual and check of
        one dtype; the index tensors int64; kinds int8). Reads only ``.shape`` and ``.dtype``."""
        expect(where, "pool.tokens", self.tokens, "[b, n, K]", (b, n, K), torch.int64)
        expect(where, "pool.kinds", self.kinds, "[b, n, K]", (b, n, K), torch.int8)
        expect(where, "pool.ranks", self.ranks, "[b, n, K]", (b, n, K), torch.int64)
        expect(where, "pool.factors", self.factors, "[b, n, K]", (b, n, K), "float")
        expect(where, "pool.ok", self.ok, "[b, n, K]", (b, n, K), "bool")
        W = expect(where, "pool.ids", self.ids, "[b, n, W]", (b, n, None), torch.int64).shape[-1]
        expect(where, "pool.residual", self.residual, "[b, n, W]", (b, n, W), "float")
        expect(where, "pool.check", self.check, "[b, n, W]", (b, n, W), self.residual.dtype)
        if self.dense is not None:
            expect(where, "pool.dense", self.dense, "[b, n, V]", (b, n, None), "float")
        return self


def ranked_draft_law(
    logits: torch.Tensor, valid: torch.Tensor, params: Params
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ranked, truncated, untempered draft law (docs/spec.md §1) at n nodes.

    logits: [b, n, V]; valid: [b, n]. Returns (vals, ids, q, ok), each [b, n, W] with
    W = max(k, K), k = min(draft_top_k, V): the kept logits in rank order (-inf padding),
    their ids, q (0 where not ranked) and ok = q(x) > 0 at a valid node.
    """
    K, V = params.K, logits.shape[-1]
    k = V if params.draft_top_k is None else min(params.draft_top_k, V)
    vals, ids = ranked_topk(logits, k)
    W = max(k, K)
    if W > k:
        pad = W - k
        vals = torch.cat([vals, vals.new_full(vals.shape[:-1] + (pad,), float("-inf"))], -1)
        ids = torch.cat([ids, ids.new_zeros(ids.shape[:-1] + (pad,))], -1)
    q = softmax_or_zero(vals, torch.isfinite(vals))
    ok = (q > 0) & valid.unsqueeze(-1)  # q(x) > 0: the token is ranked
    return vals, ids, torch.where(ok, q, torch.zeros_like(q)), ok


def residual_law(vals_u: torch.Tensor, ok_u: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """r = (q restricted to U)^(1/T), renormalized (docs/spec.md §1-§2): restriction before
    tempering; at T = 0 the point mass on u_1. vals_u, ok_u: [b, n, W-m] the residual
    support's logits and presence in rank order; T: [b]. Returns r [b, n, W-m]."""
    no_mass = torch.full_like(vals_u, float("-inf"))
    return torch.where(ok_u, tempered(torch.where(ok_u, vals_u, no_mass), T), torch.zeros_like(vals_u))


def topk_pool(ids: torch.Tensor, q: torch.Tensor, ok: torch.Tensor, K: int) -> Pool:
    """Policy "topk" (docs/spec.md §2): x_1..x_K in slots 0..K-1, each a lead with factor q(x).
    ids, q, ok: [b, n, W]."""
    shape = ok.shape[:-1]
    ranks = torch.arange(K, device=ids.device).expand(shape + (K,))
    kinds = torch.full(shape + (K,), LEAD, dtype=torch.int8, device=ids.device)
    zero = torch.zeros_like(q)
    return Pool(ids[..., :K], kinds, ranks, q[..., :K], ok[..., :K], ids, zero, zero, None)


def expand(logits: torch.Tensor, valid: torch.Tensor, u: torch.Tensor, T: torch.Tensor, params: Params) -> Pool:
    """Pools of the expanded nodes (docs/spec.md §1-§2).

    logits: [b, n, V] draft logits at the n nodes; valid: [b, n] (False: padding rows);
    u: [b, n] their ``u_draw`` entries (§7); T: [b] temperatures (the draw only).
    """
    b, n, _ = expect("expand", "logits", logits, "[b, n, V]", (None, None, None), "float").shape
    expect("expand", "valid", valid, "[b, n]", (b, n), "bool")
    expect("expand", "u", u, "[b, n]", (b, n), "float")
    expect("expand", "T", T, "[b]", (b,), "float")
    expect_params("expand", params)
    vals, ids, q, ok = ranked_draft_law(logits, valid, params)  # §1
    if params.policy == "topk":
        return topk_pool(ids, q, ok, params.K)
    m = params.m
    assert m is not None  # Params requires m under policy "rheo"
    r = residual_law(vals[..., m:], ok[..., m:], T)  # §2: the residual law on U
    j = inverse_cdf(r, u.to(r.dtype))  # §7: Y's index in U (rank order)
    ranks, kinds, slot_ok = rheo_slots(ok, j, params)  # §2: leads, sample, fills
    factors = q.gather(-1, ranks)
    if params.proxy.kind == "rheo":
        factors[..., m] = rheo_proxy(q, params)
    else:  # the hook: a wrong-on-purpose proxy
        factors[..., m] = variants.proxy(q, q.gather(-1, ranks[..., m : m + 1]).squeeze(-1), params)
    residual = torch.cat([torch.zeros_like(q[..., :m]), r], -1)
    check, dense = residual, None  # §4 step 3 checks Y against r
    if params.draft_law != "sampled":  # the hook: a wrong-on-purpose draft law for the check
        check, dense = variants.check_law(logits, vals, ids, ok, residual, T, params)
    return Pool(ids.gather(-1, ranks), kinds, ranks, factors, slot_ok, ids, residual, check, dense)


@functools.lru_cache(maxsize=64)
def _pool_constants(K: int, m: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fill offsets, lead ranks and slot kinds of a rheo pool (made once per shape)."""
    kinds = torch.tensor([LEAD] * m + [SAMPLE] + [FILL] * (K - m - 1), dtype=torch.int8, device=device)
    return torch.arange(K - m - 1, device=device), torch.arange(m, device=device), kinds


def rheo_slots(ok: torch.Tensor, j: torch.Tensor, params: Params) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A rheo pool's slots (docs/spec.md §2): leads x_1..x_m, the sample, fills = the first
    K-m-1 tokens of U without Y.

    ok: [..., W] the ranked draft tokens' presence; j: [...] Y's index in U (rank order;
    j >= W - m: Y ranks beyond the kept tokens). Returns ranks [..., K] (slot -> rank; the
    sample's clamped into range), kinds [..., K] and slot_ok [..., K].
    """
    K, m, W = params.K, params.m, ok.shape[-1]
    assert m is not None  # Params requires m under policy "rheo"
    shape = ok.shape[:-1]
    f, lead_r, kind_row = _pool_constants(K, m, ok.device)
    fill_ranks = m + f + (f >= j.unsqueeze(-1)).to(f.dtype)
    y_rank = (m + j).clamp(max=W - 1)
    ranks = torch.cat([lead_r.expand(shape + (m,)), y_rank.unsqueeze(-1), fill_ranks], -1)
    has_u = ok[..., m : m + 1]
    slot_ok = torch.cat([ok[..., :m], has_u, ok.gather(-1, fill_ranks) & has_u], -1)
    return ranks, kind_row.expand(shape + (K,)), slot_ok


def rheo_proxy(q: torch.Tensor, params: Params) -> torch.Tensor:
    """The rheo proxy (docs/spec.md §2) from the ranked draft law q [..., W]: min(q(x_m), z)
    with z the mass left after the leads when m >= 1, min(q(x_1) + eps, 1) when m = 0.
    Returns [...]."""
    m = params.m
    assert m is not None  # Params requires m under policy "rheo"
    if m >= 1:
        return torch.minimum(q[..., m - 1], 1 - torch.cumsum(q[..., :m], -1)[..., -1])
    return torch.clamp(q[..., 0] + float(params.epsilon), max=1.0)
