"""Planted bugs that calibrate the statistical checks (docs/spec.md §2-§4, §7): each is a
fastpath configuration or a tampering with the uniforms that is NOT lossless, so a cycle-law
check at the gate's sample size must fire on it (``rheo gate``'s calibration check and
tests/test_fastpath_statistical.py use them).

``PLANTED_SAMPLING_BUGS``: the planted engine defects of sampling parameters under
speculation (docs/spec.md §9), ``--impl`` classes of ``examples/sampling_params.py`` that
exact certification must report "not lossless (exact)" (tests/test_sampling_bugs.py).
"""

from __future__ import annotations

from collections.abc import Callable

from rheo.fastpath import FastConfig, Uniforms
from rheo.reference.params import Params, Proxy


def reuse_sample_uniform(u: Uniforms) -> None:
    """Planted bug: the first deterministic coin reuses the stochastic coin's uniform."""
    u.u_det[:, :, 0] = u.u_sample


PLANTED_BASE = (5, FastConfig(K=3, depth=2, budget=6, m=1, beam=2, draft_top_k=None), 0.6)
PLANTED_BUGS = ("constant_proxy_below_bound", "sample_last", "untempered_draft_law", "uniform_reused")
PLANTED_SAMPLING_BUGS = {  # examples.sampling_params class -> its defect (docs/spec.md §9)
    "StalePenaltyState": "the penalty state of the cycle's start reused at every position",
    "ProcessedOnlyAtTheEnd": "the parameters applied to the bonus and correction token, not to the verified positions",
    "DraftSideLogitBias": "the logit bias applied to the draft and the bonus token, not to the verified positions",
    "BadWordsOnAcceptedPrefix": "bad words matched on the accepted prefix, not from a draft position",
    "MinTokensAtTheRootOnly": "min_tokens ignored at drafted positions",
}


def planted(kind: str) -> tuple[Params, Callable[[Uniforms], None] | None]:
    """(buggy config, tamper) of a planted bug on ``PLANTED_BASE``: a constant proxy below
    the bound, sample_last, an untempered draft law, or one uniform reused."""
    _, cfg, _ = PLANTED_BASE
    if kind == "constant_proxy_below_bound":
        return cfg.replace(proxy=Proxy("constant", value=0.02)), None
    if kind == "sample_last":
        return cfg.replace(verify="sample_last"), None
    if kind == "untempered_draft_law":
        return cfg.replace(draft_law="untempered"), None
    if kind == "uniform_reused":
        return cfg, reuse_sample_uniform
    raise KeyError(kind)
