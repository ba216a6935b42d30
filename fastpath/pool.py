"""The candidate pool of an expanded node, batched: the draft laws at a node (docs/spec.md §1)
and its K slots (§2).

Must equal ``rheo.reference.instance.Instance.node_laws`` and the reference's pools on the
same uniforms (§7). ``expand`` takes the draft logits at the n nodes being expanded and
follows the spec step by step:

1. §1 the draft law q: the ``draft_top_k`` best logits ranked (value desc, id asc), then
   softmax, untempered (``ranked_draft_law``);
2. §2 Top-K: the slots hold x_1..x_K (``topk_pool``). Rheo: leads x_1..x_m, the residual law
   r = (q on U)^(1/T) (``_residual_in_rank_order``), Y ~ r by inverse CDF from its ``u_draw`` entry
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
from .laws import inverse_cdf, ranked_topk, scalar

INF = float("inf")

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
    logits: torch.Tensor, valid: torch.Tensor, params: Params, static: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ranked, truncated, untempered draft law (docs/spec.md §1) at n nodes.

    logits: [b, n, V]; valid: [b, n]. Returns (vals, ids, q, ok), each [b, n, W] with
    W = max(k, K), k = min(draft_top_k, V): the kept logits in rank order (-inf padding),
    their ids, q (0 where not ranked) and ok = q(x) > 0 at a valid node. ``static``: no
    host sync (``ranked_topk``).
    """
    K, V = params.K, logits.shape[-1]
    k = V if params.draft_top_k is None else min(params.draft_top_k, V)
    vals, ids = ranked_topk(logits, k, static)
    W = max(k, K)
    if W > k:
        pad = W - k
        vals = torch.cat([vals, vals.new_full(vals.shape[:-1] + (pad,), float("-inf"))], -1)
        ids = torch.cat([ids, ids.new_zeros(ids.shape[:-1] + (pad,))], -1)
    q = torch.softmax(vals, dim=-1)  # an all -inf row gives NaN, which fails q > 0 below
    ok = (q > 0) & valid.unsqueeze(-1)  # q(x) > 0: the token is ranked
    return vals, ids, torch.where(ok, q, scalar(0.0, q.dtype, q.device)), ok


def topk_pool(ids: torch.Tensor, q: torch.Tensor, ok: torch.Tensor, K: int) -> Pool:
    """Policy "topk" (docs/spec.md §2): x_1..x_K in slots 0..K-1, each a lead with factor q(x).
    ids, q, ok: [b, n, W]."""
    shape = ok.shape[:-1]
    ranks = torch.arange(K, device=ids.device).expand(shape + (K,))
    kinds = torch.full(shape + (K,), LEAD, dtype=torch.int8, device=ids.device)
    zero = torch.zeros_like(q)
    return Pool(ids[..., :K], kinds, ranks, q[..., :K], ok[..., :K], ids, zero, zero, None)


