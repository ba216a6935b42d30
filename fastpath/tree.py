"""Batched dynamic draft tree (SPEC sections 1-3), in the format serving engines use.

Must equal ``rheo.reference.tree.build_tree`` decision by decision on the same uniforms
(SPEC 7): same pools (leads, sample, fills), same order key, same expansions, same T_R.

Glossary: *lead* x_1..x_m (deterministic top tokens), *sample* Y ~ r drawn from the
*residual* law beyond the leads, *fill* the best-ranked residual tokens after Y, *proxy*
the sample's construction factor, *order key* (score desc, depth asc, slot path asc),
*budget* R nodes kept by pruning.

All requests of a batch are built together: one draft call per layer, no Python loop over
requests. The sparse draft law (``draft_top_k`` = k, default 128) is taken once per
expanded node; ranking, proxy, the draw of Y and the residual law touch only those k
entries.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch

from .config import FastConfig
from .laws import inverse_cdf, ranked_topk, tempered
from .uniforms import Uniforms

LEAD, SAMPLE, FILL, PAD = 0, 1, 2, -1
KIND_NAMES = {LEAD: "lead", SAMPLE: "sample", FILL: "fill"}


@dataclass
class DraftQuery:
    """What the draft model is asked for at one layer: logits at the nodes being expanded.

    layer:       0 for the root, d when expanding depth-d nodes
    tokens:      [b, n] each node's token (-1 for the root)
    prefixes:    [b, n, layer] each node's token path from the cycle root
    parent_rows: [b, n] the row of the previous query this node is a child of (-1: root)
    slots:       [b, n] the node's slot under that parent (-1: root)
    valid:       [b, n] False for padding rows (a layer with fewer than B nodes)
    The model answers logits [b, n, V] (padding rows: anything finite).
    """

    layer: int
    tokens: torch.Tensor
    prefixes: torch.Tensor
    parent_rows: torch.Tensor
    slots: torch.Tensor
    valid: torch.Tensor


@dataclass
class DraftTree:
    """T_R for a batch, nodes in order-key order (a parent always precedes its children).

    Draft-node tensors, [b, R] (R = budget; rows past ``num_nodes`` are padding):
      tokens (0 on padding), parents (index of the parent node, -1 = the root; -1 on
      padding), depth (1..D), slots (0..K-1), kinds (0 lead, 1 sample, 2 fill, -1 padding),
      ranks (the token's rank in its parent's draft law), scores (float64 path scores),
      valid (bool).
    Tree tensors over the root plus the nodes, index 0 = the root, node i at i + 1:
      attention_mask [b, R+1, R+1] (bool; row i sees its ancestors, itself and the root;
        padding rows see only themselves), position_ids [b, R+1] (depth; add the root's
        absolute position), children [b, R+1, K] (index of the child at each slot, -1 none),
      prefixes [b, R+1, D] (token path from the root, -1 padded),
      retrieve_indices [b, R, D+1] (root-to-leaf paths, one row per leaf, -1 padded rows and
        tails; leaves in node order).
    Sample nodes' residual laws in sparse form, [b, R, W] (W = max(draft_top_k, K)) in
    the parent's rank order: sample_ids (token ids), sample_probs (r, the law Y was drawn
    from; zeros on other nodes), verify_probs (the law the stochastic step checks against:
    r itself unless the ``draft_law`` control says otherwise) and verify_dense [b, R, V]
    (only for the ``draft_law: "dense"`` control, else None).
    num_nodes [b]; expansions [b] (how many u_draw entries were used).
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    depth: torch.Tensor
    slots: torch.Tensor
    kinds: torch.Tensor
    ranks: torch.Tensor
    scores: torch.Tensor
    valid: torch.Tensor
    num_nodes: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    children: torch.Tensor
    prefixes: torch.Tensor
    retrieve_indices: torch.Tensor
    sample_ids: torch.Tensor
    sample_probs: torch.Tensor
    verify_probs: torch.Tensor
    verify_dense: torch.Tensor | None
    expansions: torch.Tensor

    def slot_paths(self, i: int) -> list[tuple]:
        """Request i's nodes' slot paths from the root, in node order."""
        n = int(self.num_nodes[i])
        par, slot = self.parents[i, :n].tolist(), self.slots[i, :n].tolist()
        paths: list = []
        for j in range(n):
            paths.append((paths[par[j]] if par[j] >= 0 else ()) + (slot[j],))
        return paths

    def request(self, i: int) -> list[tuple]:
        """Request i's nodes as (slot_path, token, kind name) tuples, like the reference's
        ``LabelledTree.nodes`` (sorted)."""
        n = int(self.num_nodes[i])
        tok, kind = self.tokens[i, :n].tolist(), self.kinds[i, :n].tolist()
        paths = self.slot_paths(i)
        return sorted((paths[j], tok[j], KIND_NAMES[kind[j]]) for j in range(n))


