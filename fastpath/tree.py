"""The dynamic draft tree, batched (docs/spec.md §3), in the format serving engines use.

Must equal ``rheo.reference.tree.build_tree`` decision by decision on the same uniforms
(§7): same pools (``rheo.fastpath.pool``, §1-§2), same order key, same expansions, same T_R.
``build_tree`` follows §3 step by step:

1. layer 1 is the root's pool;
2. growth: for d = 2..D the first B nodes of layer d-1 in order-key order are expanded
   (their ``u_draw`` entries numbered as §7 says) and their children are layer d;
3. pruning: T_R is the first R recorded nodes in order-key order (``_prune``);
4. T_R in the serving format, ``DraftTree`` (``_draft_tree``).

The order key is (score desc, depth asc, slot path asc). Each layer is stored in slot-path
order (the expanded nodes sorted by their place in their layer, then the K slots), so a
recorded node's index orders the nodes by (depth, slot path) and the order key is one stable
sort by score (``_Layout``). Under ``tie_break: "token"`` (``variants.token_labels``) a slot
path's code within its layer is the parent's rank in the previous layer times V plus the
token, sorted explicitly (``_order``). Shapes are static for given (b, K, depth, budget, B,
draft_top_k); with ``static=True`` so are the ops (no data-dependent branch: what a CUDA
graph or ``torch.compile`` runs), while the default settles a tie at the ``draft_top_k``
boundary only in the rows that have one (``rheo bench fastpath`` counts both).

All requests of a batch are built together: one draft call per layer, no Python loop over
requests. The sparse draft law (``draft_top_k`` = k, default 128) is taken once per
expanded node; ranking, proxy, the draw of Y and the residual law touch only those k
entries.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rheo.reference.params import Params

from . import variants
from .inputs import expect, expect_params
from .laws import positions, scalar
from .pool import INF, KIND_NAMES, SAMPLE, Pool, expand
from .uniforms import Uniforms


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
    tokens: torch.Tensor  # [b, n]
    prefixes: torch.Tensor  # [b, n, layer]
    parent_rows: torch.Tensor  # [b, n]
    slots: torch.Tensor  # [b, n]
    valid: torch.Tensor  # [b, n] bool


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

    tokens: torch.Tensor  # [b, R] int64
    parents: torch.Tensor  # [b, R] int64
    depth: torch.Tensor  # [b, R] int64
    slots: torch.Tensor  # [b, R] int64
    kinds: torch.Tensor  # [b, R] int8
    ranks: torch.Tensor  # [b, R] int64
    scores: torch.Tensor  # [b, R] float64
    valid: torch.Tensor  # [b, R] bool
    num_nodes: torch.Tensor  # [b] int64
    attention_mask: torch.Tensor  # [b, R+1, R+1] bool
    position_ids: torch.Tensor  # [b, R+1] int64
    children: torch.Tensor  # [b, R+1, K] int64
    prefixes: torch.Tensor  # [b, R+1, D] int64
    retrieve_indices: torch.Tensor  # [b, R, D+1] int64
    sample_ids: torch.Tensor  # [b, R, W] int64
    sample_probs: torch.Tensor  # [b, R, W]
    verify_probs: torch.Tensor  # [b, R, W]
    verify_dense: torch.Tensor | None  # [b, R, V]
    expansions: torch.Tensor  # [b] int64

    def __post_init__(self) -> None:
        """The format's contract, checked when a tree is made (by ``build_tree`` or by
        ``rheo.integrations.tree_formats``): every tensor's dtype and shape as above, the
        path scores float64 whatever the model's dtype, sample_probs and verify_probs
        floating point and of one dtype. Reads only ``.shape`` and ``.dtype`` (no device
        sync); the values' ranges are checked in tests (``rheo.testing.ranges``)."""
        w = "DraftTree"
        b, R = expect(w, "tokens", self.tokens, "[b, R]", (None, None), torch.int64).shape
        for name in ("parents", "depth", "slots", "ranks"):
            expect(w, name, getattr(self, name), "[b, R]", (b, R), torch.int64)
        expect(w, "kinds", self.kinds, "[b, R]", (b, R), torch.int8)
        expect(w, "scores", self.scores, "[b, R] (path scores)", (b, R), torch.float64)
        expect(w, "valid", self.valid, "[b, R]", (b, R), torch.bool)
        expect(w, "num_nodes", self.num_nodes, "[b]", (b,), torch.int64)
        expect(w, "expansions", self.expansions, "[b]", (b,), torch.int64)
        expect(w, "attention_mask", self.attention_mask, "[b, R+1, R+1]", (b, R + 1, R + 1), torch.bool)
        expect(w, "position_ids", self.position_ids, "[b, R+1]", (b, R + 1), torch.int64)
        expect(w, "children", self.children, "[b, R+1, K]", (b, R + 1, None), torch.int64)
        D = expect(w, "prefixes", self.prefixes, "[b, R+1, D]", (b, R + 1, None), torch.int64).shape[-1]
        expect(w, "retrieve_indices", self.retrieve_indices, "[b, R, D+1]", (b, R, D + 1), torch.int64)
        W = expect(w, "sample_ids", self.sample_ids, "[b, R, W]", (b, R, None), torch.int64).shape[-1]
        expect(w, "sample_probs", self.sample_probs, "[b, R, W]", (b, R, W), "float")
        expect(w, "verify_probs", self.verify_probs, "[b, R, W]", (b, R, W), self.sample_probs.dtype)
        if self.verify_dense is not None:
            expect(w, "verify_dense", self.verify_dense, "[b, R, V]", (b, R, None), "float")

    def expect_for(self, where: str, params: Params, b: int | None = None) -> DraftTree:
        """This tree, checked to be T_R of ``params`` (R = budget, K slots) for b requests
        (None: any). Reads only ``.shape`` and ``.dtype``."""
        b, R = expect(where, "tree.tokens", self.tokens, "[b, R]", (b, params.budget), torch.int64).shape
        expect(where, "tree.children", self.children, "[b, R+1, K]", (b, R + 1, params.K), torch.int64)
        return self

    def slot_paths(self, i: int) -> list[tuple[int, ...]]:
        """Request i's nodes' slot paths from the root, in node order."""
        n = int(self.num_nodes[i])
        par, slot = self.parents[i, :n].tolist(), self.slots[i, :n].tolist()
        paths: list[tuple[int, ...]] = []
        for j in range(n):
            paths.append((paths[par[j]] if par[j] >= 0 else ()) + (slot[j],))
        return paths

    def request(self, i: int) -> list[tuple[tuple[int, ...], int, str]]:
        """Request i's nodes as (slot_path, token, kind name) tuples, like the reference's
        ``LabelledTree.nodes`` (sorted)."""
        n = int(self.num_nodes[i])
        tok, kind = self.tokens[i, :n].tolist(), self.kinds[i, :n].tolist()
        paths = self.slot_paths(i)
        return sorted((paths[j], tok[j], KIND_NAMES[kind[j]]) for j in range(n))