def expand(
    logits: torch.Tensor, valid: torch.Tensor, u: torch.Tensor, T: torch.Tensor, params: Params, static: bool = False
) -> Pool:
    """Pools of the expanded nodes (docs/spec.md §1-§2).

    logits: [b, n, V] draft logits at the n nodes; valid: [b, n] (False: padding rows);
    u: [b, n] their ``u_draw`` entries (§7); T: [b] temperatures (the draw only).
    ``static``: no host sync (a tie at the ``draft_top_k`` boundary is settled in every row).
    """
    b, n, _ = expect("expand", "logits", logits, "[b, n, V]", (None, None, None), "float").shape
    expect("expand", "valid", valid, "[b, n]", (b, n), "bool")
    expect("expand", "u", u, "[b, n]", (b, n), "float")
    expect("expand", "T", T, "[b]", (b,), "float")
    expect_params("expand", params)
    vals, ids, q, ok = ranked_draft_law(logits, valid, params, static)  # §1
    if params.policy == "topk":
        return topk_pool(ids, q, ok, params.K)
    m = params.m
    assert m is not None  # Params requires m under policy "rheo"
    residual = _residual_in_rank_order(vals, ok, T, m)  # §2: the residual law on U, 0 on the leads
    j = inverse_cdf(residual, u.to(residual.dtype), static=static) - m  # §7: Y's index in U (rank order)
    ranks, kinds, slot_ok = rheo_slots(ok, j, params)  # §2: leads, sample, fills
    factors = q.gather(-1, ranks)
    if params.proxy.kind == "rheo":
        factors[..., m] = rheo_proxy(q, params)
    else:  # the hook: a wrong-on-purpose proxy
        factors[..., m] = variants.proxy(q, q.gather(-1, ranks[..., m : m + 1]).squeeze(-1), params)
    check, dense = residual, None  # §4 step 3 checks Y against r
    if params.draft_law != "sampled":  # the hook: a wrong-on-purpose draft law for the check
        check, dense = variants.check_law(logits, vals, ids, ok, residual, T, params)
    return Pool(ids.gather(-1, ranks), kinds, ranks, factors, slot_ok, ids, residual, check, dense)


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _residual_constants(W: int, m: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """U's positions among the W ranked tokens (all but the m leads) and the point mass on u_1."""
    in_u = torch.arange(W, device=device) >= m
    return in_u, (torch.arange(W, device=device) == m).to(dtype)


def _residual_in_rank_order(vals: torch.Tensor, ok: torch.Tensor, T: torch.Tensor, m: int) -> torch.Tensor:
    """The residual law r = (q restricted to U)^(1/T), renormalized (restriction before
    tempering), on all W ranked positions, 0 on the leads: r [b, n, W] (docs/spec.md §1-§2;
    at T = 0 the point mass on u_1, position m). vals, ok: [b, n, W]; T: [b]. No host sync:
    the temperature is applied per row whatever its value."""
    dt, dev = vals.dtype, vals.device
    in_u, point = _residual_constants(vals.shape[-1], m, dt, dev)
    ok_u = ok & in_u
    Tb = T.to(dt).reshape(-1, 1, 1)
    zero = Tb == 0
    r = torch.softmax(torch.where(ok_u, vals, scalar(-INF, dt, dev)) / torch.where(zero, scalar(1.0, dt, dev), Tb), -1)
    return torch.where(ok_u, torch.where(zero, point, r), scalar(0.0, dt, dev))


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _pool_constants(K: int, m: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """A rheo pool's slot constants (made once per shape): slot kinds; each slot's rank
    without Y's shift (leads s, the sample m, the fill m+1+f at rank m+f); the fill index f
    (-1 elsewhere: never shifted); the sample slot and the leads as masks."""
    s = torch.arange(K, device=device)
    kinds = torch.tensor([LEAD] * m + [SAMPLE] + [FILL] * (K - m - 1), dtype=torch.int8, device=device)
    base = torch.where(s > m, s - 1, s)
    fill = torch.where(s > m, s - m - 1, -1)
    return kinds, base, fill, s == m, s < m


def rheo_slots(ok: torch.Tensor, j: torch.Tensor, params: Params) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A rheo pool's slots (docs/spec.md §2): leads x_1..x_m, the sample, fills = the first
    K-m-1 tokens of U without Y.

    ok: [..., W] the ranked draft tokens' presence; j: [...] Y's index in U (rank order;
    j >= W - m: Y ranks beyond the kept tokens). Returns ranks [..., K] (slot -> rank; the
    sample's clamped into range), kinds [..., K] and slot_ok [..., K].
    """
    K, m, W = params.K, params.m, ok.shape[-1]
    assert m is not None  # Params requires m under policy "rheo"
    kind_row, base, fill, is_y, is_lead = _pool_constants(K, m, ok.device)
    jj = j.unsqueeze(-1)
    # the sample's rank is m + j; a fill at or after Y's place in U moves one rank down
    ranks = (base + torch.where(is_y, jj, (fill >= jj).to(jj.dtype))).clamp(max=W - 1)
    has_u = ok[..., m : m + 1]
    slot_ok = torch.where(is_y, has_u, ok.gather(-1, ranks) & (is_lead | has_u))
    return ranks, kind_row.expand(ok.shape[:-1] + (K,)), slot_ok


def rheo_proxy(q: torch.Tensor, params: Params) -> torch.Tensor:
    """The rheo proxy (docs/spec.md §2) from the ranked draft law q [..., W]: min(q(x_m), z)
    with z the mass left after the leads when m >= 1, min(q(x_1) + eps, 1) when m = 0.
    Returns [...]."""
    m = params.m
    assert m is not None  # Params requires m under policy "rheo"
    if m == 1:
        return torch.minimum(q[..., 0], 1 - q[..., 0])
    if m > 1:
        leads = q[..., 0]
        for i in range(1, m):  # summed left to right, as a cumsum would (m is small): fuses when compiled
            leads = leads + q[..., i]
        return torch.minimum(q[..., m - 1], 1 - leads)
    return torch.clamp(q[..., 0] + float(params.epsilon), max=1.0)
