"""Handed uniforms followed exactly: an implementation that follows docs/spec.md §7 is a
step function of each uniform. The uniforms are resolved one at a time, in schedule order:
the cells of one uniform (the intervals on which the output stays the same, later uniforms
held fixed) are found by bisection to ``CUT_WIDTH``, each weighted by its length. Each
uniform's cells are checked to stay put when each earlier uniform moves to the ends of its
own cell (the product check, as for concrete draws), and the tree of cells at random points
(``probe_handed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rheo.checks.exact import budget
from rheo.checks.exact.certificate import CUT_WIDTH, PROBES
from rheo.checks.exact.tracer import RunCap, Unsupported, below


class CallCounter:
    def __init__(self, cap: int) -> None:
        self.runs, self.cap = 0, cap

    def tick(self) -> None:
        self.runs += 1
        budget.tick()
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
        found = _cells(h)
        _same_cells(g, point, k, found, path)
        for lo, hi, value in found:
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


def _same_cells(
    g: Callable[[np.ndarray], Any], point: np.ndarray, k: int, found: list, path: list[tuple[float, float]]
) -> None:
    """The product check: uniform k's cells stay put when each earlier uniform moves to the
    two ends of its own cell (each cell of u_k keeps its output just inside both of its ends,
    2 CUT_WIDTH in: a cut is known to that width). Raises Unsupported naming both uniforms
    where one does not: the enumeration would not be exact."""
    inside = [_inside(lo, hi) for lo, hi, _ in found]
    for j, (lo_j, hi_j) in enumerate(path):
        for end in _inside(lo_j, hi_j):
            moved = point.copy()
            moved[j] = end
            for (_, _, value), xs in zip(found, inside):
                for x in xs:
                    moved[k] = x
                    if g(moved.copy()) != value:
                        raise Unsupported(
                            f"the cells of uniform {k} move where uniform {j} moves inside its cell [{lo_j:.6g}, "
                            f"{hi_j:.6g}): the uniforms are not independent steps (their cells are no product), so "
                            "the enumeration is not exact"
                        )


def _inside(lo: float, hi: float) -> tuple[float, ...]:
    """The two ends of the cell [lo, hi), 2 CUT_WIDTH inside it (its middle if it is narrower)."""
    if hi - lo <= 4 * CUT_WIDTH:
        return (lo + (hi - lo) / 2,)
    return (lo + 2 * CUT_WIDTH, hi - 2 * CUT_WIDTH)


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
