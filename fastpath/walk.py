"""The verification walk at one depth, batched: docs/spec.md §4 steps 2-4 at the visited nodes.

``Walk`` holds the working target law w of §4 step 2 for the n requests still deciding at
this depth and takes the steps on it: the stochastic step on the sample child (step 3) and
the deterministic steps on leads and fills (step 4), each on its named uniform (§7). w is
kept unnormalized together with its mass Z (the reference renormalizes after every step;
the two agree up to rounding), so a rejection touches only the rejected token (step 4) or
r's k entries (step 3). ``Children`` is what a step needs to know about the visited nodes'
surviving children. ``rheo.fastpath.verify`` walks depth by depth; the wrong-on-purpose
verifiers in ``rheo.fastpath.variants`` take the same steps in another order or on another
law.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class SampleChild:
    """The visited nodes' sample child (policy "rheo": slot m) and the law its step checks."""

    survived: torch.Tensor  # [n] bool: the sample child survived pruning
    index: torch.Tensor  # [n] its root-included tree index (node i at i + 1), -1 where it did not survive
    token: torch.Tensor  # [n] Y
    rank: torch.Tensor  # [n] Y's rank in the visited node's draft law
    ids: torch.Tensor  # [n, W] r's support in rank order
    probs: torch.Tensor  # [n, W] r as the stochastic step checks it (``DraftTree.verify_probs``)
    dense: torch.Tensor | None  # [n, V] ``draft_law: "dense"`` only (``DraftTree.verify_dense``)


@dataclass
class Children:
    """The surviving children of the n visited nodes, by slot (docs/spec.md §2: slots 0..m-1
    leads, m the sample, m+1..K-1 fills under policy "rheo"; all leads under "topk")."""

    index: torch.Tensor  # [n, K] root-included tree indices, -1: no surviving child in that slot
    tokens: torch.Tensor  # [n, K]
    present: torch.Tensor  # [n, K] bool
    sample: SampleChild | None  # None under policy "topk"


class Walk:
    """The walk at one depth for the n requests still deciding there (docs/spec.md §4)."""

    def __init__(self, w: torch.Tensor, Z: torch.Tensor, u_sample: torch.Tensor, u_det: torch.Tensor) -> None:
        """w: [n, V] p_v unnormalized (step 2: w := p_v), used in place; Z: [n] its mass;
        u_sample: [n] the stochastic coins; u_det: [n, K] the deterministic coins (§7)."""
        self.w = w
        self.Z = Z
        n = w.shape[0]
        self.moved = torch.zeros(n, dtype=torch.bool, device=w.device)  # [n] a child was accepted
        self.next = torch.full((n,), -1, dtype=torch.int64, device=w.device)  # [n] the accepted child
        self.token = torch.full((n,), -1, dtype=torch.int64, device=w.device)  # [n] its token
        self.j = torch.zeros(n, dtype=torch.int64, device=w.device)  # [n] deterministic coins used so far
        self.u_sample, self.u_det = u_sample, u_det

    def active(self, child: torch.Tensor) -> torch.Tensor:
        """The requests that still decide and have a child [n] (index, -1: none) to try."""
        return ~self.moved & (child >= 0)

    def coin(
        self, act: torch.Tensor, a: torch.Tensor, u: torch.Tensor, child: torch.Tensor, token: torch.Tensor
    ) -> torch.Tensor:
        """Accept where ``act`` and u < a (§7 coins): move to ``child`` emitting ``token``.
        All [n]. Returns the requests that took the step and rejected."""
        acc = act & (u < a)
        self.moved |= acc
        self.next = torch.where(acc, child, self.next)
        self.token = torch.where(acc, token, self.token)
        return act & ~acc

    def fix_mass(self) -> None:
        bad = ~(self.Z > 0)
        if bool(bad.any()):  # rounding ate the remaining mass: recompute it from w
            self.Z = torch.where(bad, self.w.sum(-1), self.Z)

    def stochastic_coin(
        self, act: torch.Tensor, child: torch.Tensor, token: torch.Tensor, ry: torch.Tensor
    ) -> torch.Tensor:
        """Step 3's coin: accept y = ``token`` with min(1, w(y) / r(y)) (0 where r(y) = 0) on
        ``u_sample``. act, child, token, ry = r(y): [n]. Returns the rejected requests."""
        wy = self.w.gather(1, token.clamp(min=0).unsqueeze(1)).squeeze(1) / self.Z
        safe = torch.where(ry > 0, ry, torch.ones_like(ry))
        a = torch.where(ry > 0, torch.clamp(wy / safe, max=1.0), torch.zeros_like(ry))
        return self.coin(act, a, self.u_sample.to(a.dtype), child, token)

    def stochastic(self, child: torch.Tensor, token: torch.Tensor, ids: torch.Tensor, probs: torch.Tensor) -> None:
        """Step 3 on the sample child [n] (index, -1: no step) holding token [n], with r
        sparse: ids, probs [n, W]. On rejection w := (w - r)^+ (renormalized through Z)."""
        act = self.active(child)
        if not bool(act.any()):
            return
        tok = token.clamp(min=0).unsqueeze(1)
        rej = self.stochastic_coin(act, child, token, (probs * (ids == tok)).sum(1))
        # w <- (w - r Z)^+ on r's support (padding entries have r = 0: no change)
        w_ids = self.w.gather(1, ids)
        delta = torch.where(
            rej.unsqueeze(1), -torch.minimum(w_ids, probs * self.Z.unsqueeze(1)), torch.zeros_like(w_ids)
        )
        self.w.scatter_add_(1, ids, delta)  # w - min(w, rZ) >= 0 exactly
        self.Z = self.Z + delta.sum(1)
        self.fix_mass()

    def det(self, child: torch.Tensor, token: torch.Tensor, include: torch.Tensor) -> None:
        """Step 4 on the child [n] holding token [n] where ``include`` [n]: accept x with
        w(x) on the next ``u_det`` coin; on rejection w(x) := 0 (renormalized through Z)."""
        act = self.active(child) & include
        if not bool(act.any()):
            return
        tok = token.clamp(min=0).unsqueeze(1)
        wx = self.w.gather(1, tok).squeeze(1)
        a = wx / self.Z
        u = self.u_det.gather(1, self.j.clamp(max=self.u_det.shape[1] - 1).unsqueeze(1)).squeeze(1)
        self.j = self.j + act.to(torch.int64)
        rej = self.coin(act, a, u.to(a.dtype), child, token)
        self.w.scatter_(1, tok, torch.where(rej, torch.zeros_like(wx), wx).unsqueeze(1))
        self.Z = torch.where(rej, self.Z - wx, self.Z)
        self.fix_mass()
