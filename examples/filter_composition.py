"""Top-k and top-p composed two ways (docs/spec.md §0, "Target filters"; docs/adapters.md):
"top_k_first" (top-p reads the law top-k left, renormalised: the spec's order, vLLM's and
transformers') and "joint" (top-p's run measured on the law before top-k, the two kept sets
intersected: FlashInfer's ``filter_apply_order="joint"``, SGLang's sampler). An engine's
verifier must use the composition its plain sampler uses; the adapter says which with
``filter_composition``, and the gate judges it against that law.

    rheo gate --impl examples.filter_composition:JointEngine --only exact            # lossless
    rheo gate --impl examples.filter_composition:JointEngineOldVerifier --only exact # exits 1

``JointEngine`` samples without drafts with the joint composition and verifies with it too:
lossless against the joint law it declares (and lossy against §0's, had it not declared it).
``JointEngineOldVerifier`` is the same engine before its verifier was fixed: the plain sampler
joint, the verifier top-k first. Judged against the §0 default it would pass; against the law
its engine declares, it fails.

Chains (K = 1, policy rheo, m = 0), T > 0, any target filters, no draft top-k:
the standard chain rejection sampler in float64 (``torch.multinomial`` drafts, ``torch.rand``
coins, the residual or the bonus drawn by ``torch.multinomial``).
"""

from __future__ import annotations

import torch


def filtered(logits, temperature: float, config: dict, composition: str) -> torch.Tensor:
    """The tempered law of one row of logits after the config's top-k and top-p composed as
    ``composition`` says (ties: the lower id ranks first), then its min-p."""
    top_k, top_p, min_p = config["target_top_k"], config["target_top_p"], config["target_min_p"]
    p = torch.softmax(torch.as_tensor(logits, dtype=torch.float64) / temperature, dim=-1)
    order = sorted(range(p.shape[-1]), key=lambda t: (-float(p[t]), t))
    k = p.shape[-1] if top_k is None else min(int(top_k), p.shape[-1])
    keep = order[:k]
    if top_p is not None:
        law = p if composition == "joint" else p / p[keep].sum()  # the run's mass: before or after top-k
        run, mass = [], 0.0
        for t in keep:
            run.append(t)
            mass += float(law[t])
            if mass >= top_p:
                break
        keep = run
    mask = torch.zeros_like(p, dtype=torch.bool)
    mask[keep] = True
    out = torch.where(mask, p, torch.zeros_like(p))
    out = out / out.sum()
    if min_p is not None:
        out = torch.where(out >= min_p * out.max(), out, torch.zeros_like(out))
        out = out / out.sum()
    return out


class JointEngine:
    """Lossless against its own (joint) law."""

    follows_uniforms = False
    filter_composition = "joint"  # how the engine samples without drafts
    verifier_composition = "joint"  # how its verifier filters the target

    def supports(self, config: dict) -> bool:
        chain = config["K"] == 1 and config["policy"] == "rheo" and config["m"] == 0
        return chain and config["draft_top_k"] is None and config["temperature"] > 0

    def cycle(self, draft_logits, target_logits, config: dict, temperature: float) -> list[int]:
        length = int(min(config["depth"], config["budget"]))
        drafts: list[int] = []
        qs = []
        for _ in range(length):
            q = torch.softmax(torch.as_tensor(draft_logits([tuple(drafts)])[0], dtype=torch.float64) / temperature, -1)
            drafts.append(int(torch.multinomial(q, 1)))
            qs.append(q)
        rows = target_logits([tuple(drafts[:i]) for i in range(length + 1)])
        ps = [filtered(row, temperature, config, self.verifier_composition) for row in rows]
        coins = torch.rand(length, dtype=torch.float64)
        final = ps[length]
        tokens: list[int] = []
        for i, x in enumerate(drafts):
            if float(coins[i]) * float(qs[i][x]) <= float(ps[i][x]):
                tokens.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)
            final = residual / residual.sum()
            break
        return tokens + [int(torch.multinomial(final, 1))]


class JointEngineOldVerifier(JointEngine):
    """The plain sampler joint, the verifier top-k first: the bug a 2026 engine fixed."""

    verifier_composition = "top_k_first"
