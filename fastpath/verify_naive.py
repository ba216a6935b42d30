"""RheoVerification (docs/spec.md §4, on the uniforms of §7) written the way EAGLE's
reference code verifies a tree: a Python loop over requests and over visited nodes, a
softmax over the whole vocabulary at each visited node. It must give exactly ``verify``'s
outputs on the same uniforms (tested); it exists as the benchmark's baseline
(``rheo bench fastpath``: ``fast_over_naive_verify``).
"""

from __future__ import annotations

import torch

from rheo.reference.params import Params

from .inputs import expect, expect_params
from .laws import inverse_cdf, target_law
from .pool import SAMPLE
from .tree import DraftTree
from .uniforms import Uniforms
from .verify import VerifyResult


def verify_naive(
    tree: DraftTree, target_logits: torch.Tensor, T: torch.Tensor, params: Params, uniforms: Uniforms
) -> VerifyResult:
    """Same contract as ``verify`` (policies rheo and topk, verifier "rheo" only):
    target_logits [b, R+1, V], T [b], uniforms of §7."""
    expect_params("verify_naive", params)
    b, R = tree.expect_for("verify_naive", params).tokens.shape
    expect("verify_naive", "target_logits", target_logits, "[b, R+1, V]", (b, R + 1, None), "float")
    expect("verify_naive", "T", T, "[b]", (b,), "float")
    uniforms.expect_for("verify_naive", params, b)
    if params.verify != "rheo" or params.draft_law != "sampled":
        raise ValueError("verify_naive implements the rheo verifier with the sampled draft law only")
    D = params.depth
    out = torch.full((b, D + 1), -1, dtype=torch.int64)
    accepted = torch.full((b, D), -1, dtype=torch.int64)
    lengths = torch.zeros(b, dtype=torch.int64)
    for i in range(b):
        node, d = 0, 0
        while True:
            p = target_law(target_logits[i, node].unsqueeze(0), T[i : i + 1], params.target_filters)[0]
            w = p.clone()
            kids = [int(c) for c in tree.children[i, node].tolist()]
            moved: tuple[int, int] | None = None
            j = 0
            for child in kids:
                if child < 0:
                    continue
                tok = int(tree.tokens[i, child - 1])
                if params.policy == "rheo" and int(tree.kinds[i, child - 1]) == SAMPLE:
                    r = torch.zeros_like(w)
                    r.index_add_(0, tree.sample_ids[i, child - 1], tree.sample_probs[i, child - 1].to(w.dtype))
                    a = min(1.0, float(w[tok] / r[tok]))
                    if float(uniforms.u_sample[i, d]) < a:
                        moved = (child, tok)
                        break
                    w = torch.clamp(w - r, min=0)
                    w = w / w.sum()
            if moved is None:
                for child in kids:
                    if child < 0 or (params.policy == "rheo" and int(tree.kinds[i, child - 1]) == SAMPLE):
                        continue
                    tok = int(tree.tokens[i, child - 1])
                    a = float(w[tok])
                    if float(uniforms.u_det[i, d, j]) < a:
                        moved = (child, tok)
                        break
                    j += 1
                    w[tok] = 0
                    w = w / w.sum()
            if moved is None:
                out[i, d] = int(inverse_cdf(w, uniforms.u_final[i, d].to(w.dtype)))
                lengths[i] = d + 1
                break
            node, tok = moved
            out[i, d] = tok
            accepted[i, d] = node - 1
            d += 1
    return VerifyResult(out, lengths, accepted)
