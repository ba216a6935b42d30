"""RheoVerification written the way EAGLE's reference code verifies a tree: a Python loop
over requests and over visited nodes, a softmax over the whole vocabulary at each visited
node. It must give exactly ``verify``'s outputs on the same uniforms (tested); it exists as
the benchmark's baseline (``rheo bench fastpath``: ``fast_over_naive_verify``).
"""
from __future__ import annotations

import torch

from .config import FastConfig
from .laws import inverse_cdf, target_law
from .tree import SAMPLE, DraftTree
from .uniforms import Uniforms
from .verify import VerifyResult


def verify_naive(tree: DraftTree, target_logits: torch.Tensor, T: torch.Tensor, cfg: FastConfig,
                 uniforms: Uniforms) -> VerifyResult:
    """Same contract as ``verify`` (policies rheo and topk, verifier "rheo" only)."""
    if cfg.verify != "rheo" or cfg.draft_law != "sampled":
        raise ValueError("verify_naive implements the rheo verifier with the sampled draft law only")
    b = tree.tokens.shape[0]
    D = cfg.depth
    out = torch.full((b, D + 1), -1, dtype=torch.int64)
    accepted = torch.full((b, D), -1, dtype=torch.int64)
    lengths = torch.zeros(b, dtype=torch.int64)
    for i in range(b):
        node, d = 0, 0
        while True:
            p = target_law(target_logits[i, node].unsqueeze(0), T[i:i + 1], cfg.target_filters)[0]
            w = p.clone()
            kids = [int(c) for c in tree.children[i, node].tolist()]
            moved = None
            j = 0
            for s, child in enumerate(kids):
                if child < 0:
                    continue
                tok = int(tree.tokens[i, child - 1])
                if cfg.policy == "rheo" and int(tree.kinds[i, child - 1]) == SAMPLE:
                    r = torch.zeros_like(w)
                    r.index_add_(0, tree.sample_ids[i, child - 1], tree.sample_probs[i, child - 1].to(w.dtype))
                    a = min(1.0, float(w[tok] / r[tok]))
                    if float(uniforms.u_sample[i, d]) < a:
                        moved = (child, tok)
                        break
                    w = torch.clamp(w - r, min=0)
                    w = w / w.sum()
            if moved is None:
                for s, child in enumerate(kids):
                    if child < 0 or (cfg.policy == "rheo" and int(tree.kinds[i, child - 1]) == SAMPLE):
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
