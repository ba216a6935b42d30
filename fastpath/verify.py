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

import threading
from dataclasses import dataclass

import torch

from .config import FastConfig
from .laws import inverse_cdf, target_weights
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
    """The walk at one depth for the requests still deciding there (a subset of the batch).

    w [n, V] is the residual target law kept unnormalized with its mass Z [n]; rejections
    touch only the rejected token (one-hot step) or r's k entries (stochastic step)."""

    def __init__(self, w, Z, u_sample, u_det):
        self.w = w
        self.Z = Z
        n = w.shape[0]
        self.moved = torch.zeros(n, dtype=torch.bool, device=w.device)
        self.next = torch.full((n,), -1, dtype=torch.int64, device=w.device)
        self.token = torch.full((n,), -1, dtype=torch.int64, device=w.device)
        self.j = torch.zeros(n, dtype=torch.int64, device=w.device)
        self.u_sample, self.u_det = u_sample, u_det  # [n], [n, K]

    def _accept(self, act, a, u, child, token):
        acc = act & (u < a)
        self.moved |= acc
        self.next = torch.where(acc, child, self.next)
        self.token = torch.where(acc, token, self.token)
        return act & ~acc

    def _fix_mass(self):
        bad = ~(self.Z > 0)
        if bool(bad.any()):  # rounding ate the remaining mass: recompute it from w
            self.Z = torch.where(bad, self.w.sum(-1), self.Z)

    def stochastic(self, child, token, ids, probs, dense):
        """child [n] (tree index, -1: no step), token [n]; the law r sparse (ids, probs
        [n, W]) or, for the dense control, dense [n, V]."""
        act = ~self.moved & (child >= 0)
        if not bool(act.any()):
            return
        tok = token.clamp(min=0).unsqueeze(1)
        wy = self.w.gather(1, tok).squeeze(1) / self.Z
        ry = dense.gather(1, tok).squeeze(1) if dense is not None else (probs * (ids == tok)).sum(1)
        safe = torch.where(ry > 0, ry, torch.ones_like(ry))
        a = torch.where(ry > 0, torch.clamp(wy / safe, max=1.0), torch.zeros_like(ry))
        rej = self._accept(act, a, self.u_sample.to(a.dtype), child, token)
        Z = self.Z.unsqueeze(1)
        if dense is not None:
            new = torch.clamp(self.w - dense * Z, min=0)
            self.w = torch.where(rej.unsqueeze(1), new, self.w)
            self.Z = torch.where(rej, self.w.sum(-1), self.Z)
        else:
            # w <- (w - r Z)^+ on r's support (padding entries have r = 0: no change)
            w_ids = self.w.gather(1, ids)
            delta = torch.where(rej.unsqueeze(1), -torch.minimum(w_ids, probs * Z), torch.zeros_like(w_ids))
            self.w.scatter_add_(1, ids, delta)  # w - min(w, rZ) >= 0 exactly
            self.Z = self.Z + delta.sum(1)
        self._fix_mass()

    def det(self, child, token, include):
        """A one-hot step on the child [n] holding token [n] where ``include`` [n]."""
        act = ~self.moved & (child >= 0) & include
        if not bool(act.any()):
            return
        tok = token.clamp(min=0).unsqueeze(1)
        wx = self.w.gather(1, tok).squeeze(1)
        a = wx / self.Z
        u = self.u_det.gather(1, self.j.clamp(max=self.u_det.shape[1] - 1).unsqueeze(1)).squeeze(1)
        self.j = self.j + act.to(torch.int64)
        rej = self._accept(act, a, u.to(a.dtype), child, token)
        self.w.scatter_(1, tok, torch.where(rej, torch.zeros_like(wx), wx).unsqueeze(1))
        self.Z = torch.where(rej, self.Z - wx, self.Z)
        self._fix_mass()


class _Workspace(threading.local):
    """Reusable [rows, V] buffers for the visited nodes' target laws: on the CPU a fresh
    multi-megabyte tensor per depth costs more in page faults than the softmax itself."""

    def __init__(self):
        self.bufs: dict = {}

    def get(self, name: str, n: int, like: torch.Tensor) -> torch.Tensor:
        key = (name, like.device, like.dtype, like.shape[-1])
        buf = self.bufs.get(key)
        if buf is None or buf.shape[0] < n:
            buf = torch.empty((max(n, 1), like.shape[-1]), device=like.device, dtype=like.dtype)
            self.bufs[key] = buf
        return buf[:n]


_workspace = _Workspace()


