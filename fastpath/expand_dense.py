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
from .tree import _Pool, rheo_slots, sample_proxy


def expand_dense(logits, valid, u, T, cfg: FastConfig, method: str = "gumbel", generator=None) -> _Pool:
    """Pools of the expanded nodes from the untruncated draft law; same arguments as
    ``expand`` (``u`` is unused: the draw is torch's)."""
    if cfg.policy != "rheo":
        raise ValueError("expand_dense is the rheo baseline")
    K, m = cfg.K, cfg.m
    dev = logits.device
    q = torch.softmax(logits, -1)  # untempered, whole vocabulary
    _, ids = ranked_topk(logits, K)  # the ranking needs only the top K
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
    # Y's index in U among the top K (K - m when it ranks lower; its slot then holds Y itself)
    hit = ids[..., m:] == y.unsqueeze(-1)
    j = torch.where(hit.any(-1), hit.to(torch.int8).argmax(-1), torch.full_like(y, K - m))
    ranks, kinds, slot_ok = rheo_slots((qk > 0) & valid.unsqueeze(-1), j, cfg)
    tokens = ids.gather(-1, ranks)
    tokens[..., m] = y
    factors = qk.gather(-1, ranks)
    factors[..., m] = sample_proxy(qk, cfg, q.gather(-1, y.unsqueeze(-1)).squeeze(-1))
    zero_law = torch.zeros_like(qk)
    return _Pool(tokens, kinds, ranks, factors, slot_ok, ids, zero_law, zero_law, None)
