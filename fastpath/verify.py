"""Batched RheoVerification, stochastic-first (docs/spec.md §4), and point-mass Top-K.

Must equal ``rheo.reference.verify.walk`` decision by decision on the same uniforms (§7).
The walk visits at most one node per depth, so the loop runs over depths and over the K
slots of the visited node, never over requests; the target law is computed only at the
visited node of each request (one [b, V] softmax per depth). At the visited node v, for the
requests still walking:

- step 2: w := p_v = p_T(. | v) (``_target_weights``);
- step 3: the stochastic step on the sample child y (law r): accept with min(1, w(y) / r(y)),
  else w := (w - r)^+ renormalized (``Walk.stochastic``);
- step 4: the point-mass steps on the lead and fill children in slot order: accept x with
  w(x), else w(x) := 0 and renormalize (``Walk.det``);
- steps 1 and 5: no child, or every child rejected: the bonus / correction token ~ w
  (``_final_token``).

Policy "topk" has no step 3. The wrong-on-purpose verifiers (``sample_last``,
``class_law``, the dense draft law) replace steps 3-4 through one hook,
``variants.verify_steps``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rheo.reference.params import Params

from . import variants
from .inputs import expect, expect_params
from .laws import inverse_cdf, target_weights
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
    tree: DraftTree, target_logits: torch.Tensor | TargetFn, T: torch.Tensor, params: Params, uniforms: Uniforms
) -> VerifyResult:
    """Verify T_R for every request (docs/spec.md §4).

    target_logits: [b, R+1, V] target logits at the root (index 0) and at every draft node
    (index i + 1 for node i), or a callable ``(rows [n], nodes [n]) -> [n, V]`` that
    answers only the visited nodes with a fresh tensor (it is used in place);
    T: [b] temperatures; uniforms: §7 (u_sample, u_det, u_final).
    Policy "topk" verifies point-mass (no stochastic step).
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