def verify(tree: DraftTree, target_logits, T: torch.Tensor, cfg: FastConfig, uniforms: Uniforms) -> VerifyResult:
    """Verify T_R for every request (SPEC 4).

    target_logits: [b, R+1, V] target logits at the root (index 0) and at every draft node
    (index i + 1 for node i), or a callable ``(rows [n], nodes [n]) -> [n, V]`` that
    answers only the visited nodes with a fresh tensor (it is used in place);
    T: [b] temperatures; uniforms: SPEC 7 (u_sample, u_det, u_final).
    Policy "topk" verifies one-hot (no stochastic step).
    """
    b, R = tree.tokens.shape
    D, K = cfg.depth, cfg.K
    dev = tree.tokens.device
    out = torch.full((b, D + 1), -1, dtype=torch.int64, device=dev)
    accepted = torch.full((b, D), -1, dtype=torch.int64, device=dev)
    lengths = torch.zeros(b, dtype=torch.int64, device=dev)
    cur = torch.zeros(b, dtype=torch.int64, device=dev)  # visited node, root = 0
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    tok1 = torch.cat([torch.zeros((b, 1), dtype=torch.int64, device=dev), tree.tokens], 1)
    kind1 = torch.cat([torch.full((b, 1), -1, dtype=torch.int8, device=dev), tree.kinds], 1)
    stochastic_first = cfg.policy == "rheo" and cfg.verify != "sample_last"
    rheo = cfg.policy == "rheo"
    for d in range(D + 1):
        ix = (~done).nonzero().squeeze(1)  # requests still walking
        if ix.numel() == 0:
            break
        c = cur[ix]
        if not isinstance(target_logits, torch.Tensor):
            logits = target_logits(ix, c)
        elif target_logits.is_contiguous():  # index_select on rows is much faster than [ix, c]
            flat = target_logits.view(-1, target_logits.shape[-1])
            logits = torch.index_select(flat, 0, ix * (R + 1) + c, out=_workspace.get("w", ix.numel(), flat))
        else:
            logits = target_logits[ix, c]
        w, Z = target_weights(logits, T[ix], cfg.target_filters)  # p_T = w / Z, in place on the copy
        walk = _Walk(w, Z, uniforms.u_sample[ix, d], uniforms.u_det[ix, d])
        kids = tree.children[ix, c]  # [n, K] root-included indices, -1 none
        kid_tok = tok1[ix].gather(1, kids.clamp(min=0))
        kid_kind = kind1[ix].gather(1, kids.clamp(min=0))
        present = kids >= 0
        if rheo:
            sample = present[:, cfg.m] & (kid_kind[:, cfg.m] == SAMPLE)
            s_child = torch.where(sample, kids[:, cfg.m], torch.full_like(c, -1))
            s_node = (s_child - 1).clamp(min=0)
            ids = tree.sample_ids[ix, s_node]
            probs = tree.verify_probs[ix, s_node]
            dense = None if tree.verify_dense is None else tree.verify_dense[ix, s_node]
            y = kid_tok[:, cfg.m]
        if rheo and cfg.verify == "class_law":
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
            y_rank = tree.ranks[ix, s_node]
            y = torch.where(sample & (y_rank <= star_rank), x_star, y)
            at = (kid_tok == y.unsqueeze(1)) & present
            pick = kids.gather(1, at.to(torch.int8).argmax(1, keepdim=True)).squeeze(1)
            s_child = torch.where(sample & at.any(1), pick, torch.full_like(c, -1))
            walk.stochastic(s_child, y, ids, probs, dense)
            for s in range(K):
                walk.det(kids[:, s], kid_tok[:, s], ~sample | (kid_tok[:, s] != y))
        else:
            if stochastic_first:
                walk.stochastic(s_child, y, ids, probs, dense)
            for s in range(K):
                if rheo and s == cfg.m:
                    continue
                walk.det(kids[:, s], kid_tok[:, s], present[:, s])
            if rheo and not stochastic_first:
                walk.stochastic(s_child, y, ids, probs, dense)
        moved = walk.moved
        step_out = walk.token
        fin = (~moved).nonzero().squeeze(1)
        if fin.numel():  # step 5 / step 1: the correction or bonus token ~ w
            w = walk.w if fin.numel() == ix.numel() else torch.index_select(
                walk.w, 0, fin, out=_workspace.get("fin", fin.numel(), walk.w))
            u = uniforms.u_final[ix[fin], d].to(w.dtype) * walk.Z[fin]
            step_out = step_out.index_put((fin,), inverse_cdf(w, u, out=_workspace.get("cum", fin.numel(), w)))
        out[ix, d] = step_out
        if d < D:
            accepted[ix, d] = torch.where(moved, walk.next - 1, accepted[ix, d])
        lengths[ix] += 1
        done[ix[fin]] = True
        cur[ix] = torch.where(moved, walk.next, c)
    return VerifyResult(out, lengths, accepted)
