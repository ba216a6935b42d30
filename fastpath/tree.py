"""The dynamic draft tree, batched (docs/spec.md §3), in the format serving engines use.

Must equal ``rheo.reference.tree.build_tree`` decision by decision on the same uniforms
(§7): same pools (``rheo.fastpath.pool``, §1-§2), same order key, same expansions, same T_R.
``build_tree`` follows §3 step by step:

1. layer 1 is the root's pool (``_root_layer``);
2. growth: for d = 2..D the first B nodes of layer d-1 in order-key order are expanded
   (their ``u_draw`` entries numbered as §7 says) and their children are layer d
   (``_next_layer``);
3. pruning: T_R is the first R recorded nodes in order-key order (``_prune``);
4. T_R in the serving format, ``DraftTree`` (``_draft_tree``).

The order key is (score desc, depth asc, slot path asc). A slot path is compared through
its code within its layer: the parent's rank in the previous layer times K plus the slot
(``variants.token_labels`` swaps the slot for the token under ``tie_break: "token"``).

All requests of a batch are built together: one draft call per layer, no Python loop over
requests. The sparse draft law (``draft_top_k`` = k, default 128) is taken once per
expanded node; ranking, proxy, the draw of Y and the residual law touch only those k
entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from rheo.reference.params import Params

from . import variants
from .inputs import expect, expect_params
from .pool import KIND_NAMES, SAMPLE, Pool, expand
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


@dataclass
class Nodes:
    """Recorded draft nodes (docs/spec.md §3): one layer's, or every layer's concatenated."""

    tokens: torch.Tensor  # [b, n]
    kinds: torch.Tensor  # [b, n] int8 LEAD / SAMPLE / FILL
    slots: torch.Tensor  # [b, n] the slot under the parent
    ranks: torch.Tensor  # [b, n] the token's rank in the parent's draft law
    scores: torch.Tensor  # [b, n] float64 path scores
    ok: torch.Tensor  # [b, n] bool: a node (False: an empty slot or padding)
    parents: torch.Tensor  # [b, n] the parent's index among all recorded nodes, -1: the root
    codes: torch.Tensor  # [b, n] int64 the slot path's code within the layer (the order key's last part)
    depth: torch.Tensor  # [b, n] int64
    rows: torch.Tensor  # [b, n] the row of the node's pool among all expanded nodes
    prefixes: torch.Tensor  # [b, n, D] token paths from the root, -1 padded

    @staticmethod
    def record(
        pool: Pool,
        scores: torch.Tensor,
        parents: torch.Tensor,
        codes: torch.Tensor,
        rows: torch.Tensor,
        prefixes: torch.Tensor,
        D: int,
    ) -> Nodes:
        """A layer's nodes: the children of its e expanded nodes, n = e K. pool: [b, e, K];
        scores, parents, codes, rows: [b, e, K]; prefixes: [b, e, K, d] (d = the depth)."""
        b, e, K = pool.tokens.shape
        n, d = e * K, prefixes.shape[-1]
        pre = prefixes.reshape(b, n, d)
        slots = torch.arange(K, dtype=torch.int64, device=pool.tokens.device).expand(b, e, K)
        return Nodes(
            pool.tokens.reshape(b, n),
            pool.kinds.reshape(b, n),
            slots.reshape(b, n),
            pool.ranks.reshape(b, n),
            scores.reshape(b, n),
            pool.ok.reshape(b, n),
            parents.reshape(b, n),
            codes.reshape(b, n),
            torch.full((b, n), d, dtype=torch.int64, device=pre.device),
            rows.reshape(b, n),
            torch.cat([pre, pre.new_full((b, n, D - d), -1)], -1),
        )

    @staticmethod
    def cat(layers: Sequence[Nodes]) -> Nodes:
        """Every layer's nodes, layer after layer."""
        return Nodes(*(torch.cat([getattr(x, f.name) for x in layers], 1) for f in dataclasses.fields(Nodes)))

    def padded(self) -> Nodes:
        """These nodes and one more that is not ok (pruning's stand-in when fewer than R were recorded)."""
        out = Nodes(
            *(torch.cat([getattr(self, f.name), getattr(self, f.name)[:, :1]], 1) for f in dataclasses.fields(Nodes))
        )
        out.ok[:, -1] = False
        return out


