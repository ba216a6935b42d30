"""The wrong-on-purpose variants, kept in one place (docs/spec.md §2, §3 and §4), as
``rheo.reference.verify.steps_at`` keeps the reference's.

They exist for the negative controls only: the suite must catch each one. The correct
algorithm never calls into this module; each variant is reached through one hook at the
step it changes:

- ``proxy``: the sample's factor under proxy "self" (q(Y)) or a constant c (§2), from
  ``rheo.fastpath.pool.expand``;
- ``check_law``: the law the stochastic step checks Y against under ``draft_law``
  "untempered" (r from the untempered q) or "dense" (r before truncation) (§4), from
  ``expand``;
- ``token_labels``: the order key's tie-break by token path instead of slot path under
  ``tie_break: "token"`` (§3), from ``rheo.fastpath.tree.build_tree``;
- ``verify_steps``: the steps at a visited node under ``verify`` "sample_last" (the
  deterministic steps first) or "class_law" (Y checked against its equivalence class's law),
  and the stochastic step on a dense law (§4), from ``rheo.fastpath.verify.verify``.
"""

from __future__ import annotations

import torch

from rheo.reference.params import Params

from .laws import softmax_or_zero, tempered
from .walk import Children, Walk


def proxy(q: torch.Tensor, q_y: torch.Tensor, params: Params) -> torch.Tensor:
    """The sample's factor under a wrong-on-purpose proxy (docs/spec.md §2): "self" is the
    drawn token's own untempered q(Y), a constant c is c. q: [..., W] the ranked draft law;
    q_y: [...] q(Y). Returns [...]."""
    if params.proxy.kind == "self":
        return q_y
    assert params.proxy.value is not None  # Params checks a constant proxy's value
    return torch.full_like(q[..., 0], float(params.proxy.value))


def check_law(
    logits: torch.Tensor,
    vals: torch.Tensor,
    ids: torch.Tensor,
    ok: torch.Tensor,
    residual: torch.Tensor,
    T: torch.Tensor,
    params: Params,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The law the stochastic step checks Y against under a wrong-on-purpose ``draft_law``
    (docs/spec.md §4), as (check [b, n, W] in rank order, dense [b, n, V] or None).

    "untempered": the residual law built from the untempered q; "dense": the tempered draft
    law before truncation, restricted to every non-lead token (check stays r, the dense law
    goes to the verifier). logits: [b, n, V]; vals, ids, ok, residual: [b, n, W]; T: [b].
    """
    m = params.m
    assert m is not None  # the draft_law controls are Rheo's
    if params.draft_law == "untempered":
        okU, valsU = ok[..., m:], vals[..., m:]
        untempered = softmax_or_zero(torch.where(okU, valsU, torch.full_like(valsU, float("-inf"))), okU)
        return torch.cat([torch.zeros_like(residual[..., :m]), untempered], -1), None
    masked = logits.scatter(-1, ids[..., :m], float("-inf"))  # leads out, no truncation
    return residual, tempered(masked, T)


def token_labels(tokens: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, int]:
    """``tie_break: "token"`` (docs/spec.md §3): a node's label in the order key is its
    token, not its slot. tokens: [b, n, K]. Returns (labels [b, n, K], radix V)."""
    return tokens, vocab_size


def verify_steps(walk: Walk, kids: Children, params: Params) -> None:
    """The steps at the visited nodes under a wrong-on-purpose verifier (docs/spec.md §4):
    "sample_last" runs the deterministic steps first; "class_law" checks y' against r'
    (``_class_law``); under ``draft_law: "dense"`` the stochastic step uses the dense law."""
    s = kids.sample
    assert s is not None and params.m is not None  # the verifier controls are Rheo's
    if params.verify == "class_law":
        _class_law(walk, kids, s.dense, params.m)
        return
    if params.verify != "sample_last":
        _stochastic(walk, s.index, s.token, s.ids, s.probs, s.dense)
    for slot in range(params.K):
        if slot != params.m:
            walk.det(kids.index[:, slot], kids.tokens[:, slot], kids.present[:, slot])
    if params.verify == "sample_last":
        _stochastic(walk, s.index, s.token, s.ids, s.probs, s.dense)


def _stochastic(
    walk: Walk,
    child: torch.Tensor,
    token: torch.Tensor,
    ids: torch.Tensor,
    probs: torch.Tensor,
    dense: torch.Tensor | None,
) -> None:
    """Step 3 on the child [n] (index, -1: no step) holding token [n], with r sparse (ids,
    probs [n, W]) or, under ``draft_law: "dense"``, dense [n, V]."""
    if dense is None:
        walk.stochastic(child, token, ids, probs)
        return
    act = walk.active(child)
    if not bool(act.any()):
        return
    rej = walk.stochastic_coin(act, child, token, dense.gather(1, token.clamp(min=0).unsqueeze(1)).squeeze(1))
    new = torch.clamp(walk.w - dense * walk.Z.unsqueeze(1), min=0)
    walk.w = torch.where(rej.unsqueeze(1), new, walk.w)
    walk.Z = torch.where(rej, walk.w.sum(-1), walk.Z)
    walk.fix_mass()


def _class_law(walk: Walk, kids: Children, dense: torch.Tensor | None, m: int) -> None:
    """``verify: "class_law"`` (docs/spec.md §4): with b surviving fills, the band u_1..u_b and
    x* = u_{b+1}, the stochastic token is y' = x* when Y is in the band or is x*, else Y; its
    law r' moves the band's mass to x*. Then point-mass steps on every other surviving child
    in slot order. The dense law of ``draft_law: "dense"`` (dense: [n, V] or None) is
    rewritten the same way."""
    s = kids.sample
    assert s is not None
    ids, probs = s.ids, s.probs
    star_rank = m + kids.present[:, m + 1 :].sum(1)  # fills sit in slots m+1..K-1 (§2)
    x_star = ids.gather(1, star_rank.clamp(max=ids.shape[1] - 1).unsqueeze(1)).squeeze(1)
    rk = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
    band = (rk >= m) & (rk < star_rank.unsqueeze(1))
    at_star = rk == star_rank.unsqueeze(1)
    if dense is not None:
        band_v = torch.zeros_like(dense).scatter_add_(1, ids, band.to(dense.dtype)) > 0
        star_v = torch.zeros_like(band_v).scatter_(1, x_star.unsqueeze(1), True)
        band_mass = (dense * band_v).sum(1, keepdim=True)
        dense = torch.where(band_v, torch.zeros_like(dense), dense) + band_mass * star_v
    band_mass = (probs * band).sum(1, keepdim=True)
    probs = torch.where(band, torch.zeros_like(probs), probs) + band_mass * at_star
    y = torch.where(s.survived & (s.rank <= star_rank), x_star, s.token)
    at = (kids.tokens == y.unsqueeze(1)) & kids.present
    pick = kids.index.gather(1, at.to(torch.int8).argmax(1, keepdim=True)).squeeze(1)
    child = torch.where(s.survived & at.any(1), pick, torch.full_like(pick, -1))
    _stochastic(walk, child, y, ids, probs, dense)
    for slot in range(kids.index.shape[1]):
        walk.det(kids.index[:, slot], kids.tokens[:, slot], ~s.survived | (kids.tokens[:, slot] != y))