DraftFn = Callable[[DraftQuery], torch.Tensor]
ExpandFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Params], Pool]


@dataclass(frozen=True)
class _Layout:
    """Where every recorded node sits (docs/spec.md §3), made once per shape: layer 1 (the
    root's K children) is nodes 0..K-1, layer d >= 2 the B K nodes from K + (d-2) B K on,
    each layer in slot-path order (parent's position, then slot), so that a node's index
    orders the nodes by (depth, slot path): the order key's tie-break. One sentinel node N
    (not a node) follows. ``table`` [N+1, 3]: each node's slot, depth and pool row (the row
    of its parent's expansion among all expansions; 0 for the sentinel); ``sizes`` the
    layers' node counts."""

    table: torch.Tensor
    sizes: tuple[int, ...]


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _layout(K: int, B: int, D: int, device: torch.device) -> _Layout:
    sizes = (K,) + (B * K,) * (D - 1)
    slots, depth, rows = [], [], []
    for d, n in enumerate(sizes, start=1):
        t = torch.arange(n, dtype=torch.int64)
        slots.append(t % K)
        depth.append(torch.full((n,), d, dtype=torch.int64))
        rows.append(torch.zeros(n, dtype=torch.int64) if d == 1 else 1 + B * (d - 2) + t // K)
    zero = torch.zeros(1, dtype=torch.int64)
    table = torch.stack([torch.cat(slots + [zero]), torch.cat(depth + [zero]), torch.cat(rows + [zero])], -1)
    return _Layout(table.to(device), sizes)


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _root_query(b: int, device: torch.device) -> DraftQuery:
    """The root's query (layer 0), made once per batch size and device."""
    i64 = torch.int64
    none = torch.full((b, 1), -1, dtype=i64, device=device)
    return DraftQuery(
        0,
        none,
        torch.zeros((b, 1, 0), dtype=i64, device=device),
        none,
        none,
        torch.ones((b, 1), dtype=torch.bool, device=device),
    )


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _pads(b: int, device: torch.device) -> dict[str, torch.Tensor]:
    """One sentinel column per recorded-node field (the values of a padding row of T_R)."""
    i64 = torch.int64
    return {
        "tokens": torch.zeros((b, 1), dtype=i64, device=device),
        "kinds": torch.full((b, 1), -1, dtype=torch.int8, device=device),
        "ok": torch.zeros((b, 1), dtype=torch.bool, device=device),
        "scores": torch.zeros((b, 1), dtype=torch.float64, device=device),
        "minus1": torch.full((b, 1), -1, dtype=i64, device=device),
        "ones": torch.ones(b, dtype=i64, device=device),
    }


def build_tree(
    draft: DraftFn,
    params: Params,
    T: torch.Tensor,
    uniforms: Uniforms,
    expand_fn: ExpandFn | None = None,
    static: bool = False,
) -> DraftTree:
    """Build T_R for every request (docs/spec.md §3); ``draft(query)`` answers [b, n, V] logits.

    T: [b] temperatures (sampling and verification; the tree's scores use the untempered
    draft law). uniforms: §7 (only ``u_draw`` is read here). ``expand_fn`` replaces
    ``expand`` (the benchmark's full-vocabulary baseline, ``expand_dense``).

    Static shapes for given (b, K, depth, budget, B, draft_top_k): each layer is stored in
    slot-path order (``_Layout``), so the order key is one stable sort on the scores. The
    one host sync per layer is ``ranked_topk``'s check for a tie at the ``draft_top_k``
    boundary; ``static=True`` settles such ties in every row instead (no host sync at all:
    what a CUDA graph captures).
    """
    expect_params("build_tree", params)
    b = expect("build_tree", "T", T, "[b]", (None,), "float").shape[0]
    uniforms.expect_for("build_tree", params, b)
    expand_fn = expand_fn or (functools.partial(expand, static=True) if static else expand)
    K, B, D, E = params.K, params.B, params.depth, params.expansions
    dev = T.device
    token_ties = params.tie_break == "token"  # the hook: a wrong-on-purpose tie-break (explicit codes)
    layout, pads = _layout(K, B, D, dev), _pads(b, dev)
    # §3 layer 1: the root's pool, drawn on u_draw[0] (§7)
    query = _root_query(b, dev)
    logits = _draft(draft, query)
    pool = expand_fn(logits, query.valid, uniforms.u_draw[:, :1], T, params).expect("build_tree: layer 1", b, 1, K)
    V = logits.shape[-1]
    tokens, kinds, ranks, oks = [pool.tokens[:, 0]], [pool.kinds[:, 0]], [pool.ranks[:, 0]], [pool.ok[:, 0]]
    scores = [pool.factors[:, 0].to(torch.float64)]
    psel, pools = [pads["minus1"]], [pool]  # each expansion's node (-1: the root), its pool
    codes = [variants.token_labels(pool.tokens, V)[0][:, 0]] if token_ties else []
    n_exp, offset, prefixes = pads["ones"], 0, query.prefixes  # expansions so far (§7 numbering)
    for d in range(2, D + 1):  # §3 growth: expand the first B nodes of layer d-1 by order key
        if token_ties:
            by_key = _order(scores[-1], oks[-1], codes[-1])[:, :B]
        else:  # the layer is in slot-path order: a stable sort by score is the order key
            key = torch.where(oks[-1], scores[-1], scalar(-INF, torch.float64, dev))
            by_key = torch.sort(key, dim=-1, descending=True, stable=True).indices[:, :B]
        sel, key_rank = torch.sort(by_key, dim=-1)  # the expanded nodes in slot-path order
        sel_ok = oks[-1].gather(1, sel)
        u = uniforms.u_draw.gather(1, (n_exp.unsqueeze(1) + key_rank).clamp(max=E - 1))  # §7: in order-key order
        qrow = torch.div(sel, K, rounding_mode="floor")  # the row of the previous query
        sel_tok = tokens[-1].gather(1, sel)
        prefixes = torch.cat([prefixes.gather(1, qrow.unsqueeze(-1).expand(b, B, d - 2)), sel_tok.unsqueeze(-1)], -1)
        query = DraftQuery(d - 1, sel_tok, prefixes, qrow, sel - qrow * K, sel_ok)
        logits = _draft(draft, query)
        pool = expand_fn(logits, sel_ok, u, T, params).expect(f"build_tree: layer {d}", b, B, K)
        scores.append((scores[-1].gather(1, sel).unsqueeze(-1) * pool.factors.to(torch.float64)).reshape(b, B * K))
        if token_ties:
            parent_rank = _lex_rank(codes[-1], oks[-1]).gather(1, sel).unsqueeze(-1)
            labels, radix = variants.token_labels(pool.tokens, V)
            codes.append((parent_rank * radix + labels).reshape(b, B * K))
        tokens.append(pool.tokens.reshape(b, B * K))
        kinds.append(pool.kinds.reshape(b, B * K))
        ranks.append(pool.ranks.reshape(b, B * K))
        oks.append(pool.ok.reshape(b, B * K))
        psel.append(sel + offset)
        pools.append(pool)
        offset += layout.sizes[d - 2]
        n_exp = n_exp + sel_ok.sum(1)
    # §3 pruning: T_R is the first R recorded nodes in order-key order; node N is the sentinel
    rec = _Recorded(
        torch.cat(tokens + [pads["tokens"]], 1),
        torch.cat(kinds + [pads["kinds"]], 1),
        torch.cat(ranks + [pads["tokens"]], 1),
        torch.cat(scores + [pads["scores"]], 1),
        torch.cat(oks + [pads["ok"]], 1),
        torch.cat(psel, 1),
    )
    order = _prune(rec, params.budget, codes, layout, B * K * V)  # codes < B K V (parent rank, label)
    return _draft_tree(rec, order, pools, n_exp, layout, params)


@dataclass
class _Recorded:
    """Every recorded node (docs/spec.md §3) in ``_Layout`` order, the sentinel last: [b, N+1];
    ``parents`` [b, 1 + B(D-1)] each expansion's node (-1: the root)."""

    tokens: torch.Tensor
    kinds: torch.Tensor
    ranks: torch.Tensor
    scores: torch.Tensor  # float64 path scores
    ok: torch.Tensor
    parents: torch.Tensor


def _draft(draft: DraftFn, query: DraftQuery) -> torch.Tensor:
    """The draft model's logits at the query's nodes, checked: [b, n, V]."""
    b, n = query.valid.shape
    return expect(
        "build_tree", f"draft(query) at layer {query.layer}", draft(query), "[b, n, V]", (b, n, None), "float"
    )


def _order(score: torch.Tensor, ok: torch.Tensor, secondary: torch.Tensor) -> torch.Tensor:
    """Indices sorting nodes by the order key (score desc, then ``secondary`` asc); nodes
    that are not ok go last. score: float64 [b, N]; ok: [b, N]; secondary: int64 [b, N] (unique)."""
    i1 = torch.argsort(
        torch.where(ok, secondary, torch.full_like(secondary, torch.iinfo(torch.int64).max)), dim=-1, stable=True
    )
    prim = torch.where(ok, -score, torch.full_like(score, float("inf"))).gather(-1, i1)
    return i1.gather(-1, torch.argsort(prim, dim=-1, stable=True))


def _lex_rank(code: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """Each node's rank by ``code`` [b, N] within its layer, ok [b, N] first (a monotone
    relabelling that keeps the codes of the next layer small)."""
    masked = torch.where(ok, code, torch.full_like(code, torch.iinfo(torch.int64).max))
    order = torch.argsort(masked, dim=-1, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(code.shape[-1], device=code.device).expand_as(order))
    return rank


def _prune(rec: _Recorded, R: int, codes: list[torch.Tensor], layout: _Layout, span: int) -> torch.Tensor:
    """Pruning (docs/spec.md §3): T_R is the first R recorded nodes in order-key order
    (score desc, depth asc, slot path asc), as indices [b, R] into ``rec`` (the sentinel N
    where fewer than R nodes were recorded). ``codes``: each layer's slot-path codes under
    the token tie-break, else empty (the node index is the tie-break); span: a bound on
    them (codes < span, no host sync to find it)."""
    b, N1 = rec.tokens.shape
    expect("build_tree", "the recorded nodes' path scores", rec.scores, "[b, N]", (b, N1), torch.float64)
    if codes:  # the token tie-break: (depth, code) as the secondary key
        code = torch.cat(codes + [codes[0][:, :1]], 1)
        depth = layout.table[:, 1].expand(b, N1)
        order = _order(rec.scores, rec.ok, depth * span + code)
    else:
        key = torch.where(rec.ok, rec.scores, scalar(-INF, torch.float64, rec.scores.device))
        order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    order = order[:, :R]
    if order.shape[1] < R:  # fewer recorded nodes than the budget: the sentinel pads
        order = torch.cat([order, order.new_full((b, R - order.shape[1]), N1 - 1)], 1)
    return order


def _draft_tree(
    rec: _Recorded, order: torch.Tensor, pools: list[Pool], n_exp: torch.Tensor, layout: _Layout, params: Params
) -> DraftTree:
    """T_R in the serving format (``DraftTree``): rec the recorded nodes [b, N+1] (the
    sentinel last), order [b, R] the kept ones in order-key order, pools the expansions'
    pools, n_exp [b]."""
    (b, R), D = order.shape, params.depth
    N = rec.tokens.shape[1] - 1
    valid = rec.ok.gather(1, order)
    at = torch.where(valid, order, N)  # padding rows read the sentinel
    slots, depths, rows = layout.table[at].unbind(-1)
    # recorded node -> its index in T_R (shifted by one: index 0 is "the root", -1)
    pos = torch.full((b, N + 2), -1, dtype=torch.int64, device=order.device)
    pos.scatter_(1, at + 1, positions(R, order.device).expand(b, R))
    parents = pos.gather(1, rec.parents.gather(1, rows) + 1)
    kinds = rec.kinds.gather(1, at)
    sample_ids, sample_probs, verify_probs, verify_dense = _sample_laws(pools, rows, kinds == SAMPLE, params)
    mask, pos_ids, children, retrieve, anc = _tree_tensors_and_ancestors(parents, depths, slots, valid, params.K, D)
    tokens = rec.tokens.gather(1, at)
    # token paths from the ancestors (root-included indices, -1 none): node i is token i - 1
    tok_ext = torch.cat([tokens, _pads(b, order.device)["minus1"]], 1)  # index R: none
    path = torch.where(anc[:, :, 1:] > 0, anc[:, :, 1:] - 1, R)
    prefixes = tok_ext.gather(1, path.reshape(b, -1)).reshape(b, R + 1, D)
    return DraftTree(
        tokens,
        parents,
        depths,
        slots,
        kinds,
        rec.ranks.gather(1, at),
        rec.scores.gather(1, at),
        valid,
        valid.sum(1),
        mask,
        pos_ids,
        children,
        prefixes,
        retrieve,
        sample_ids,
        sample_probs,
        verify_probs,
        verify_dense,
        n_exp,
    )


def _sample_laws(
    pools: list[Pool], rows: torch.Tensor, is_sample: torch.Tensor, params: Params
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The sample nodes' residual laws (docs/spec.md §2), gathered from their parents'
    expansions: rows [b, R] each node's pool row, is_sample [b, R]. Returns sample_ids,
    sample_probs (r), verify_probs (the law §4 step 3 checks against) [b, R, W] and
    verify_dense [b, R, V] or None (zeros away from the samples)."""
    (b, R), W = rows.shape, pools[0].ids.shape[-1]
    gather_rows = rows.unsqueeze(-1).expand(b, R, W)
    keep = is_sample.unsqueeze(-1)

    def per_node(laws: list[torch.Tensor]) -> torch.Tensor:  # laws: [b, e, W] per expansion
        return torch.where(keep, torch.cat(laws, 1).gather(1, gather_rows), 0)

    sample_ids = per_node([p.ids for p in pools])
    sample_probs = per_node([p.residual for p in pools])
    verify_probs = sample_probs if params.draft_law == "sampled" else per_node([p.check for p in pools])
    verify_dense = None
    dense = [p.dense for p in pools if p.dense is not None]
    if dense:  # ``draft_law: "dense"`` (a variant of the check law, ``variants.check_law``)
        dense_all = torch.cat(dense, 1)
        Vd = dense_all.shape[-1]
        verify_dense = dense_all.gather(1, rows.unsqueeze(-1).expand(b, R, Vd))
        verify_dense = torch.where(keep, verify_dense, torch.zeros_like(verify_dense))
    return sample_ids, sample_probs, verify_probs, verify_dense


def _tree_tensors(
    parents: torch.Tensor, depths: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor, K: int, D: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention mask [b, R+1, R+1], position ids [b, R+1], children table [b, R+1, K] and
    retrieve indices [b, R, D+1] of T_R, from parents, depths, slots, valid: [b, R]."""
    return _tree_tensors_and_ancestors(parents, depths, slots, valid, K, D)[:4]


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _tree_constants(b: int, R: int, D: int, device: torch.device) -> dict[str, torch.Tensor]:
    i64 = torch.int64
    none = R + 1  # the sentinel index: no node
    return {
        "root": torch.zeros((b, 1), dtype=i64, device=device),
        "none": torch.full((b, 1), none, dtype=i64, device=device),
        "true": torch.ones((b, 1), dtype=torch.bool, device=device),
        "idx": torch.arange(R + 1, dtype=i64, device=device).expand(b, R + 1),
        "gen": torch.arange(D + 1, dtype=i64, device=device),
        "eye": torch.eye(R + 1, dtype=torch.bool, device=device),
        "kids": torch.arange(1, R + 1, dtype=i64, device=device).expand(b, R),
    }


def _tree_tensors_and_ancestors(
    parents: torch.Tensor, depths: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor, K: int, D: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_tree_tensors`` and the ancestors anc [b, R+1, D+1] (anc[i, d] the root-included
    index of i's ancestor at depth d, i itself at its depth, -1 none). Static shapes: D
    pointer steps, no host sync."""
    b, R = parents.shape
    c = _tree_constants(b, R, D, parents.device)
    none = R + 1
    # parent pointers over the root-included indices and the sentinel R+1 (root, padding -> R+1)
    up1 = torch.cat([c["none"], torch.where(valid, parents + 1, none), c["none"]], 1)  # [b, R+2]
    valid1 = torch.cat([c["true"], valid], 1)
    depth1 = torch.cat([c["root"], torch.where(valid, depths, 0)], 1)  # [b, R+1]
    cur = torch.where(valid1, c["idx"], none)
    ups = [cur]
    for _ in range(D):
        cur = up1.gather(1, cur)
        ups.append(cur)
    up = torch.stack(ups, -1)  # [b, R+1, D+1]: the g-th ancestor
    g = depth1.unsqueeze(-1) - c["gen"]  # the generation of the ancestor at depth d
    anc = torch.where(g >= 0, up.gather(2, g.clamp(min=0)), none)
    # i sees j when j is i's ancestor at j's depth (padding rows: only themselves)
    mask = (anc.gather(2, depth1.unsqueeze(1).expand(b, R + 1, R + 1)) == c["idx"].unsqueeze(1)) | c["eye"]
    children = torch.full((b, (R + 1) * K + 1), -1, dtype=torch.int64, device=parents.device)
    flat = torch.where(valid, (parents + 1) * K + slots, (R + 1) * K)
    children.scatter_(1, flat, c["kids"])
    children = children[:, :-1].reshape(b, R + 1, K)
    leaf = valid & ~(children[:, 1:] >= 0).any(-1)
    order = torch.argsort((~leaf).to(torch.uint8), dim=1, stable=True)
    anc = torch.where(anc == none, -1, anc)
    retrieve = anc[:, 1:].gather(1, order.unsqueeze(-1).expand(b, R, D + 1))
    retrieve = torch.where(leaf.gather(1, order).unsqueeze(-1), retrieve, -1)
    return mask, depth1, children, retrieve, anc
