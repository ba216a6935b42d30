"""Goodness-of-fit of sampled counts against an exact law, with a stated power.

``gof(counts, law, alpha)`` runs Pearson's chi-square on *counts* (never frequencies).
Bins whose expected count is below 5 are merged into one tail bin (smallest first, and the
merge is reported, never silent); an observed outcome the law gives probability 0 rejects
outright. ``detectable_tv(n, df, alpha, power)`` is the smallest total-variation distance
(on the test's bins) the test detects with that power: for any alternative q at TV delta
from p, the noncentrality N * sum (q - p)^2 / p is at least 4 N delta^2 (Cauchy-Schwarz,
equality for a half/half split of the mass), so the bound holds for every direction.

>>> r = gof({"a": 480, "b": 520}, {"a": 0.5, "b": 0.5}, alpha=1e-6)
>>> r.reject, r.bins
(False, 2)

Specification: docs/spec.md §5 (the exact laws the counts are tested against).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats


@dataclass
class GofResult:
    n: int
    bins: int
    merged: int  # outcomes merged into the tail bin (expected < 5)
    statistic: float
    p_value: float
    alpha: float
    impossible: list = field(default_factory=list)  # observed outcomes of probability 0
    detectable_tv: float = float("nan")

    @property
    def reject(self) -> bool:
        return bool(self.impossible) or self.p_value < self.alpha

    def describe(self) -> str:
        if self.impossible:
            return f"REJECT: observed outcomes of probability 0: {self.impossible[:5]}"
        verdict = "REJECT" if self.reject else "ok"
        return (
            f"{verdict}: chi2 = {self.statistic:.1f} on {self.bins - 1} df, p = {self.p_value:.3g} "
            f"(alpha {self.alpha:.2g}), N = {self.n}, {self.merged} outcomes merged into the tail; "
            f"detects TV >= {self.detectable_tv:.4f} with power 0.99"
        )


def merge_bins(expected: np.ndarray, minimum: float = 5.0) -> list[list[int]]:
    """Groups of bin indices: every bin with expected >= minimum alone, the others merged
    into one tail bin (grown by the smallest remaining bins until it reaches minimum)."""
    order = np.argsort(expected, kind="stable")
    big = [int(i) for i in order if expected[i] >= minimum]
    tail = [int(i) for i in order if expected[i] < minimum]
    if tail:
        while expected[tail].sum() < minimum and big:
            tail.append(big.pop(0))
    groups = [[i] for i in big]
    if tail:
        groups.append(tail)
    return groups


def detectable_tv(n: int, df: int, alpha: float, power: float = 0.99) -> float:
    """Smallest TV delta with Pr(reject) >= power for every alternative at TV delta (on the
    test's bins), from the noncentral chi-square with noncentrality 4 n delta^2."""
    if df < 1:
        return float("inf")
    crit = stats.chi2.isf(alpha, df)

    def gap(delta):
        return stats.ncx2.sf(crit, df, 4 * n * delta * delta) - power

    if gap(1.0) < 0:
        return float("inf")
    return float(optimize.brentq(gap, 1e-9, 1.0, xtol=1e-7))


def gof(counts: dict, law: dict, alpha: float, power: float = 0.99) -> GofResult:
    """Chi-square test of ``counts`` (outcome -> count) against ``law`` (outcome -> prob)."""
    n = int(sum(counts.values()))
    impossible = [o for o, c in counts.items() if c > 0 and not law.get(o, 0) > 0]
    keys = [o for o, p in law.items() if p > 0]
    p = np.array([float(law[o]) for o in keys])
    p = p / p.sum()
    obs = np.array([counts.get(o, 0) for o in keys], dtype=float)
    groups = merge_bins(n * p)
    e = np.array([n * p[g].sum() for g in groups])
    o = np.array([obs[g].sum() for g in groups])
    merged = sum(len(g) for g in groups if len(g) > 1)
    if len(groups) < 2:
        return GofResult(n, len(groups), merged, 0.0, 1.0, alpha, impossible, float("inf"))
    stat = float(((o - e) ** 2 / e).sum())
    pv = float(stats.chi2.sf(stat, len(groups) - 1))
    return GofResult(
        n, len(groups), merged, stat, pv, alpha, impossible, detectable_tv(n, len(groups) - 1, alpha, power)
    )


def _noncentrality(df: int, alpha: float, power: float) -> float:
    """The noncentrality lambda at which the chi-square test on ``df`` degrees of freedom
    rejects with probability ``power``: detectable_tv(n, df) = sqrt(lambda / (4 n))."""
    crit = stats.chi2.isf(alpha, df)

    def gap(lam):
        return stats.ncx2.sf(crit, df, lam) - power

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-9, rtol=1e-12))


def law_tv(probs: np.ndarray, n: int, alpha: float, power: float = 0.99) -> float:
    """``detectable_tv`` of ``gof`` with ``n`` samples of the law ``probs`` (its bins merged
    at n as ``gof`` merges them)."""
    return detectable_tv(n, len(merge_bins(n * probs)) - 1, alpha, power)


def cycles_for_tv(law: dict | np.ndarray, tv: float, alpha: float, power: float = 0.99) -> int:
    """The fewest samples n at which ``gof`` against ``law`` (outcome -> probability, or a
    probability vector) detects every alternative at TV ``tv`` with ``power``: the inverse
    of ``detectable_tv``. Found iteratively, since the bins (merged where n p < 5), hence the
    degrees of freedom, depend on n: n = lambda(df) / (4 tv^2) for the df at n, until the df
    stays put, then the smallest n below that still reaches ``tv``. Raises ValueError for a
    law with fewer than two outcomes of positive mass (one bin: no TV is ever detectable).

    >>> n = cycles_for_tv({"a": 0.5, "b": 0.5}, 0.05, alpha=1e-6)
    >>> detectable_tv(n, 1, 1e-6) <= 0.05 < detectable_tv(n - 1, 1, 1e-6)
    True
    """
    if not 0 < tv <= 1:
        raise ValueError(f"tv must be in (0, 1], got {tv}")
    p = np.array(list(law.values()) if isinstance(law, dict) else law, dtype=np.float64)
    p = p[p > 0]
    if len(p) < 2:
        raise ValueError("a law with fewer than two outcomes of positive mass has one bin: no TV is detectable")
    p = p / p.sum()

    def reaches(n: int) -> bool:
        return law_tv(p, n, alpha, power) <= tv

    n = 10
    for _ in range(100):  # the df grows with n and n with the df: a few rounds settle it
        df = max(len(merge_bins(n * p)) - 1, 1)
        nxt = math.ceil(_noncentrality(df, alpha, power) / (4 * tv * tv))
        if nxt == n:
            break
        n = nxt
    while not reaches(n):  # the df at n may exceed the one n was computed for
        n = math.ceil(n * 1.02) + 1
    lo, hi = 1, n  # the smallest n that reaches tv, if the reach is monotone near it
    while lo < hi:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi
