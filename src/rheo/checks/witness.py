"""A certificate's witness replayed on its own: the output law recomputed from what the exact
enumeration recorded (each leaf's cells, choices, race weights and orders), and the verdict
recomputed from that law by brute force over every sequence. Nothing here uses the
enumerator (``rheo.checks.exact``): a second, small computation that must agree with the
first (docs/gate.md, "The witness").

A witness (``Certificate.witness``, format "rheo-witness/1") is ``{"cycle": [leaf, ...]}``
(whole cycles), ``{"generation": [leaf, ...], "n_tokens": n}`` (whole generations, judged on
V^n without continuation) or ``{"trees": [{"leaves": [steps, ...], "walk": [leaf, ...]},
...]}`` (a tree's probability is the sum over its leaves, each walk leaf's is conditional on
the tree); a leaf is ``{"steps": [step, ...], "output": [token, ...]}``
and its probability is the product of its steps':

- ``uniform``: a grid cell [a, c) of a uniform on k / 2^grid_bits: (c - a) / 2^grid_bits;
- ``interval``: a cell [lo, hi) of a continuous uniform: hi - lo;
- ``choice``: weights (the options with weight) and the option taken: w[option] / sum(w);
- ``categorical``: weights and the options of the part: their weight over the total;
- ``race``: weights and the order prefixes of the part: their Plackett-Luce probabilities
  (ordered draws without replacement, each w_j over the weight not drawn yet);
- ``given``: a probability the reference engine computed (its own tree builder or verifier).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rheo.checks.protocol.inputs import law_instance
from rheo.reference.certify import max_deviation

FORMAT = "rheo-witness/1"
BRUTE_FORCE = 200_000  # sequences compared one by one at most; past that the reference's search decides


class WitnessError(ValueError):
    """A witness that cannot be replayed: a field missing or malformed, named."""


def plackett_luce(weights: Sequence[float], order: Sequence[int]) -> float:
    """P(the race's first places are ``order``), drawing without replacement."""
    left, p = math.fsum(weights), 1.0
    for j in order:
        p *= weights[j] / left
        left -= weights[j]
    return p


def step_probability(step: dict) -> float:
    kind = step.get("kind")
    if kind == "uniform":
        a, c = step["cell"]
        return (c - a) / 2.0 ** step["grid_bits"]
    if kind == "interval":
        lo, hi = step["cell"]
        return float(hi - lo)
    if kind == "choice":
        w = step["weights"]
        return w[step["option"]] / math.fsum(w)
    if kind == "categorical":
        w = step["weights"]
        return math.fsum(w[o] for o in step["options"]) / math.fsum(x for x in w if x > 0)
    if kind == "race":
        return math.fsum(plackett_luce(step["weights"], o) for o in step["orders"])
    if kind == "given":
        return float(step["probability"])
    raise WitnessError(f"witness step kind {kind!r}: expected uniform, interval, choice, categorical, race or given")


def _leaf_probability(steps: list[dict]) -> float:
    p = 1.0
    for step in steps:
        p *= step_probability(step)
    return p


def law_of(witness: dict) -> dict[tuple[int, ...], float]:
    """The output law the witness describes."""
    if not isinstance(witness, dict) or witness.get("format") != FORMAT:
        raise WitnessError(f"witness: expected a dict with format {FORMAT!r}")
    law: dict[tuple[int, ...], float] = defaultdict(float)
    for key in ("cycle", "generation"):
        for leaf in witness.get(key, ()):
            law[tuple(leaf["output"])] += _leaf_probability(leaf["steps"])
    if "cycle" in witness or "generation" in witness:
        return dict(law)
    if "trees" not in witness:
        raise WitnessError("witness: needs 'cycle', 'generation' or 'trees'")
    for tree in witness["trees"]:
        weight = math.fsum(_leaf_probability(steps) for steps in tree["leaves"])
        for leaf in tree["walk"]:
            law[tuple(leaf["output"])] += weight * _leaf_probability(leaf["steps"])
    return dict(law)


@dataclass
class Replayed:
    """What the replay found: the law, its largest deviation from the target and where, the
    verdict at the certificate's tolerance, and whether all of it agrees with the certificate."""

    law: dict[tuple[int, ...], float]
    deviation: float
    sequence: list[int]
    verdict: str
    agrees: bool
    how: str  # "brute force over V^L sequences" or the reference's search


def _deviation(
    target: Any, n: int, L: int, law: dict[tuple[int, ...], float], whole: bool = False
) -> tuple[float, list[int], str]:
    """max over s in V^L of |sum_k law(s[:k]) p_T(s[k:] | s[:k]) - p_T(s)|, one sequence at a
    time (``whole``: every output has length L, and the sum is law(s) alone)."""
    cond: dict[tuple[int, ...], list[float]] = {}

    def p(prefix: tuple[int, ...]) -> list[float]:
        if prefix not in cond:
            cond[prefix] = [float(x) for x in target(prefix)]
        return cond[prefix]

    best, where = -1.0, []
    for s in itertools.product(range(n), repeat=L):
        rest = [1.0] * (L + 1)  # rest[k] = p_T(s[k:] | s[:k])
        for k in range(L - 1, -1, -1):
            rest[k] = rest[k + 1] * p(s[:k])[s[k]]
        ks = [L] if whole else range(1, L + 1)
        continued = math.fsum(law.get(s[:k], 0.0) * rest[k] for k in ks)
        gap = abs(continued - rest[0])
        if gap > best + 1e-18:
            best, where = gap, list(s)
    return best, where, f"brute force over {n}^{L} sequences"


def replay(saved: dict, target_instance: Any = None) -> Replayed:
    """Recompute the law and the verdict of a saved certificate (``Certificate.with_witness``).
    ``target_instance``: the instance it was judged on, where that is not the case's own p_T
    (an implementation's ``sampler_law``: ``rheo.checks.protocol.judged.judged_instance``)."""
    witness = saved.get("witness")
    law = law_of(witness or {})
    if witness and witness.get("judged") == "sampler_law" and target_instance is None:
        raise WitnessError("witness: judged against the implementation's sampler_law; pass its judged instance")
    inst = target_instance if target_instance is not None else law_instance(saved["case"])
    whole = "generation" in (witness or {})
    n, L = inst.n, (witness or {}).get("n_tokens", 0) if whole else inst.seq_len
    if whole or n**L <= BRUTE_FORCE:
        dev, seq, how = _deviation(inst.target_law, n, L, law, whole)
    else:
        d = max_deviation(inst, law)
        dev, seq, how = float(d.value), list(d.sequence), "the reference's search (V^L too large to list)"
    verdict = "lossless" if dev <= saved["tolerance"] else "not lossless"
    raw = saved.get("output_law", [])  # [[tokens, p], ...] (with_witness) or {"t1 t2": p} (a counterexample file)
    pairs = raw.items() if isinstance(raw, dict) else raw
    saved_law = {tuple(int(t) for t in (o.split() if isinstance(o, str) else o)): p for o, p in pairs}
    same_law = saved_law.keys() == law.keys() and all(abs(saved_law[o] - law[o]) <= 1e-12 for o in law)
    said = str(saved["verdict"]).removesuffix(" (exact)")
    agrees = verdict == said and same_law and abs(dev - saved["max_abs_deviation"]) <= 1e-12
    return Replayed(law, dev, seq, verdict, agrees, how)