@dataclass
class _Pool:
    """The K-slot pools of n expanded nodes per request (SPEC 2), [b, n, K] unless noted."""

    tokens: torch.Tensor
    kinds: torch.Tensor
    ranks: torch.Tensor
    factors: torch.Tensor
    ok: torch.Tensor
    ids: torch.Tensor  # [b, n, W] kept token ids in rank order
    residual: torch.Tensor  # [b, n, W] r in rank order (zeros on leads)
    check: torch.Tensor  # [b, n, W] the law the stochastic step uses (r unless a control)
    dense: torch.Tensor | None  # [b, n, V] ``draft_law: "dense"`` only


def _softmax_or_zero(x: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    p = torch.nan_to_num(torch.softmax(x, dim=-1), nan=0.0)
    return torch.where(ok, p, torch.zeros_like(p))


@functools.lru_cache(maxsize=64)
def _pool_constants(K: int, m: int, device):
    """Fill offsets, lead ranks and slot kinds of a rheo pool (made once per shape)."""
    kinds = torch.tensor([LEAD] * m + [SAMPLE] + [FILL] * (K - m - 1), dtype=torch.int8, device=device)
    return torch.arange(K - m - 1, device=device), torch.arange(m, device=device), kinds


def expand(logits: torch.Tensor, valid: torch.Tensor, u: torch.Tensor, T: torch.Tensor, cfg: FastConfig) -> _Pool:
    """Pools of the expanded nodes (SPEC 1-2): logits [b, n, V], valid [b, n], u [b, n]
    (their ``u_draw`` entries), T [b]."""
    K, V = cfg.K, logits.shape[-1]
    k = V if cfg.draft_top_k is None else min(cfg.draft_top_k, V)
    vals, ids = ranked_topk(logits, k)
    W = max(k, K)
    if W > k:
        pad = W - k
        vals = torch.cat([vals, vals.new_full(vals.shape[:-1] + (pad,), float("-inf"))], -1)
        ids = torch.cat([ids, ids.new_zeros(ids.shape[:-1] + (pad,))], -1)
    q = _softmax_or_zero(vals, torch.isfinite(vals))  # truncated, untempered
    ok = (q > 0) & valid.unsqueeze(-1)  # q(x) > 0: the token is ranked
    q = torch.where(ok, q, torch.zeros_like(q))
    shape = ok.shape[:-1]
    if cfg.policy == "topk":
        ranks = torch.arange(K, device=logits.device).expand(shape + (K,))
        kinds = torch.full(shape + (K,), LEAD, dtype=torch.int8, device=logits.device)
        zero = torch.zeros_like(q)
        return _Pool(ids[..., :K], kinds, ranks, q[..., :K], ok[..., :K], ids, zero, zero, None)
    m = cfg.m
    okU = ok[..., m:]
    neg = torch.full_like(vals[..., m:], float("-inf"))
    r = torch.where(okU, tempered(torch.where(okU, vals[..., m:], neg), T), torch.zeros_like(vals[..., m:]))
    j = inverse_cdf(r, u.to(r.dtype))  # Y's index in U (rank order)
    ranks, kinds, slot_ok = rheo_slots(ok, j, cfg)
    factors = q.gather(-1, ranks)
    factors[..., m] = sample_proxy(q, cfg, q.gather(-1, ranks[..., m:m + 1]).squeeze(-1))
    lead_zero = torch.zeros_like(q[..., :m])
    residual = torch.cat([lead_zero, r], -1)
    check, dense = residual, None
    if cfg.draft_law == "untempered":
        check = torch.cat([lead_zero, _softmax_or_zero(torch.where(okU, vals[..., m:], neg), okU)], -1)
    elif cfg.draft_law == "dense":
        masked = logits.scatter(-1, ids[..., :m], float("-inf"))  # leads out, no truncation
        dense = tempered(masked, T)
    return _Pool(ids.gather(-1, ranks), kinds, ranks, factors, slot_ok, ids, residual, check, dense)


def rheo_slots(ok: torch.Tensor, j: torch.Tensor, cfg: FastConfig):
    """A rheo pool's slots (SPEC 2) from the ranked draft tokens' presence ok [..., W] and
    Y's index j [...] in U (rank order; j >= W - m: Y ranks beyond the kept tokens).
    Returns ranks [..., K] (slot -> rank; the sample's clamped into range), kinds and
    slot_ok: leads x_1..x_m, the sample, fills = the first K-m-1 tokens of U without Y."""
    K, m, W = cfg.K, cfg.m, ok.shape[-1]
    shape = ok.shape[:-1]
    f, lead_r, kind_row = _pool_constants(K, m, ok.device)
    fill_ranks = m + f + (f >= j.unsqueeze(-1)).to(f.dtype)
    y_rank = (m + j).clamp(max=W - 1)
    ranks = torch.cat([lead_r.expand(shape + (m,)), y_rank.unsqueeze(-1), fill_ranks], -1)
    has_u = ok[..., m:m + 1]
    slot_ok = torch.cat([ok[..., :m], has_u, ok.gather(-1, fill_ranks) & has_u], -1)
    return ranks, kind_row.expand(shape + (K,)), slot_ok


def sample_proxy(q: torch.Tensor, cfg: FastConfig, q_y: torch.Tensor) -> torch.Tensor:
    """The sample's construction factor (SPEC 2) from the ranked draft law q [..., W] and
    the drawn token's own q(Y) [...] (used only by the "self" control)."""
    m = cfg.m
    if cfg.proxy.kind == "rheo":
        if m >= 1:
            return torch.minimum(q[..., m - 1], 1 - torch.cumsum(q[..., :m], -1)[..., -1])
        return torch.clamp(q[..., 0] + cfg.epsilon, max=1.0)
    if cfg.proxy.kind == "self":
        return q_y
    return torch.full_like(q[..., 0], float(cfg.proxy.value))


def _order(score: torch.Tensor, ok: torch.Tensor, secondary: torch.Tensor) -> torch.Tensor:
    """Indices sorting nodes by the order key (score desc, then ``secondary`` asc); nodes
    that are not ok go last. score: float64 [b, N]; secondary: int64 [b, N] (unique)."""
    i1 = torch.argsort(torch.where(ok, secondary, torch.full_like(secondary, torch.iinfo(torch.int64).max)),
                       dim=-1, stable=True)
    prim = torch.where(ok, -score, torch.full_like(score, float("inf"))).gather(-1, i1)
    return i1.gather(-1, torch.argsort(prim, dim=-1, stable=True))


def _lex_rank(code: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """Each node's rank by ``code`` within its layer (a monotone relabelling that keeps
    the codes of the next layer small)."""
    masked = torch.where(ok, code, torch.full_like(code, torch.iinfo(torch.int64).max))
    order = torch.argsort(masked, dim=-1, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(code.shape[-1], device=code.device).expand_as(order))
    return rank


DraftFn = Callable[[DraftQuery], torch.Tensor]


def build_tree(draft: DraftFn, cfg: FastConfig, T: torch.Tensor, uniforms: Uniforms,
               expand_fn: Callable = None) -> DraftTree:
    """Build T_R for every request (SPEC 3); ``draft(query)`` answers [b, n, V] logits.

    T: [b] temperatures (sampling and verification; the tree's scores use the untempered
    draft law). Uniforms: SPEC 7 (only ``u_draw`` is read here). ``expand_fn`` replaces
    ``expand`` (the benchmark's full-vocabulary baseline, ``expand_dense``).
    """
    expand_fn = expand_fn or expand
    K, B, D, R = cfg.K, cfg.B, cfg.depth, cfg.budget
    dev = T.device
    b = T.shape[0]
    E = cfg.expansions
    i64 = dict(dtype=torch.int64, device=dev)
    root = DraftQuery(0, torch.full((b, 1), -1, **i64), torch.zeros((b, 1, 0), **i64),
                      torch.full((b, 1), -1, **i64), torch.full((b, 1), -1, **i64),
                      torch.ones((b, 1), dtype=torch.bool, device=dev))
    pool = expand_fn(draft(root), root.valid, uniforms.u_draw[:, :1], T, cfg)
    n_exp = torch.ones(b, **i64)
    slot_k = torch.arange(K, **i64)

    # per-layer records, concatenated at the end
    L_tok, L_kind, L_slot, L_rank, L_score, L_ok, L_par, L_code, L_depth, L_row, L_pre = ([] for _ in range(11))
    pools = [pool]

    def record(pool, score, par, code, depth, row, pre):
        n = pool.tokens.shape[1] * K
        L_tok.append(pool.tokens.reshape(b, n))
        L_kind.append(pool.kinds.reshape(b, n))
        L_slot.append(slot_k.expand(b, pool.tokens.shape[1], K).reshape(b, n))
        L_rank.append(pool.ranks.reshape(b, n))
        L_score.append(score.reshape(b, n))
        L_ok.append(pool.ok.reshape(b, n))
        L_par.append(par.reshape(b, n))
        L_code.append(code.reshape(b, n))
        L_depth.append(torch.full((b, n), depth, **i64))
        L_row.append(row.reshape(b, n))
        pre = pre.reshape(b, n, depth)  # token paths, -1 padded to D
        L_pre.append(torch.cat([pre, pre.new_full((b, n, D - depth), -1)], -1))

    score = pool.factors.to(torch.float64)
    first_code = slot_k.expand(b, 1, K) if cfg.tie_break == "slot" else pool.tokens
    record(pool, score, torch.full((b, 1, K), -1, **i64), first_code, 1,
           torch.zeros((b, 1, K), **i64), pool.tokens.unsqueeze(-1))
    base, row_base = 0, 1
    for d in range(2, D + 1):
        tok, ok, sc, code, pre = L_tok[-1], L_ok[-1], L_score[-1], L_code[-1], L_pre[-1]
        nP = tok.shape[1]
        sel = _order(sc, ok, code)[:, :B]  # the first B nodes of layer d-1 by order key
        sel_ok = ok.gather(1, sel)
        e = n_exp.unsqueeze(1) + torch.arange(B, **i64)
        n_exp = n_exp + sel_ok.sum(1)
        u = uniforms.u_draw.gather(1, e.clamp(max=E - 1))
        q_pre = pre[..., :d - 1].gather(1, sel.unsqueeze(-1).expand(b, B, d - 1))
        query = DraftQuery(d - 1, tok.gather(1, sel), q_pre, sel // K, sel % K, sel_ok)
        logits = draft(query)
        pool = expand_fn(logits, sel_ok, u, T, cfg)
        pools.append(pool)
        score = sc.gather(1, sel).unsqueeze(-1) * pool.factors.to(torch.float64)
        prank = _lex_rank(code, ok).gather(1, sel).unsqueeze(-1)
        mult = K if cfg.tie_break == "slot" else logits.shape[-1]  # codes stay below B*K*mult
        code_new = prank * mult + (slot_k.expand(b, B, K) if cfg.tie_break == "slot" else pool.tokens)
        par = (base + sel).unsqueeze(-1).expand(b, B, K)
        row = (row_base + torch.arange(B, **i64)).expand(b, B).unsqueeze(-1).expand(b, B, K)
        pre_new = torch.cat([q_pre.unsqueeze(2).expand(b, B, K, d - 1), pool.tokens.unsqueeze(-1)], -1)
        base += nP
        row_base += B
        record(pool, score, par, code_new, d, row, pre_new)

    tok, kind, slot, rank = (torch.cat(x, 1) for x in (L_tok, L_kind, L_slot, L_rank))
    score, ok, par, code, depth, row = (torch.cat(x, 1) for x in (L_score, L_ok, L_par, L_code, L_depth, L_row))
    span = int(code.max()) + 1 if code.numel() else 1
    order = _order(score, ok, depth * span + code)[:, :R]  # T_R (SPEC 3 pruning)
    N = tok.shape[1]
    if order.shape[1] < R:  # fewer recorded nodes than the budget
        fill = torch.full((b, R - order.shape[1]), N, **i64)
        order = torch.cat([order, fill], 1)
        tok, kind, slot, rank, score, par, depth, row = (
            torch.cat([x, x[:, :1]], 1) for x in (tok, kind, slot, rank, score, par, depth, row))
        ok = torch.cat([ok, torch.zeros((b, 1), dtype=torch.bool, device=dev)], 1)
    valid = ok.gather(1, order)
    num_nodes = valid.sum(1)
    pos = torch.full((b, tok.shape[1] + 1), -1, **i64)
    target = torch.where(valid, order, torch.full_like(order, tok.shape[1]))
    pos.scatter_(1, target, torch.arange(R, **i64).expand(b, R))
    pos = pos[:, :-1]
    p_rec = par.gather(1, order)
    parents = torch.where(valid & (p_rec >= 0), pos.gather(1, p_rec.clamp(min=0)), torch.full_like(p_rec, -1))
    pad = torch.zeros_like(order)
    tokens = torch.where(valid, tok.gather(1, order), pad)
    kinds = torch.where(valid, kind.gather(1, order).to(torch.int64), pad - 1).to(torch.int8)
    slots = torch.where(valid, slot.gather(1, order), pad)
    ranks = torch.where(valid, rank.gather(1, order), pad)
    depths = torch.where(valid, depth.gather(1, order), pad)
    scores = torch.where(valid, score.gather(1, order), torch.zeros((b, R), dtype=score.dtype, device=dev))
    rows = row.gather(1, order)
    pre = torch.cat(L_pre, 1)
    if pre.shape[1] < tok.shape[1]:  # the padding column added above
        pre = torch.cat([pre, pre[:, :1]], 1)
    node_pre = torch.where(valid.unsqueeze(-1), pre.gather(1, order.unsqueeze(-1).expand(b, R, D)),
                           torch.full((b, R, D), -1, **i64))
    prefixes = torch.cat([torch.full((b, 1, D), -1, **i64), node_pre], 1)

    # sparse residual laws of the sample nodes, gathered from their parents' expansions
    ids_all = torch.cat([p.ids for p in pools], 1)  # [b, rows, W]
    W = ids_all.shape[-1]
    is_sample = valid & (kinds == SAMPLE)
    gather_rows = rows.unsqueeze(-1).expand(b, R, W)
    sample_ids = torch.where(is_sample.unsqueeze(-1), ids_all.gather(1, gather_rows), torch.zeros_like(gather_rows))
    zeros = torch.zeros((b, R, W), dtype=pools[0].residual.dtype, device=dev)

    def per_node(name):
        allr = torch.cat([getattr(p, name) for p in pools], 1)
        return torch.where(is_sample.unsqueeze(-1), allr.gather(1, gather_rows), zeros)

    sample_probs = per_node("residual")
    verify_probs = sample_probs if cfg.draft_law == "sampled" else per_node("check")
    verify_dense = None
    if cfg.draft_law == "dense" and cfg.policy == "rheo":
        dense_all = torch.cat([p.dense for p in pools], 1)
        Vd = dense_all.shape[-1]
        verify_dense = dense_all.gather(1, rows.unsqueeze(-1).expand(b, R, Vd))
        verify_dense = torch.where(is_sample.unsqueeze(-1), verify_dense, torch.zeros_like(verify_dense))

    mask, pos_ids, children, retrieve = _tree_tensors(parents, depths, slots, valid, K, D)
    return DraftTree(tokens, parents, depths, slots, kinds, ranks, scores, valid, num_nodes, mask, pos_ids,
                     children, prefixes, retrieve, sample_ids, sample_probs, verify_probs, verify_dense, n_exp)


def _tree_tensors(parents, depths, slots, valid, K, D):
    """Attention mask, position ids, children table and retrieve indices."""
    b, R = parents.shape
    dev = parents.device
    i64 = dict(dtype=torch.int64, device=dev)
    ar = torch.arange(b, **i64).unsqueeze(1)
    # parent in root-included indexing: root = 0, node i = i + 1; the root has none (-1)
    par1 = torch.cat([torch.full((b, 1), -1, **i64), torch.where(valid, parents + 1, torch.full_like(parents, -1))], 1)
    depth1 = torch.cat([torch.zeros((b, 1), **i64), depths], 1)
    valid1 = torch.cat([torch.ones((b, 1), dtype=torch.bool, device=dev), valid], 1)
    idx = torch.arange(R + 1, **i64).expand(b, R + 1)
    mask = torch.eye(R + 1, dtype=torch.bool, device=dev).expand(b, R + 1, R + 1).clone()
    anc = torch.full((b, R + 1, D + 1), -1, **i64)  # anc[i, d] = the ancestor of i at depth d
    cur = torch.where(valid1, idx, torch.full_like(idx, -1))
    rows = torch.arange(R + 1, **i64).expand(b, R + 1)
    for _ in range(D + 1):
        live = cur >= 0
        c = cur.clamp(min=0)
        mask[ar.expand(b, R + 1)[live], rows[live], c[live]] = True
        dpos = depth1.gather(1, c)
        anc[ar.expand(b, R + 1)[live], rows[live], dpos[live]] = c[live]
        cur = torch.where(live, par1.gather(1, c), cur)
    children = torch.full((b, (R + 1) * K + 1), -1, **i64)
    flat = torch.where(valid, (parents + 1) * K + slots, torch.full_like(parents, (R + 1) * K))
    children.scatter_(1, flat, torch.arange(1, R + 1, **i64).expand(b, R))
    children = children[:, :-1].reshape(b, R + 1, K)
    has_child = (children[:, 1:] >= 0).any(-1)
    leaf = valid & ~has_child
    order = torch.argsort((~leaf).to(torch.uint8), dim=1, stable=True)
    retrieve = anc[:, 1:].gather(1, order.unsqueeze(-1).expand(b, R, D + 1))
    retrieve = torch.where(leaf.gather(1, order).unsqueeze(-1), retrieve, torch.full_like(retrieve, -1))
    position_ids = torch.where(valid1, depth1, torch.zeros_like(depth1))
    return mask, position_ids, children, retrieve
