"""Handed uniforms followed exactly: an implementation that follows docs/spec.md §7 is a
step function of each uniform. The uniforms are resolved one at a time, in schedule order:
the cells of one uniform (the intervals on which the output stays the same, later uniforms
held fixed) are found by bisection to ``CUT_WIDTH``, each weighted by its length, and
checked at random points (``probe_handed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rheo.checks.exact.certificate import CUT_WIDTH, PROBES
from rheo.checks.exact.tracer import RunCap, Unsupported, below


class CallCounter:
    def __init__(self, cap: int) -> None:
        self.runs, self.cap = 0, cap

    def tick(self) -> None:
        self.runs += 1
        if self.runs > self.cap:
            raise RunCap(self.cap)


def _cells(h: Callable[[float], Any]) -> list[tuple[float, float, Any]]:
    """The intervals of [0, 1) on which h is constant, assuming each value of h occupies one
    interval (true of a coin u < a and of an inverse CDF); cuts found by bisection."""
    out: list[tuple[float, float, Any]] = []
    a = 0.0
    va = h(a)
    last = below(1.0)
    while True:
        if h(last) == va:
            out.append((a, 1.0, va))
            return out
        lo, hi = a, last
        while hi - lo > CUT_WIDTH:
            mid = lo + (hi - lo) / 2
            if h(mid) == va:
                lo = mid
            else:
                hi = mid
        out.append((a, hi, va))
        a, va = hi, h(hi)


def handed_law(
    fn: Callable[[np.ndarray], Any], n: int, counter: CallCounter, cells: list[list[tuple[float, float]]] | None = None
) -> tuple[list[tuple[float, Any]], Any]:
    """Leaves (probability, fn's result) of a function of n uniforms, and the tree of cells
    (for probing); ``cells``, when given, receives each leaf's cell of every uniform (the
    witness: the leaf's probability is the product of their lengths)."""

    memo: dict[tuple, Any] = {}

    def g(values: np.ndarray) -> Any:
        key = tuple(values.tolist())
        if key not in memo:
            counter.tick()
            memo[key] = fn(values)
        return memo[key]

    def rec(k: int, point: np.ndarray, prob: float, leaves: list, path: list[tuple[float, float]]) -> Any:
        def h(x: float) -> Any:
            p = point.copy()
            p[k] = x
            return g(p)

        node = []
        for lo, hi, value in _cells(h):
            if k == n - 1:
                leaves.append((prob * (hi - lo), value))
                if cells is not None:
                    cells.append([*path, (lo, hi)])
                node.append((lo, hi, value))
            else:
                p = point.copy()
                p[k] = lo + (hi - lo) / 2
                node.append((lo, hi, rec(k + 1, p, prob * (hi - lo), leaves, [*path, (lo, hi)])))
        return node

    leaves: list[tuple[float, Any]] = []
    if n == 0:
        if cells is not None:
            cells.append([])
        return [(1.0, g(np.zeros(0)))], None
    structure = rec(0, np.full(n, 0.5), 1.0, leaves, [])
    return leaves, structure


def _locate(structure: Any, point: np.ndarray) -> Any:
    node, k = structure, 0
    while True:
        child = next(c for lo, hi, c in node if lo <= point[k] < hi)
        if k == len(point) - 1:
            return child
        node, k = child, k + 1


def probe_handed(fn: Callable[[np.ndarray], Any], n: int, structure: Any, rng: np.random.Generator, what: str) -> None:
    if n == 0:
        return
    for _ in range(PROBES):
        point = rng.random(n)
        if fn(point) != _locate(structure, point):
            raise Unsupported(
                f"{what}: at uniforms {np.round(point, 6).tolist()} the output is not that of its cell: it is not a "
                "step function of each uniform that this check can follow"
            )
