"""Batched RheoVerification, stochastic-first (SPEC section 4), and one-hot Top-K.

Must equal ``rheo.reference.verify.walk`` decision by decision on the same uniforms
(SPEC 7). The walk visits at most one node per depth, so the loop runs over depths and
over the K slots of the visited node, never over requests; the target law is computed
only at the visited node of each request (one [b, V] softmax per depth).

At a visited node v with target law w = p_T(. | v):
1. stochastic step on the sample child y (law r): accept with min(1, w(y) / r(y)),
   else w <- normalize((w - r)^+);
2. one-hot steps on the lead/fill children in slot order: accept x with w(x), else
   w(x) <- 0 and renormalize;
3. nothing accepted (or no children): the correction / bonus token ~ w.
``sample_last`` and ``class_law`` reorder and rewrite these steps (negative controls).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import FastConfig
from .laws import inverse_cdf, target_law
from .tree import FILL, SAMPLE, DraftTree
from .uniforms import Uniforms


@dataclass
class VerifyResult:
    """tokens [b, D+1]: the cycle output O (accepted tokens, then the bonus/correction
    token; -1 padded); lengths [b] = |O| (1..D+1); accepted [b, D]: the accepted draft
    nodes (indices into the tree's [b, R] nodes, -1 padded), root to leaf."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    accepted: torch.Tensor

    def output(self, i: int) -> tuple:
        return tuple(self.tokens[i, : int(self.lengths[i])].tolist())


class _Walk:
    """State of the walk at one depth for every request."""

    def __init__(self, w, live, d, uniforms):
        self.w = w  # [b, V] unnormalized residual target law
        self.Z = w.sum(-1)  # its mass
        self.live = live  # still deciding at this depth
        self.moved = torch.zeros_like(live)
        self.next = torch.full_like(live, -1, dtype=torch.int64)
        self.token = torch.full_like(live, -1, dtype=torch.int64)
        self.j = torch.zeros_like(live, dtype=torch.int64)
        self.d = d
        self.u = uniforms

    def _accept(self, act, a, u, child, token):
        acc = act & (u < a)
        self.moved |= acc
        self.next = torch.where(acc, child, self.next)
        self.token = torch.where(acc, token, self.token)
        return act & ~acc

    def stochastic(self, child, token, ids, probs, dense):
        """child [b] (tree index, -1: no step), token [b]; the law r sparse (ids, probs [b, W])
        or dense [b, V]."""
        act = self.live & ~self.moved & (child >= 0)
        if not bool(act.any()):
            return
        tok = token.clamp(min=0).unsqueeze(1)
        wy = self.w.gather(1, tok).squeeze(1) / self.Z
        if dense is not None:
            ry = dense.gather(1, tok).squeeze(1)
        else:
            ry = (probs * (ids == tok)).sum(1)
        a = torch.where(ry > 0, torch.clamp(wy / torch.where(ry > 0, ry, torch.ones_like(ry)), max=1.0),
                        torch.zeros_like(ry))
        rej = self._accept(act, a, self.u.u_sample[:, self.d].to(a.dtype), child, token)
        # rejected: w <- normalize((w - r)^+), only where rejected
        wn = self.w / self.Z.unsqueeze(1)
        if dense is not None:
            new = torch.clamp(wn - dense, min=0)
        else:
            # subtract min(w, r) on r's support; padding entries (r = 0) may repeat an id
            new = torch.clamp(wn.scatter_add(1, ids, -torch.minimum(wn.gather(1, ids), probs)), min=0)
        self.w = torch.where(rej.unsqueeze(1), new, self.w)
        self.Z = torch.where(rej, self.w.sum(-1), self.Z)

    def det(self, child, token, include):
        """A one-hot step on the child [b] holding token [b] where ``include`` [b]."""
        act = self.live & ~self.moved & (child >= 0) & include
        if not bool(act.any()):
            return
        tok = token.clamp(min=0).unsqueeze(1)
        wx = self.w.gather(1, tok).squeeze(1)
        a = wx / self.Z
        u = self.u.u_det[:, self.d].gather(1, self.j.clamp(max=self.u.u_det.shape[2] - 1).unsqueeze(1)).squeeze(1)
        self.j = self.j + act.to(torch.int64)
        rej = self._accept(act, a, u.to(a.dtype), child, token)
        self.w = torch.where(rej.unsqueeze(1), self.w.scatter(1, tok, 0.0), self.w)
        Z = self.Z - wx
        # rounding can eat the remaining mass: recompute it from w then
        Z = torch.where(Z > 0, Z, self.w.sum(-1))
        self.Z = torch.where(rej, Z, self.Z)


def verify(tree: DraftTree, target_logits: torch.Tensor, T: torch.Tensor, cfg: FastConfig,
           uniforms: Uniforms) -> VerifyResult:
    """Verify T_R for every request (SPEC 4).

    target_logits: [b, R+1, V] target logits at the root (index 0) and at every draft node
    (index i + 1 for node i); T: [b] temperatures; uniforms: SPEC 7 (u_sample, u_det,
    u_final). Policy "topk" verifies one-hot (no stochastic step).
    """
    b, R = tree.tokens.shape
    D, K = cfg.depth, cfg.K
    dev = target_logits.device
    ar = torch.arange(b, device=dev)
    out = torch.full((b, D + 1), -1, dtype=torch.int64, device=dev)
    accepted = torch.full((b, D), -1, dtype=torch.int64, device=dev)
    lengths = torch.zeros(b, dtype=torch.int64, device=dev)
    cur = torch.zeros(b, dtype=torch.int64, device=dev)  # visited node, root = 0
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    tok1 = torch.cat([torch.zeros((b, 1), dtype=torch.int64, device=dev), tree.tokens], 1)
    kind1 = torch.cat([torch.full((b, 1), -1, dtype=torch.int8, device=dev), tree.kinds], 1)
    stochastic_first = cfg.policy == "rheo" and cfg.verify != "sample_last"
    for d in range(D + 1):
        if bool(done.all()):
            break
        p = target_law(target_logits[ar, cur], T, cfg.filters)  # [b, V]
        walk = _Walk(p, ~done, d, uniforms)
        kids = tree.children[ar, cur]  # [b, K] root-included indices, -1 none
        kid_tok = tok1.gather(1, kids.clamp(min=0))
        kid_kind = kind1.gather(1, kids.clamp(min=0))
        present = kids >= 0
        if cfg.policy == "rheo":
            sample = present[:, cfg.m] & (kid_kind[:, cfg.m] == SAMPLE)
            s_child = torch.where(sample, kids[:, cfg.m], torch.full_like(cur, -1))
            s_node = (s_child - 1).clamp(min=0)
            ids = tree.sample_ids[ar, s_node]
            probs = tree.verify_probs[ar, s_node]
            dense = None if tree.verify_dense is None else tree.verify_dense[ar, s_node]
            y = kid_tok[:, cfg.m]
        if cfg.policy == "rheo" and cfg.verify == "class_law":
            # SPEC 4 class_law control: y' = x* when Y is in the band or is x*, law r'
            nfill = (present & (kid_kind == FILL)).sum(1)
            star_rank = cfg.m + nfill
            x_star = ids.gather(1, star_rank.clamp(max=ids.shape[1] - 1).unsqueeze(1)).squeeze(1)
            rk = torch.arange(ids.shape[1], device=dev).unsqueeze(0)
            band = (rk >= cfg.m) & (rk < star_rank.unsqueeze(1))
            at_star = rk == star_rank.unsqueeze(1)
            if dense is not None:  # the draft_law "dense" control, rewritten the same way
                band_v = torch.zeros_like(dense).scatter_add_(1, ids, band.to(dense.dtype)) > 0
                star_v = torch.zeros_like(band_v).scatter_(1, x_star.unsqueeze(1), True)
                band_mass = (dense * band_v).sum(1, keepdim=True)
                dense = torch.where(band_v, torch.zeros_like(dense), dense) + band_mass * star_v
            band_mass = (probs * band).sum(1, keepdim=True)
            probs = torch.where(band, torch.zeros_like(probs), probs) + band_mass * at_star
            y_rank = tree.ranks[ar, s_node]
            y = torch.where(sample & (y_rank <= star_rank), x_star, y)
            at = (kid_tok == y.unsqueeze(1)) & present
            s_child = torch.where(sample & at.any(1), kids.gather(1, at.to(torch.int8).argmax(1, keepdim=True)).squeeze(1),
                                  torch.full_like(cur, -1))
            walk.stochastic(s_child, y, ids, probs, dense)
            for s in range(K):
                walk.det(kids[:, s], kid_tok[:, s], ~sample | (kid_tok[:, s] != y))
        else:
            if stochastic_first:
                walk.stochastic(s_child, y, ids, probs, dense)
            for s in range(K):
                if cfg.policy == "rheo" and s == cfg.m:
                    continue
                walk.det(kids[:, s], kid_tok[:, s], torch.ones_like(present[:, s]))
            if cfg.policy == "rheo" and not stochastic_first:
                walk.stochastic(s_child, y, ids, probs, dense)
        moved = walk.moved
        out[:, d] = torch.where(moved, walk.token, out[:, d])
        if d < D:
            accepted[:, d] = torch.where(moved, walk.next - 1, accepted[:, d])
        final = walk.live & ~moved
        if bool(final.any()):
            w = walk.w / walk.Z.unsqueeze(1)
            t = inverse_cdf(w, uniforms.u_final[:, d].to(w.dtype))
            out[:, d] = torch.where(final, t, out[:, d])
        lengths = lengths + walk.live.to(torch.int64)
        done = done | final
        cur = torch.where(moved, walk.next, cur)
    return VerifyResult(out, lengths, accepted)
