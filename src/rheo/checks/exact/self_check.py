"""The reference's target law checked against a second, independent one (docs/spec.md §0 and
§9): the reference's own p_T is what its certificates compare the cycle law with, so a bug
in it (a filter renormalised at the wrong step, a tie kept on the wrong side) would make a
lossy law look lossless. ``independent_law`` is written from the spec's text alone, plainly
and with other means than ``rheo.reference.numbers`` (a sort per filter, numpy for the
sampling parameters), so that the same mistake is unlikely in both.

``self_check(inst)`` compares the two at every prefix whose target law the reference
computed (``Instance.target_prefixes``: after ``certify``, the prefixes the certification
visited): exactly in exact arithmetic, within ``FLOAT_TOLERANCE`` in float64, where a filter
decision within ``BOUNDARY`` of its threshold is set aside (float rounding may decide it
either way). A difference is our bug, not the user's: ``rheo exact`` and the gate's exact
matrix report it as "reference self-check failed".

>>> from rheo.casefile import load_case
>>> inst = load_case({"vocab_size": 4, "target": {"*": ["2/5", "3/10", "1/5", "1/10"]},
...                   "draft": {"*": ["1/4"] * 4}, "policy": "topk", "K": 1, "depth": 1, "budget": 1,
...                   "target_top_k": 3, "target_top_p": "3/4"})
>>> independent_law(inst, ())[0]
(Fraction(4, 7), Fraction(3, 7), Fraction(0, 1), Fraction(0, 1))
>>> self_check(inst).passed, self_check(inst).prefixes  # no prefix visited yet: the root only
(True, 1)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from rheo.reference.instance import Instance
from rheo.reference.params import Prefix

FLOAT_TOLERANCE = 1e-9  # float64: largest |reference - independent| per token
BOUNDARY = 1e-12  # float64: a filter decision this close to its threshold may round either way


@dataclass
class SelfCheck:
    """The outcome of ``self_check``: passed, the prefixes compared, the largest difference,
    and where the first difference was (prefix, both laws); ``undecided``: prefixes set
    aside because a float filter decision was within ``BOUNDARY`` of its threshold."""

    passed: bool
    prefixes: int
    max_difference: float = 0.0
    prefix: Prefix | None = None
    reference: list[Any] = field(default_factory=list)
    independent: list[Any] = field(default_factory=list)
    undecided: int = 0

    def detail(self) -> str:
        if self.passed:
            return f"the reference's target law equals an independent one at {self.prefixes} prefixes"
        where = ",".join(map(str, self.prefix or ()))
        return (
            f"reference self-check failed: at prefix [{where}] the reference's target law is "
            f"{_show(self.reference)}, an independent implementation of docs/spec.md §0/§9 gives "
            f"{_show(self.independent)} (largest difference {self.max_difference:.3g}). This is a bug in rheo, not "
            "in your case: please report it with this case file"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "passed": self.passed,
            "prefixes": self.prefixes,
            "max_difference": self.max_difference,
            "undecided": self.undecided,
        }
        if not self.passed:
            out["prefix"] = list(self.prefix or ())
            out["reference"], out["independent"] = _json(self.reference), _json(self.independent)
        return out


def _json(law: Sequence[Any]) -> list[Any]:
    return [str(x) if isinstance(x, Fraction) else float(x) for x in law]


def _show(law: Sequence[Any], most: int = 8) -> str:
    items = [str(x) if isinstance(x, Fraction) else f"{float(x):.6g}" for x in law[:most]]
    return "(" + ", ".join(items) + (", ..." if len(law) > most else "") + ")"


def independent_law(inst: Instance, prefix: Prefix) -> tuple[tuple[Any, ...], bool]:
    """(p_T at ``prefix`` by the spec's text, decided): the sampling parameters (§9) on the
    raw logits, then temperature, then top-k, top-p and min-p, each renormalised (§0).
    ``decided`` is False when a float filter decision lay within ``BOUNDARY`` of its
    threshold."""
    c = inst.config
    exact = c.exact
    if c.sampling is not None:
        probs: list[Any] = list(_processed_probs(inst, prefix))
    else:
        probs = list(inst.target(prefix))
    n = len(probs)
    T = c.temperature
    if T.zero:
        best = max(probs)
        first = probs.index(best)  # the lowest id among the largest
        one, zero = (Fraction(1), Fraction(0)) if exact else (1.0, 0.0)
        probs = [one if i == first else zero for i in range(n)]
    elif T.power is not None:
        probs = _renorm([x**T.power for x in probs])
    else:
        probs = _renorm([float(x) ** (1.0 / T.value) if x > 0 else 0.0 for x in probs])
    decided = True
    f = c.target_filters
    if f.top_k is not None:
        order = sorted(range(n), key=lambda i: (-probs[i], i))
        keep = set(order[: f.top_k])
        if not exact and 0 < f.top_k < n and abs(probs[order[f.top_k - 1]] - probs[order[f.top_k]]) < BOUNDARY:
            decided = decided and probs[order[f.top_k]] == 0
        probs = _renorm([x if i in keep else x * 0 for i, x in enumerate(probs)])
    if f.top_p is not None:
        order = sorted((i for i in range(n) if probs[i] > 0), key=lambda i: (-probs[i], i))
        keep, mass = set(), probs[0] * 0
        for i in order:
            keep.add(i)
            mass += probs[i]
            if not exact and abs(mass - f.top_p) < BOUNDARY:
                decided = False
            if mass >= f.top_p:
                break
        probs = _renorm([x if i in keep else x * 0 for i, x in enumerate(probs)])
    if f.min_p is not None:
        cut = f.min_p * max(probs)
        if not exact and any(x > 0 and abs(x - cut) < BOUNDARY for x in probs):
            decided = False
        probs = _renorm([x if x >= cut else x * 0 for x in probs])
    return tuple(probs), decided


def _renorm(v: list[Any]) -> list[Any]:
    total = sum(v[1:], v[0])
    return [x / total for x in v]


def _processed_probs(inst: Instance, prefix: Prefix) -> np.ndarray:
    """softmax of the raw logits after docs/spec.md §9's steps 1-7, in numpy."""
    s = inst.config.sampling
    assert s is not None
    logits = np.array(inst.raw_target_logits(prefix), dtype=np.float64)
    V = logits.shape[0]
    h = list(s.prompt) + list(s.generated) + list(prefix)
    out_tokens = list(s.generated) + list(prefix)
    ban = np.zeros(V, dtype=bool)
    if s.allowed_token_ids is not None:
        ban |= ~np.isin(np.arange(V), list(s.allowed_token_ids))
    scope = h if s.bad_words_scope == "prompt_and_generated" else out_tokens
    for word in s.bad_words:
        *head, last = word
        if not head or (len(scope) >= len(head) and scope[len(scope) - len(head) :] == head):
            ban[last] = True
    N = s.no_repeat_ngram_size
    if N is not None:
        grams = {tuple(h[i : i + N]) for i in range(len(h) - N + 1)}
        recent = tuple(h[len(h) - N + 1 :]) if N > 1 else ()
        for g in grams:
            if g[:-1] == recent:
                ban[g[-1]] = True
    if len(out_tokens) < s.min_tokens:
        ban[list(s.eos_token_id)] = True
    logits[ban] = -np.inf
    for tok, b in s.logit_bias:
        logits[tok] += b
    for seq, b in s.sequence_bias:
        *head, last = seq
        if not head or (len(h) >= len(head) and h[len(h) - len(head) :] == head):
            logits[last] += b
    if s.repetition_penalty is not None:
        seen = np.unique(np.array(h, dtype=np.int64))
        x = logits[seen]
        r = s.repetition_penalty
        logits[seen] = x / r if s.repetition_penalty_form == "divide" else np.where(x > 0, x / r, x * r)
    counts = np.bincount(np.array(out_tokens, dtype=np.int64), minlength=V).astype(np.float64)
    logits -= (s.frequency_penalty or 0.0) * counts + (s.presence_penalty or 0.0) * (counts > 0)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def self_check(inst: Instance) -> SelfCheck:
    """The reference's target law against ``independent_law`` at every prefix it computed
    (at least the root)."""
    prefixes = inst.target_prefixes() or [()]
    worst = 0.0
    undecided = 0
    for prefix in prefixes:
        ref = inst.target_law(prefix)
        ind, decided = independent_law(inst, prefix)
        if inst.exact:
            differs = tuple(ref) != tuple(ind)
            gap = max(abs(float(a) - float(b)) for a, b in zip(ref, ind)) if differs else 0.0
        else:
            gap = max(abs(float(a) - float(b)) for a, b in zip(ref, ind))
            differs = not gap <= FLOAT_TOLERANCE or math.isnan(gap)
            if differs and not decided:
                undecided += 1
                continue
        if differs:
            return SelfCheck(False, len(prefixes), max(gap, worst), prefix, list(ref), list(ind), undecided)
        worst = max(worst, gap)
    return SelfCheck(True, len(prefixes), worst, undecided=undecided)