def build_tree(
    draft: DraftFn, params: Params, T: torch.Tensor, uniforms: Uniforms, expand_fn: ExpandFn | None = None
) -> DraftTree:
    """Build T_R for every request (docs/spec.md §3); ``draft(query)`` answers [b, n, V] logits.

    T: [b] temperatures (sampling and verification; the tree's scores use the untempered
    draft law). uniforms: §7 (only ``u_draw`` is read here). ``expand_fn`` replaces
    ``expand`` (the benchmark's full-vocabulary baseline, ``expand_dense``).
    """
    expect_params("build_tree", params)
    b = expect("build_tree", "T", T, "[b]", (None,), "float").shape[0]
    uniforms.expect_for("build_tree", params, b)
    expand_fn = expand_fn or expand
    layer, pool = _root_layer(draft, expand_fn, T, uniforms, params)  # §3: layer 1 is the root's pool
    layers, pools = [layer], [pool]
    n_exp = torch.ones(b, dtype=torch.int64, device=T.device)  # expansions so far (§7 numbering)
    for _ in range(2, params.depth + 1):  # §3 growth
        layer, pool, n_exp = _next_layer(draft, expand_fn, layers, n_exp, T, uniforms, params)
        layers.append(layer)
        pools.append(pool)
    nodes, order = _prune(Nodes.cat(layers), params.budget)  # §3 pruning to T_R
    return _draft_tree(nodes, order, pools, n_exp, params)


def _draft(draft: DraftFn, query: DraftQuery) -> torch.Tensor:
    """The draft model's logits at the query's nodes, checked: [b, n, V]."""
    b, n = query.valid.shape
    return expect(
        "build_tree", f"draft(query) at layer {query.layer}", draft(query), "[b, n, V]", (b, n, None), "float"
    )


def _labels(pool: Pool, params: Params, vocab_size: int) -> tuple[torch.Tensor, int]:
    """The children's labels in the order key and their radix: the slot (docs/spec.md §3).
    pool: [b, e, K]; returns labels [b, e, K]."""
    if params.tie_break == "token":  # the hook: a wrong-on-purpose tie-break
        return variants.token_labels(pool.tokens, vocab_size)
    b, e, K = pool.tokens.shape
    return torch.arange(K, dtype=torch.int64, device=pool.tokens.device).expand(b, e, K), K


def _root_layer(
    draft: DraftFn, expand_fn: ExpandFn, T: torch.Tensor, uniforms: Uniforms, params: Params
) -> tuple[Nodes, Pool]:
    """Layer 1: the root's pool (docs/spec.md §3), drawn on u_draw[0] (§7). T: [b]."""
    b, dev = T.shape[0], T.device
    i64 = torch.int64
    query = DraftQuery(
        0,
        torch.full((b, 1), -1, dtype=i64, device=dev),
        torch.zeros((b, 1, 0), dtype=i64, device=dev),
        torch.full((b, 1), -1, dtype=i64, device=dev),
        torch.full((b, 1), -1, dtype=i64, device=dev),
        torch.ones((b, 1), dtype=torch.bool, device=dev),
    )
    logits = _draft(draft, query)
    K = params.K
    pool = expand_fn(logits, query.valid, uniforms.u_draw[:, :1], T, params).expect("build_tree: layer 1", b, 1, K)
    codes, _ = _labels(pool, params, logits.shape[-1])
    layer = Nodes.record(
        pool,
        pool.factors.to(torch.float64),
        torch.full((b, 1, K), -1, dtype=i64, device=dev),
        codes,
        torch.zeros((b, 1, K), dtype=i64, device=dev),
        pool.tokens.unsqueeze(-1),
        params.depth,
    )
    return layer, pool


def _next_layer(
    draft: DraftFn,
    expand_fn: ExpandFn,
    layers: list[Nodes],
    n_exp: torch.Tensor,
    T: torch.Tensor,
    uniforms: Uniforms,
    params: Params,
) -> tuple[Nodes, Pool, torch.Tensor]:
    """Growth (docs/spec.md §3): expand the first B nodes of the last layer (depth d-1) in
    order-key order; their children are layer d. n_exp: [b] expansions so far; T: [b].
    Returns (layer d, its pools [b, B, K], n_exp)."""
    prev = layers[-1]
    K, B, E = params.K, params.B, params.expansions
    b, dev = T.shape[0], T.device
    d = len(layers) + 1
    sel = _order(prev.scores, prev.ok, prev.codes)[:, :B]  # the first B nodes of layer d-1 by order key
    sel_ok = prev.ok.gather(1, sel)
    e = n_exp.unsqueeze(1) + torch.arange(B, dtype=torch.int64, device=dev)  # §7: their expansion numbers
    u = uniforms.u_draw.gather(1, e.clamp(max=E - 1))
    prefixes = prev.prefixes[..., : d - 1].gather(1, sel.unsqueeze(-1).expand(b, B, d - 1))
    query = DraftQuery(d - 1, prev.tokens.gather(1, sel), prefixes, sel // K, sel % K, sel_ok)
    logits = _draft(draft, query)
    pool = expand_fn(logits, sel_ok, u, T, params).expect(f"build_tree: layer {d}", b, B, K)
    scores = prev.scores.gather(1, sel).unsqueeze(-1) * pool.factors.to(torch.float64)
    parent_rank = _lex_rank(prev.codes, prev.ok).gather(1, sel).unsqueeze(-1)
    labels, radix = _labels(pool, params, logits.shape[-1])
    codes = parent_rank * radix + labels  # < B * K * radix
    parents = (sum(x.tokens.shape[1] for x in layers[:-1]) + sel).unsqueeze(-1).expand(b, B, K)
    first_row = 1 + B * (d - 2)  # the root's pool is row 0, every layer since added B rows
    rows = (first_row + torch.arange(B, dtype=torch.int64, device=dev)).expand(b, B).unsqueeze(-1).expand(b, B, K)
    paths = torch.cat([prefixes.unsqueeze(2).expand(b, B, K, d - 1), pool.tokens.unsqueeze(-1)], -1)
    layer = Nodes.record(pool, scores, parents, codes, rows, paths, params.depth)
    return layer, pool, n_exp + sel_ok.sum(1)


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


def _prune(nodes: Nodes, R: int) -> tuple[Nodes, torch.Tensor]:
    """Pruning (docs/spec.md §3): T_R is the first R recorded nodes in order-key order
    (score desc, depth asc, slot path asc). Returns the nodes (one padding node appended
    when fewer than R were recorded) and T_R's indices into them, order [b, R]."""
    b, N = nodes.tokens.shape
    expect("build_tree", "the recorded nodes' path scores", nodes.scores, "[b, N]", (b, N), torch.float64)
    span = int(nodes.codes.max()) + 1 if nodes.codes.numel() else 1
    order = _order(nodes.scores, nodes.ok, nodes.depth * span + nodes.codes)[:, :R]
    if order.shape[1] < R:  # fewer recorded nodes than the budget
        nodes = nodes.padded()
        order = torch.cat([order, torch.full((b, R - order.shape[1]), N, dtype=torch.int64, device=order.device)], 1)
    return nodes, order


def _draft_tree(nodes: Nodes, order: torch.Tensor, pools: list[Pool], n_exp: torch.Tensor, params: Params) -> DraftTree:
    """T_R in the serving format (``DraftTree``): nodes [b, N] recorded, order [b, R] the
    kept ones in order-key order, pools the expansions' pools, n_exp [b]."""
    (b, R), D, dev = order.shape, params.depth, order.device
    N = nodes.tokens.shape[1]
    valid = nodes.ok.gather(1, order)
    pos = torch.full((b, N + 1), -1, dtype=torch.int64, device=dev)  # recorded node -> its index in T_R
    pos.scatter_(
        1,
        torch.where(valid, order, torch.full_like(order, N)),
        torch.arange(R, dtype=torch.int64, device=dev).expand(b, R),
    )
    pos = pos[:, :-1]
    p_rec = nodes.parents.gather(1, order)
    parents = torch.where(valid & (p_rec >= 0), pos.gather(1, p_rec.clamp(min=0)), torch.full_like(p_rec, -1))
    pad = torch.zeros_like(order)
    tokens = torch.where(valid, nodes.tokens.gather(1, order), pad)
    kinds = torch.where(valid, nodes.kinds.gather(1, order).to(torch.int64), pad - 1).to(torch.int8)
    slots = torch.where(valid, nodes.slots.gather(1, order), pad)
    ranks = torch.where(valid, nodes.ranks.gather(1, order), pad)
    depths = torch.where(valid, nodes.depth.gather(1, order), pad)
    scores = torch.where(
        valid, nodes.scores.gather(1, order), torch.zeros((b, R), dtype=nodes.scores.dtype, device=dev)
    )
    node_pre = torch.where(
        valid.unsqueeze(-1),
        nodes.prefixes.gather(1, order.unsqueeze(-1).expand(b, R, D)),
        torch.full((b, R, D), -1, dtype=torch.int64, device=dev),
    )
    prefixes = torch.cat([torch.full((b, 1, D), -1, dtype=torch.int64, device=dev), node_pre], 1)
    sample_ids, sample_probs, verify_probs, verify_dense = _sample_laws(
        pools, nodes.rows.gather(1, order), valid & (kinds == SAMPLE), params
    )
    mask, pos_ids, children, retrieve = _tree_tensors(parents, depths, slots, valid, params.K, D)
    return DraftTree(
        tokens,
        parents,
        depths,
        slots,
        kinds,
        ranks,
        scores,
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
    ids_all = torch.cat([p.ids for p in pools], 1)  # [b, rows, W]
    (b, R), W = rows.shape, ids_all.shape[-1]
    gather_rows = rows.unsqueeze(-1).expand(b, R, W)
    sample_ids = torch.where(is_sample.unsqueeze(-1), ids_all.gather(1, gather_rows), torch.zeros_like(gather_rows))
    zeros = torch.zeros((b, R, W), dtype=pools[0].residual.dtype, device=rows.device)

    def per_node(laws: list[torch.Tensor]) -> torch.Tensor:  # laws: [b, e, W] per expansion
        return torch.where(is_sample.unsqueeze(-1), torch.cat(laws, 1).gather(1, gather_rows), zeros)

    sample_probs = per_node([p.residual for p in pools])
    verify_probs = sample_probs if params.draft_law == "sampled" else per_node([p.check for p in pools])
    verify_dense = None
    dense = [p.dense for p in pools if p.dense is not None]
    if dense:  # ``draft_law: "dense"`` (a variant of the check law, ``variants.check_law``)
        dense_all = torch.cat(dense, 1)
        Vd = dense_all.shape[-1]
        verify_dense = dense_all.gather(1, rows.unsqueeze(-1).expand(b, R, Vd))
        verify_dense = torch.where(is_sample.unsqueeze(-1), verify_dense, torch.zeros_like(verify_dense))
    return sample_ids, sample_probs, verify_probs, verify_dense


def _tree_tensors(
    parents: torch.Tensor, depths: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor, K: int, D: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention mask [b, R+1, R+1], position ids [b, R+1], children table [b, R+1, K] and
    retrieve indices [b, R, D+1] of T_R, from parents, depths, slots, valid: [b, R]."""
    b, R = parents.shape
    dev = parents.device

    def i64(shape: tuple[int, ...], fill: int) -> torch.Tensor:
        return torch.full(shape, fill, dtype=torch.int64, device=dev)

    def arange(start: int, end: int) -> torch.Tensor:
        return torch.arange(start, end, dtype=torch.int64, device=dev)

    ar = arange(0, b).unsqueeze(1)
    # parent in root-included indexing: root = 0, node i = i + 1; the root has none (-1)
    par1 = torch.cat([i64((b, 1), -1), torch.where(valid, parents + 1, torch.full_like(parents, -1))], 1)
    depth1 = torch.cat([i64((b, 1), 0), depths], 1)
    valid1 = torch.cat([torch.ones((b, 1), dtype=torch.bool, device=dev), valid], 1)
    idx = arange(0, R + 1).expand(b, R + 1)
    mask = torch.eye(R + 1, dtype=torch.bool, device=dev).expand(b, R + 1, R + 1).clone()
    anc = i64((b, R + 1, D + 1), -1)  # anc[i, d] = the ancestor of i at depth d
    cur = torch.where(valid1, idx, torch.full_like(idx, -1))
    rows = arange(0, R + 1).expand(b, R + 1)
    for _ in range(D + 1):
        live = cur >= 0
        c = cur.clamp(min=0)
        mask[ar.expand(b, R + 1)[live], rows[live], c[live]] = True
        dpos = depth1.gather(1, c)
        anc[ar.expand(b, R + 1)[live], rows[live], dpos[live]] = c[live]
        cur = torch.where(live, par1.gather(1, c), cur)
    children = i64((b, (R + 1) * K + 1), -1)
    flat = torch.where(valid, (parents + 1) * K + slots, torch.full_like(parents, (R + 1) * K))
    children.scatter_(1, flat, arange(1, R + 1).expand(b, R))
    children = children[:, :-1].reshape(b, R + 1, K)
    has_child = (children[:, 1:] >= 0).any(-1)
    leaf = valid & ~has_child
    order = torch.argsort((~leaf).to(torch.uint8), dim=1, stable=True)
    retrieve = anc[:, 1:].gather(1, order.unsqueeze(-1).expand(b, R, D + 1))
    retrieve = torch.where(leaf.gather(1, order).unsqueeze(-1), retrieve, torch.full_like(retrieve, -1))
    position_ids = torch.where(valid1, depth1, torch.zeros_like(depth1))
    return mask, position_ids, children, retrieve
