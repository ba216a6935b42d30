"""Batched RheoVerification, stochastic-first (docs/spec.md §4), and point-mass Top-K.

Must equal ``rheo.reference.verify.walk`` decision by decision on the same uniforms (§7).
The walk visits at most one node per depth, so the loop runs over depths only, never over
requests or slots; the target law is computed only at the visited node of each request
(one [b, V] softmax per depth). At the visited node v, for the requests still walking
(``_verify_batched``):

- step 2: w := p_v = p_T(. | v) (``_weights``);
- step 3: the stochastic step on the sample child y (law r): accept with min(1, w(y) / r(y)),
  else w := (w - r)^+ renormalized (``_stochastic``);
- step 4: the point-mass steps on the lead and fill children in slot order: accept x with
  w(x), else w(x) := 0 and renormalize, all children at once (``_deterministic``);
- steps 1 and 5: no child, or every child rejected: the bonus / correction token ~ w
  (``_draw``).

Policy "topk" has no step 3. The wrong-on-purpose verifiers (``sample_last``,
``class_law``, the dense draft law) take the steps one at a time on a ``Walk``
(``_verify_stepwise``) through one hook, ``variants.verify_steps``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rheo.reference.params import Params

from . import variants
from .inputs import expect, expect_params
from .laws import inverse_cdf, positions, scalar, target_law, target_weights
from .pool import SAMPLE
from .tree import DraftTree
from .uniforms import Uniforms
from .walk import Children, SampleChild, Walk

TargetFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class VerifyResult:
    """tokens [b, D+1]: the cycle output O (accepted tokens, then the bonus/correction
    token; -1 padded); lengths [b] = |O| (1..D+1); accepted [b, D]: the accepted draft
    nodes (indices into the tree's [b, R] nodes, -1 padded), root to leaf."""

    tokens: torch.Tensor  # [b, D+1] int64
    lengths: torch.Tensor  # [b] int64
    accepted: torch.Tensor  # [b, D] int64

    def __post_init__(self) -> None:
        """The contract above, checked when a result is made (dtypes and shapes only, no
        device sync; the values' ranges are checked in tests, ``rheo.testing.ranges``)."""
        b, D = expect("VerifyResult", "accepted", self.accepted, "[b, D]", (None, None), torch.int64).shape
        expect("VerifyResult", "tokens", self.tokens, "[b, D+1]", (b, D + 1), torch.int64)
        expect("VerifyResult", "lengths", self.lengths, "[b]", (b,), torch.int64)

    def output(self, i: int) -> tuple[int, ...]:
        return tuple(self.tokens[i, : int(self.lengths[i])].tolist())


class _Workspace(threading.local):
    """Reusable [rows, V] buffers for the visited nodes' target laws: on the CPU a fresh
    multi-megabyte tensor per depth costs more in page faults than the softmax itself."""

    def __init__(self) -> None:
        self.bufs: dict[tuple[str, torch.device, torch.dtype, int], torch.Tensor] = {}

    def get(self, name: str, n: int, like: torch.Tensor) -> torch.Tensor:
        key = (name, like.device, like.dtype, like.shape[-1])
        buf = self.bufs.get(key)
        if buf is None or buf.shape[0] < n:
            buf = torch.empty((max(n, 1), like.shape[-1]), device=like.device, dtype=like.dtype)
            self.bufs[key] = buf
        return buf[:n]


_workspace = _Workspace()


def verify(
    tree: DraftTree,
    target_logits: torch.Tensor | TargetFn,
    T: torch.Tensor,
    params: Params,
    uniforms: Uniforms,
    static: bool = False,
) -> VerifyResult:
    """Verify T_R for every request (docs/spec.md §4).

    target_logits: [b, R+1, V] target logits at the root (index 0) and at every draft node
    (index i + 1 for node i), or a callable ``(rows [n], nodes [n]) -> [n, V]`` that
    answers only the visited nodes with a fresh tensor (it is used in place);
    T: [b] temperatures; uniforms: §7 (u_sample, u_det, u_final).
    Policy "topk" verifies point-mass (no stochastic step).

    Each depth is a fixed sequence of tensor ops over the requests still walking (the
    stochastic step, then every deterministic child at once: ``_stochastic``,
    ``_deterministic``). ``static=True``
    walks all D+1 depths over all b requests, finished ones masked: static shapes and no
    host sync (what a CUDA graph captures). ``static=False`` (the default) walks only the
    requests still deciding and stops when none is: one host sync per depth, fewer rows.
    """
    expect_params("verify", params)
    b, R = tree.expect_for("verify", params).tokens.shape
    if isinstance(target_logits, torch.Tensor):
        expect("verify", "target_logits", target_logits, "[b, R+1, V]", (b, R + 1, None), "float")
    elif not callable(target_logits):
        raise TypeError(
            f"verify: target_logits must be a [b, R+1, V] tensor or a callable (rows, nodes) -> [n, V], "
            f"got {type(target_logits).__name__}"
        )
    expect("verify", "T", T, "[b]", (b,), "float")
    uniforms.expect_for("verify", params, b)
    if params.policy == "rheo" and (params.verify != "rheo" or tree.verify_dense is not None):
        if static:
            raise ValueError(static_unsupported("verify", params))
        return _verify_stepwise(tree, target_logits, T, params, uniforms)  # the hook: a wrong-on-purpose verifier
    return _verify_batched(tree, target_logits, T, params, uniforms, static)


def static_unsupported(where: str, params: Params) -> str | None:
    """Why ``params`` has no static cycle (None: it has one). The wrong-on-purpose
    verifiers (``verify`` other than "rheo", ``draft_law: "dense"``) walk one step at a time
    over the requests still walking, with host syncs."""
    if params.policy == "rheo" and (params.verify != "rheo" or params.draft_law == "dense"):
        return (
            f"{where}: static=True (the static, sync-free cycle a CUDA graph or torch.compile runs) covers "
            f'the rheo verifier with the sampled draft law and Top-K; got verify="{params.verify}", '
            f'draft_law="{params.draft_law}": use static=False (CycleGraph: none of its modes)'
        )
    return None


def _verify_batched(
    tree: DraftTree,
    target_logits: torch.Tensor | TargetFn,
    T: torch.Tensor,
    params: Params,
    uniforms: Uniforms,
    static: bool,
) -> VerifyResult:
    """``verify`` for the rheo verifier (sampled draft law) and Top-K: steps 2-5 of
    docs/spec.md §4 as one fixed sequence of ops per depth. Per-request values are [n, 1]
    columns (no squeezing back and forth); each depth reads one row per request of each
    table (``_node_tables``, and the uniforms and temperatures in ``coins``)."""
    b, R = tree.tokens.shape
    D, K, dev = params.depth, params.K, tree.tokens.device
    ints, floats, sizes = _node_tables(tree, params)
    ints, floats = ints.reshape(b * (R + 1), -1), floats.reshape(b * (R + 1), -1)
    # the coins and temperatures in the target logits' dtype, as the steps compare them (a
    # callable's dtype is known once it answers: float64 until then, cast at each depth)
    dtype = target_logits.dtype if isinstance(target_logits, torch.Tensor) else torch.float64
    zero_T = T == 0
    divide, greedy = True, True
    if not static:  # a host sync once per call (the walk syncs at every depth anyway)
        divide, greedy = not bool((T == 1).all()), bool(zero_T.any())
    # per request and depth, one row: u_sample, u_final, the temperature (1 at T = 0), a
    # shift that empties a T = 0 row's softmax (+inf there, else 0), u_det [K]
    per_T = torch.stack([torch.where(zero_T, 1.0, T), torch.where(zero_T, float("inf"), 0.0)], -1)
    coins = torch.cat(
        [
            uniforms.u_sample.unsqueeze(-1),
            uniforms.u_final.unsqueeze(-1),
            per_T.unsqueeze(1).expand(b, D + 1, 2),
            uniforms.u_det,
        ],
        -1,
    ).to(dtype)
    c = _verify_constants(b, R, dev)
    cur, done, none = c["zeros"], c["false"], c["-1"]
    out_cols: list[torch.Tensor] = []
    acc_cols: list[torch.Tensor] = []
    live: torch.Tensor | None
    for d in range(D + 1):
        if static:
            ix, live, base, cv, ud = c["rows"], ~done, c["base"], cur, coins[:, d]
        else:
            ix = (~done).squeeze(1).nonzero().squeeze(1)  # [n] the requests still walking
            if ix.numel() == 0:
                break
            live, base, cv, ud = None, c["base"][ix], cur[ix], coins[:, d].index_select(0, ix)
        at = (base + cv).squeeze(1)  # [n] the visited nodes' rows in [b * (R+1)]
        u_s, u_f, T_w, shift, u_det = torch.split(ud, [1, 1, 1, 1, K], 1)
        w, Z = _weights(target_logits, ix, cv, at, T_w, shift, params, divide, greedy, static)
        if w.dtype != ud.dtype:  # a callable's logits
            u_s, u_f, _, _, u_det = torch.split(ud.to(w.dtype), [1, 1, 1, 1, K], 1)
        row = torch.split(ints.index_select(0, at), sizes, 1)
        idx, tok, coin = row[:3]
        if params.policy == "rheo":  # step 3 on the sample child, then step 4
            s_child, y, ids = row[3:]
            probs, inv_ry = torch.split(floats.index_select(0, at), [ids.shape[1], 1], 1)
            act = s_child >= 0 if live is None else live & (s_child >= 0)
            acc_s, Z = _stochastic(w, Z, act, y, ids, probs, inv_ry, u_s)
            act = ~acc_s if live is None else live & ~acc_s
            acc_d, nxt, token, Z = _deterministic(w, Z, act, idx, tok, coin, u_det)
            moved = acc_s | acc_d
            nxt, token = torch.where(acc_s, s_child, nxt), torch.where(acc_s, y, token)
        else:  # step 4 on every child
            act = c["true"][: at.shape[0]] if live is None else live
            moved, nxt, token, Z = _deterministic(w, Z, act, idx, tok, coin, u_det)
        # steps 1 and 5: where no child was accepted, the bonus / correction token ~ w (§7)
        final = _draw(w, u_f * Z, None if static else _workspace.get("cum", w.shape[0], w), static)
        step_out = torch.where(moved, token, final)
        acc_node = torch.where(moved, nxt - 1, none)
        if live is not None:  # static
            out_cols.append(torch.where(live, step_out, none))
            acc_cols.append(acc_node)  # -1 on finished requests: nothing moved there
            done = done | ~moved
            cur = torch.where(moved, nxt, cur)
        else:
            out_cols.append(c["none"].index_put((ix,), step_out))
            acc_cols.append(c["none"].index_put((ix,), acc_node))
            done = done.index_put((ix,), ~moved)
            cur = cur.index_put((ix,), torch.where(moved, nxt, cv))
    tokens = torch.cat(out_cols + [c["none"]] * (D + 1 - len(out_cols)), 1)
    accepted = torch.cat((acc_cols + [c["none"]] * (D + 1 - len(acc_cols)))[:D], 1)
    return VerifyResult(tokens, (tokens >= 0).sum(1), accepted)


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _verify_constants(b: int, R: int, device: torch.device) -> dict[str, torch.Tensor]:
    i64 = torch.int64
    rows = torch.arange(b, dtype=i64, device=device)
    return {
        "rows": rows,
        "base": (rows * (R + 1)).unsqueeze(1),
        "zeros": torch.zeros((b, 1), dtype=i64, device=device),
        "none": torch.full((b, 1), -1, dtype=i64, device=device),
        "-1": torch.tensor(-1, dtype=i64, device=device),
        "false": torch.zeros((b, 1), dtype=torch.bool, device=device),
        "true": torch.ones((b, 1), dtype=torch.bool, device=device),
    }


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _det_slots(K: int, m: int | None, device: torch.device) -> torch.Tensor:
    """The deterministic children's slots in slot order: every slot but the sample's m."""
    return torch.tensor([s for s in range(K) if s != m], dtype=torch.int64, device=device)


def _node_tables(tree: DraftTree, params: Params) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """What a step needs to know about each node's children (root-included, [b, R+1, .]),
    gathered once per tree so that a depth reads one row per request: ints = (the
    deterministic children's indices [Kd] (-1: none), their tokens [Kd] (0 where none),
    each one's coin [Kd] (how many present ones precede it); under policy "rheo" the
    sample child's index [1] (-1: none), Y [1], r's ids [W]) and floats = (r [W] as the
    stochastic step checks it, 1 / r(Y) [1] (0 where r(Y) = 0)); sizes: ints' parts."""
    b, R = tree.tokens.shape
    K, dev = params.K, tree.tokens.device
    kids = tree.children  # [b, R+1, K]
    tok1 = torch.cat([torch.zeros((b, 1), dtype=torch.int64, device=dev), tree.tokens], 1)
    ktok = tok1.gather(1, kids.clamp(min=0).reshape(b, -1)).reshape(b, R + 1, K)
    if params.policy != "rheo":
        coin = torch.cumsum(kids >= 0, -1) - 1  # a child's coin: the present ones before it
        empty = torch.zeros((b, R + 1, 1), dtype=tree.verify_probs.dtype, device=dev)
        return torch.cat([kids, ktok, coin.clamp(min=0)], -1), empty, [K, K, K]
    m = params.m
    assert m is not None  # Params requires m under policy "rheo"
    det = _det_slots(K, m, dev)
    kind1 = torch.cat([torch.full((b, 1), -1, dtype=torch.int8, device=dev), tree.kinds], 1)
    s_idx = kids[..., m : m + 1]
    s_child = torch.where(
        (s_idx >= 0) & (kind1.gather(1, s_idx.clamp(min=0).squeeze(-1)).unsqueeze(-1) == SAMPLE), s_idx, -1
    )
    y = ktok[..., m : m + 1]
    W = tree.sample_ids.shape[-1]
    node = (s_child - 1).clamp(min=0).expand(b, R + 1, W)
    ids, probs = tree.sample_ids.gather(1, node), tree.verify_probs.gather(1, node)
    ry = (probs * (ids == y)).sum(-1, keepdim=True)
    inv_ry = torch.where(ry > 0, 1 / ry, scalar(0.0, ry.dtype, ry.device))
    kd = kids.index_select(2, det)
    coin = (torch.cumsum(kd >= 0, -1) - 1).clamp(min=0)
    ints = torch.cat([kd, ktok.index_select(2, det), coin, s_child, y, ids], -1)
    return ints, torch.cat([probs, inv_ry], -1), [K - 1, K - 1, K - 1, 1, 1, W]


def _weights(
    target_logits: torch.Tensor | TargetFn,
    ix: torch.Tensor,
    c: torch.Tensor,
    at: torch.Tensor,
    T_w: torch.Tensor,
    shift: torch.Tensor,
    params: Params,
    divide: bool,
    greedy: bool,
    static: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 2, w := p_v at the visited nodes c [n, 1] of requests ix [n] (rows ``at`` [n] of
    the flattened logits), as (w [n, V], Z [n, 1]) with p_v = w / Z, in a copy of the
    logits (a reused workspace unless ``static``) and without a host sync. T_w: [n, 1]
    temperatures (1 at T = 0); shift: [n, 1] +inf at T = 0, else 0. ``divide``: some
    T != 1; ``greedy``: some T = 0 (both True: any T); ``static``: the target filters
    without a host sync."""
    if not isinstance(target_logits, torch.Tensor):
        logits = target_logits(ix, c.squeeze(1))
        T_w, shift = T_w.to(logits.dtype), shift.to(logits.dtype)
    elif target_logits.is_contiguous():  # index_select on rows is much faster than [ix, c]
        flat = target_logits.view(-1, target_logits.shape[-1])
        # static: a fresh tensor (a captured graph must not share a buffer that a later,
        # larger call reallocates); else a reused workspace
        buf = None if static else _workspace.get("w", at.numel(), flat)
        logits = flat.index_select(0, at) if buf is None else torch.index_select(flat, 0, at, out=buf)
    else:
        logits = target_logits[ix, c.squeeze(1)]
    if params.target_filters.active:
        p = target_law(logits, torch.where(shift > 0, 0.0, T_w).squeeze(1), params.target_filters, static)
        return p, p.new_ones((p.shape[0], 1))
    if divide:
        logits.div_(T_w)
    if not greedy:
        logits.sub_(logits.amax(-1, keepdim=True)).exp_()  # in place: no new [n, V] buffer
        return logits, logits.sum(-1, keepdim=True)
    top, at_top = logits.max(-1, keepdim=True)  # the first maximum: T = 0's token (lowest id on ties)
    logits.sub_(top + shift).exp_()  # T = 0 rows: all 0 ...
    logits.scatter_(1, at_top, 1.0)  # ... but their argmax (elsewhere the maximum's exp(0) = 1 already)
    return logits, logits.sum(-1, keepdim=True)


def _draw(w: torch.Tensor, u: torch.Tensor, out: torch.Tensor | None, static: bool) -> torch.Tensor:
    """``inverse_cdf`` on columns (docs/spec.md §7): the first entry of w [n, V] whose
    cumulative mass exceeds u [n, 1], cumulative sums in ``out`` (None: a fresh tensor);
    ``static``: no host sync.
    Returns [n, 1]."""
    return inverse_cdf(w, u.squeeze(1), out=out, static=static).unsqueeze(1)


def _stochastic(
    w: torch.Tensor,
    Z: torch.Tensor,
    act: torch.Tensor,
    y: torch.Tensor,
    ids: torch.Tensor,
    probs: torch.Tensor,
    inv_ry: torch.Tensor,
    u: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 3 where ``act`` [n, 1]: accept Y = y [n, 1] with min(1, w(y) / r(y)) on the coin
    u [n, 1] (inv_ry = 1 / r(y), 0 where r(y) = 0: never accepted; u < 1, so the min needs
    no clamp); on rejection w := (w - r Z)^+ on r's support (ids, probs [n, W]; w in place;
    where Y is accepted w no longer matters). Returns (accepted, Z after; not repaired yet)."""
    acc = act & (u < w.gather(1, y) / Z * inv_ry)
    taken = torch.minimum(w.gather(1, ids), probs * (Z * (act & ~acc)))  # 0 where not rejected
    w.scatter_add_(1, ids, taken.neg())  # w - min(w, rZ) >= 0 exactly; padding entries (r = 0) unchanged
    return acc, Z - taken.sum(1, keepdim=True)


@functools.cache  # never evicted: a captured CUDA graph keeps these tensors' addresses
def _strictly_before(n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[n, n]: entry (i, j) is 1 where j < i (a row sums what comes before column i)."""
    return torch.ones((n, n), device=device, dtype=dtype).tril(-1)


def _deterministic(
    w: torch.Tensor,
    Z: torch.Tensor,
    act: torch.Tensor,
    idx: torch.Tensor,
    tok: torch.Tensor,
    coin: torch.Tensor,
    u_det: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Step 4 on every deterministic child at once, where ``act`` [n, 1]: the children idx
    [n, Kd] (-1: none) holding tok [n, Kd] (distinct tokens), tried in slot order, the i-th
    present one accepted with w(x_i) / (Z - the mass of the children tried before it) on
    its coin u_det[coin_i] ([n, K]). Tokens are distinct, so every coin's probability is
    known before the walk: one cumulative sum replaces the loop over slots. Every tried
    token is set to 0 in w, which is what rejecting them all leaves; where one is accepted
    the walk moves on and w no longer matters. Where the tracked mass comes out <= 0
    (rounding ate it) it is summed afresh from w, as ``Walk.fix_mass`` does (also step 3's
    Z, passed in unrepaired). Returns (accepted, the child, its token, Z after rejecting
    every child), each [n, 1]."""
    if idx.shape[1] == 0:  # no deterministic slot (K = 1, m = 0): only step 3's repair
        none = torch.zeros_like(act)
        return none, none.long() - 1, none.long(), torch.where(Z > 0, Z, w.sum(-1, keepdim=True))
    tried = (idx >= 0) & act
    wx = w.gather(1, tok) * tried
    w.scatter_add_(1, tok, wx.neg())  # w(x) := 0 for every child tried (exactly)
    rest = w.sum(-1, keepdim=True)  # the mass of every other token, summed afresh (the repair)
    total = wx.sum(1, keepdim=True)
    # the mass of the children tried before each one: a masked sum over the few slots, not a
    # cumulative sum, so that a compiled cycle fuses it (inductor runs a cumsum as its own kernel)
    before = (wx.unsqueeze(1) * _strictly_before(wx.shape[1], wx.device, wx.dtype)).sum(-1)
    Zi = Z - before
    Zi = torch.where(Zi > 0, Zi, rest + total - before)
    hit = tried & (u_det.gather(1, coin) < wx / Zi)
    # the first accepted (the last slot where none is): a min, not an argmax (inductor's
    # vectorized int8 argmax over these few columns indexed out of range) nor a cumsum
    slots = positions(idx.shape[1], idx.device)
    first = torch.where(hit, slots, slots[-1]).amin(1, keepdim=True)
    Z = Z - total
    return hit.any(1, keepdim=True), idx.gather(1, first), tok.gather(1, first), torch.where(Z > 0, Z, rest)


def _verify_stepwise(
    tree: DraftTree, target_logits: torch.Tensor | TargetFn, T: torch.Tensor, params: Params, uniforms: Uniforms
) -> VerifyResult:
    """The wrong-on-purpose verifiers (``variants.verify_steps``): the walk of docs/spec.md
    §4 one step at a time (``Walk``), over the requests still walking."""
    b, R = tree.tokens.shape
    D, K = params.depth, params.K
    dev = tree.tokens.device
    out = torch.full((b, D + 1), -1, dtype=torch.int64, device=dev)
    accepted = torch.full((b, D), -1, dtype=torch.int64, device=dev)
    lengths = torch.zeros(b, dtype=torch.int64, device=dev)
    cur = torch.zeros(b, dtype=torch.int64, device=dev)  # visited node, root = 0
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    tok1 = torch.cat([torch.zeros((b, 1), dtype=torch.int64, device=dev), tree.tokens], 1)
    kind1 = torch.cat([torch.full((b, 1), -1, dtype=torch.int8, device=dev), tree.kinds], 1)
    det_slots = [s for s in range(K) if params.policy == "topk" or s != params.m]  # leads and fills
    for d in range(D + 1):
        ix = (~done).nonzero().squeeze(1)  # requests still walking
        if ix.numel() == 0:
            break
        c = cur[ix]  # their visited nodes
        w, Z = _target_weights(target_logits, ix, c, R, T, params)  # step 2: w := p_v
        walk = Walk(w, Z, uniforms.u_sample[ix, d], uniforms.u_det[ix, d])
        kids = _children(tree, tok1, kind1, ix, c, params)
        s = kids.sample
        if s is not None and (params.verify != "rheo" or s.dense is not None):
            variants.verify_steps(walk, kids, params)  # the hook: a wrong-on-purpose verifier
        else:
            if s is not None:
                walk.stochastic(s.index, s.token, s.ids, s.probs)  # step 3
            for slot in det_slots:  # step 4
                walk.det(kids.index[:, slot], kids.tokens[:, slot], kids.present[:, slot])
        step_out, fin = _final_token(walk, uniforms.u_final[:, d], ix)  # steps 1 and 5
        out[ix, d] = step_out
        if d < D:
            accepted[ix, d] = torch.where(walk.moved, walk.next - 1, accepted[ix, d])
        lengths[ix] += 1
        done[ix[fin]] = True
        cur[ix] = torch.where(walk.moved, walk.next, c)
    return VerifyResult(out, lengths, accepted)


def _target_weights(
    target_logits: torch.Tensor | TargetFn, ix: torch.Tensor, c: torch.Tensor, R: int, T: torch.Tensor, params: Params
) -> tuple[torch.Tensor, torch.Tensor]:
    """p_v at the visited nodes c [n] of requests ix [n] as (w [n, V], Z [n]), p_v = w / Z
    (docs/spec.md §4 step 2), computed in a workspace copy of the logits. T: [b]."""
    if not isinstance(target_logits, torch.Tensor):
        logits = target_logits(ix, c)
    elif target_logits.is_contiguous():  # index_select on rows is much faster than [ix, c]
        flat = target_logits.view(-1, target_logits.shape[-1])
        logits = torch.index_select(flat, 0, ix * (R + 1) + c, out=_workspace.get("w", ix.numel(), flat))
    else:
        logits = target_logits[ix, c]
    return target_weights(logits, T[ix], params.target_filters)  # in place on the copy


def _children(
    tree: DraftTree, tok1: torch.Tensor, kind1: torch.Tensor, ix: torch.Tensor, c: torch.Tensor, params: Params
) -> Children:
    """The surviving children of the visited nodes c [n] of requests ix [n]; tok1, kind1:
    [b, R+1] the tree's tokens and kinds with the root in front."""
    index = tree.children[ix, c]  # [n, K] root-included indices, -1 none
    at = index.clamp(min=0)
    tokens = tok1[ix].gather(1, at)
    present = index >= 0
    if params.policy != "rheo":
        return Children(index, tokens, present, None)
    m = params.m
    assert m is not None  # Params requires m under policy "rheo"
    survived = present[:, m] & (kind1[ix].gather(1, at[:, m : m + 1]).squeeze(1) == SAMPLE)
    child = torch.where(survived, index[:, m], torch.full_like(c, -1))
    node = (child - 1).clamp(min=0)
    dense = None if tree.verify_dense is None else tree.verify_dense[ix, node]
    sample = SampleChild(
        survived,
        child,
        tokens[:, m],
        tree.ranks[ix, node],
        tree.sample_ids[ix, node],
        tree.verify_probs[ix, node],
        dense,
    )
    return Children(index, tokens, present, sample)


def _final_token(walk: Walk, u_final: torch.Tensor, ix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """docs/spec.md §4 steps 1 and 5: where no child was accepted, the bonus or correction
    token ~ w by inverse CDF (§7) on u_final [b] (this depth's column). ix: [n] the requests
    walking. Returns (the token each emits here [n], the positions in ix that stop [m])."""
    step_out = walk.token
    fin = (~walk.moved).nonzero().squeeze(1)
    if fin.numel():
        w = (
            walk.w
            if fin.numel() == ix.numel()
            else torch.index_select(walk.w, 0, fin, out=_workspace.get("fin", fin.numel(), walk.w))
        )
        u = u_final[ix[fin]].to(w.dtype) * walk.Z[fin]
        step_out = step_out.index_put((fin,), inverse_cdf(w, u, out=_workspace.get("cum", fin.numel(), w)))
    return step_out, fin
