"""The full-vocabulary draft side, the benchmark's baseline for sparse ``draft_top_k``.

``expand_dense`` builds the same pools as ``expand`` with ``draft_top_k = None`` but the
way one would without truncation: the ranking needs only a top-K selection, and the draw of
Y is a correct draw from the whole residual law over all V tokens, by a Gumbel-max
(``method="gumbel"``) or ``torch.multinomial`` (``method="multinomial"``). Its randomness is
torch's, not SPEC 7's uniforms, so it equals ``expand`` in law, not draw by draw (at T = 0
there is nothing to draw and the trees are identical: tested). It does not build the
sample nodes' sparse residual laws (the verifier would need dense ones): the comparison is
tilted in the baseline's favour.
"""
from __future__ import annotations

import torch

from .config import FastConfig
from .laws import ranked_topk
from .tree import FILL, LEAD, SAMPLE, _Pool


def expand_dense(logits, valid, u, T, cfg: FastConfig, method: str = "gumbel", generator=None) -> _Pool:
    """Pools of the expanded nodes from the untruncated draft law; same arguments as
    ``expand`` (``u`` is unused: the draw is torch's)."""
    if cfg.policy != "rheo":
        raise ValueError("expand_dense is the rheo baseline")
    K, m = cfg.K, cfg.m
    dev = logits.device
    q = torch.softmax(logits, -1)  # untempered, whole vocabulary
    vals, ids = ranked_topk(logits, K)
    qk = q.gather(-1, ids)
    shape = ids.shape[:-1]
    masked = logits.scatter(-1, ids[..., :m], float("-inf"))  # residual support: all but the leads
    Tb = T.to(logits.dtype).reshape(T.shape + (1,) * (logits.dim() - 1))
    zero = Tb == 0
    scaled = masked / torch.where(zero, torch.ones_like(Tb), Tb)
    if method == "gumbel":
        g = -torch.log(-torch.log(torch.rand(logits.shape, generator=generator, device=dev, dtype=logits.dtype)
                                  .clamp_(min=1e-20)))
        y = torch.where(zero.squeeze(-1), masked.argmax(-1), (scaled + g).argmax(-1))
    else:
        probs = torch.softmax(scaled, -1).reshape(-1, logits.shape[-1])
        y = torch.multinomial(probs, 1, generator=generator).reshape(shape)
        y = torch.where(zero.squeeze(-1), masked.argmax(-1), y)
    # Y's rank among the top K (K if it ranks lower): fills are the first K-m-1 of U \\ {Y}
    hit = ids[..., m:] == y.unsqueeze(-1)
    j = torch.where(hit.any(-1), hit.to(torch.int8).argmax(-1), torch.full_like(y, K))
    f = torch.arange(K - m - 1, device=dev)
    fill_ranks = m + f + (f >= j.unsqueeze(-1)).to(f.dtype)
    lead_ranks = torch.arange(m, device=dev).expand(shape + (m,))
    y_rank = (m + j).clamp(max=K - 1)
    ranks = torch.cat([lead_ranks, y_rank.unsqueeze(-1), fill_ranks], -1)
    tokens = ids.gather(-1, ranks)
    tokens[..., m] = y
    q_y = q.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    ok_rank = (qk > 0) & valid.unsqueeze(-1)
    has_u = ok_rank[..., m] if m < K else torch.zeros_like(valid)
    slot_ok = torch.cat([ok_rank[..., :m], has_u.unsqueeze(-1), ok_rank.gather(-1, fill_ranks) & has_u.unsqueeze(-1)], -1)
    factors = qk.gather(-1, ranks)
    if m >= 1:
        proxy = torch.minimum(qk[..., m - 1], 1 - torch.cumsum(qk[..., :m], -1)[..., -1])
    else:
        proxy = torch.clamp(qk[..., 0] + cfg.epsilon, max=1.0)
    factors[..., m] = proxy if cfg.proxy == "rheo" else q_y
    kinds = torch.tensor([LEAD] * m + [SAMPLE] + [FILL] * (K - m - 1), dtype=torch.int8, device=dev).expand(shape + (K,))
    zero_law = torch.zeros_like(qk)
    return _Pool(tokens, kinds, ranks, factors, slot_ok, ids, zero_law, zero_law, None)
