"""Where a comparison of a random value with a threshold changes its answer (the cut that
``random_values.Trace.split`` branches at): bisection over the floats themselves, or, for a
plain uniform compared with a known threshold, a few candidates beside it, each confirmed.

Specification: docs/spec.md §7.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np


def _bits(x: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", x))[0])


def _float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


Near = Callable[[], "float | None"] | None  # the threshold beside which a cut is looked for first, when known


def _candidates(v: float) -> list[float]:
    """Where a comparison of the plain uniform with threshold ``v`` can change its answer:
    at v or just above it (compared in float64), or halfway to a float32 or float16
    neighbour of v (the uniform rounded to the threshold's dtype first)."""
    out = [v, math.nextafter(v, math.inf)]
    for dtype in (np.float32, np.float16):
        with np.errstate(all="ignore"):
            x = dtype(v)
            if not math.isfinite(v) or float(x) != v:
                continue
            for side in (math.inf, -math.inf):
                m = (v + float(np.nextafter(x, dtype(side)))) / 2
                out += [m, math.nextafter(m, math.inf)]
    return out


def cut_at(truth: Callable[[float], bool], lo: float, hi: float, t_lo: bool, near: Near) -> float:
    """The least x in (lo, hi) with truth(x) != t_lo, for truth monotone on [lo, hi) with
    truth(lo) = t_lo != truth(below(hi)). Candidates beside ``near`` are tried first (each
    confirmed by the answers at it and just below it: under monotonicity that is the one
    cut bisection finds); otherwise bisection over the floats themselves (their bit patterns,
    ordered like the values for floats >= 0): at most 64 steps to the adjacent pair, even for
    a cut near 0."""
    v = near() if near is not None else None
    if v is not None:
        top = below(hi)
        for c in _candidates(v):
            if lo < c <= top and bool(truth(c)) != t_lo and bool(truth(below(c))) == t_lo:
                return c
    a, b = _bits(lo), _bits(below(hi))  # truth(a) = t_lo, truth(b) != t_lo
    while b - a > 1:
        mid = (a + b) // 2
        if bool(truth(_float(mid))) == t_lo:
            a = mid
        else:
            b = mid
    return _float(b)
