"""The full-vocabulary draft side (docs/spec.md §1-§2 without truncation), the benchmark's
baseline for sparse ``draft_top_k``.

``expand_dense`` builds the same pools as ``rheo.fastpath.pool.expand`` with
``draft_top_k = None`` but the way one would without truncation: the ranking needs only a
top-K selection, and the draw of Y is a correct draw from the whole residual law over all V
tokens, by a Gumbel-max (``method="gumbel"``) or ``torch.multinomial``
(``method="multinomial"``). Its randomness is torch's, not the uniforms of §7, so it equals
``expand`` in law, not draw by draw (at T = 0 there is nothing to draw and the trees are
identical: tested). It does not build the sample nodes' sparse residual laws (the verifier
would need dense ones): the comparison is tilted in the baseline's favour. ``static=True``
ranks without a host sync (``ranked_topk(static=True)``), so ``build_tree(static=True)``
with this expansion can be captured as a CUDA graph (the Gumbel draw reads torch's default
generator, which a capture supports; not ``torch.multinomial``, nor a ``generator``).
"""

from __future__ import annotations

from typing import Literal

import torch

from rheo.reference.params import Params

from . import variants
from .inputs import expect, expect_params
from .laws import ranked_topk
from .pool import Pool, rheo_proxy, rheo_slots


def expand_dense(
    logits: torch.Tensor,
    valid: torch.Tensor,
    u: torch.Tensor,
    T: torch.Tensor,
    params: Params,
    method: Literal["gumbel", "multinomial"] = "gumbel",
    generator: torch.Generator | None = None,
    static: bool = False,
) -> Pool:
    """Pools of the expanded nodes from the untruncated draft law; same arguments as
    ``expand`` (logits: [b, n, V]; valid: [b, n]; u: [b, n], unused: the draw is torch's;
    T: [b]; ``static``: no host sync, module docstring)."""
    b, n, _ = expect("expand_dense", "logits", logits, "[b, n, V]", (None, None, None), "float").shape
    expect("expand_dense", "valid", valid, "[b, n]", (b, n), "bool")
    expect("expand_dense", "u", u, "[b, n]", (b, n), "float")
    expect("expand_dense", "T", T, "[b]", (b,), "float")
    expect_params("expand_dense", params)
    if params.policy != "rheo" or params.m is None:
        raise ValueError("expand_dense is the rheo baseline")
    if method not in ("gumbel", "multinomial"):
        raise ValueError(f'expand_dense: method must be "gumbel" or "multinomial", got {method!r}')
    K, m = params.K, params.m
    dev = logits.device
    q = torch.softmax(logits, -1)  # untempered, whole vocabulary
    _, ids = ranked_topk(logits, K, static=static)  # the ranking needs only the top K
    qk = q.gather(-1, ids)
    shape = ids.shape[:-1]
    masked = logits.scatter(-1, ids[..., :m], float("-inf"))  # residual support: all but the leads
    Tb = T.to(logits.dtype).reshape(T.shape + (1,) * (logits.dim() - 1))
    zero = Tb == 0
    scaled = masked / torch.where(zero, torch.ones_like(Tb), Tb)
    if method == "gumbel":
        g = -torch.log(
            -torch.log(torch.rand(logits.shape, generator=generator, device=dev, dtype=logits.dtype).clamp_(min=1e-20))
        )
        y = torch.where(zero.squeeze(-1), masked.argmax(-1), (scaled + g).argmax(-1))
    else:
        probs = torch.softmax(scaled, -1).reshape(-1, logits.shape[-1])
        y = torch.multinomial(probs, 1, generator=generator).reshape(shape)
        y = torch.where(zero.squeeze(-1), masked.argmax(-1), y)
    # Y's index in U among the top K (K - m when it ranks lower; its slot then holds Y itself)
    hit = ids[..., m:] == y.unsqueeze(-1)
    j = torch.where(hit.any(-1), hit.to(torch.int8).argmax(-1), torch.full_like(y, K - m))
    ranks, kinds, slot_ok = rheo_slots((qk > 0) & valid.unsqueeze(-1), j, params)
    tokens = ids.gather(-1, ranks)
    tokens[..., m] = y
    factors = qk.gather(-1, ranks)
    if params.proxy.kind == "rheo":
        factors[..., m] = rheo_proxy(qk, params)
    else:  # a wrong-on-purpose proxy
        factors[..., m] = variants.proxy(qk, q.gather(-1, y.unsqueeze(-1)).squeeze(-1), params)
    zero_law = torch.zeros_like(qk)
    return Pool(tokens, kinds, ranks, factors, slot_ok, ids, zero_law, zero_law, None)
