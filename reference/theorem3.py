"""Single-layer acceptance: Theorem 3's closed form and the per-node optimum (docs/spec.md §5).

- ``theorem3_alpha``: alpha = Pr(first token accepted) at D = 1 from the closed form
  alpha = 1 - beta + P_L + (1/beta) sum_y (r(y) - p(y))^+ sum_{f in F(y)} (p(f) - r(f))^+
  (alpha = 1 when beta = 0; Top-K: sum_{i<=K} p(x_i)). Our derivation: at D = 1 the
  survivors are the first R slots of the root's pool, so a budget R < K keeps the leads
  x_1..x_min(R,m), the sample when R > m, and the first R-m-1 fills; the formula is applied
  with those sets (docs/spec.md §5 states both).
- ``child_set_law``: the law of the set of surviving root children.
- ``per_node_optimum_lp``: max Pr(X in C) over couplings of X ~ p and C (scipy linprog).
- ``per_node_optimum_exact``: the same optimum exactly, by max-flow/min-cut duality:
  min over token sets A of p(A) + Pr(C not inside A).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
from scipy.optimize import linprog

from .deadline import paced
from .instance import Instance
from .numbers import Number, positive_part_difference
from .tree import LabelledTree, SlotPath

ChildSets = Mapping[frozenset[int], Number]  # the law of a node's set of surviving child tokens


def theorem3_applies(inst: Instance) -> bool:
    c = inst.config
    if c.depth != 1:
        return False
    if c.policy == "topk":
        return True
    return c.proxy.kind == "rheo" and c.verify == "rheo" and c.draft_law == "sampled" and c.tie_break == "slot"


def theorem3_alpha(inst: Instance) -> Number:
    """The closed-form root acceptance rate (D = 1). Raises ValueError if it does not apply."""
    if not theorem3_applies(inst):
        raise ValueError(
            "Theorem 3 covers depth 1 with policy topk, or rheo with the rheo proxy, "
            "rheo verification, the sampled draft law and slot tie-break"
        )
    c = inst.config
    p = inst.target_law(())
    laws = inst.node_laws(())
    zero = p[0] * 0
    R = c.budget
    if c.policy == "topk":
        return sum((p[x] for x in laws.leads[:R]), zero)
    assert c.m is not None  # Params requires m when policy is "rheo"
    leads = laws.leads[:R]
    p_lead = sum((p[x] for x in leads), zero)
    if not laws.draws or R <= c.m:
        return p_lead
    r = laws.residual
    assert r is not None  # there are draws, so the residual support is not empty
    excess = positive_part_difference(p, r, inst.deadline)  # (p - r)^+
    beta = sum(paced(excess[1:], inst.deadline), excess[0])
    if beta == 0:
        return zero + 1
    kept_fills = min(laws.fill_count, R - c.m - 1)
    s = zero
    for y, ry in paced(laws.draws, inst.deadline):
        over = ry - p[y]
        if over > 0:
            s = s + over * sum((excess[f] for f in laws.fills(y)[:kept_fills]), zero)
    return 1 - beta + p_lead + s / beta


def child_set_law(trees: Mapping[LabelledTree, Number], path: SlotPath = ()) -> dict[frozenset[int], Number]:
    """{frozenset of surviving child tokens of the node at ``path``: probability}, from a
    class enumeration's {labelled tree: probability}."""
    out: dict[frozenset[int], Number] = {}
    for tree, pr in trees.items():
        kids = frozenset(t for _, t, _ in tree.children(path))
        out[kids] = out.get(kids, 0) + pr
    return out


def per_node_optimum_lp(p: Sequence[Number], sets: ChildSets) -> float:
    """max Pr(X in C) over couplings of X ~ p and C ~ ``sets`` (scipy HiGHS)."""
    n = len(p)
    cs = list(sets)
    nc = len(cs)
    cost = np.zeros(nc * n)
    for i, c in enumerate(cs):
        for x in c:
            cost[i * n + x] = -1.0
    a_eq, b_eq = [], []
    for i, c in enumerate(cs):
        row = np.zeros(nc * n)
        row[i * n : (i + 1) * n] = 1
        a_eq.append(row)
        b_eq.append(float(sets[c]))
    for x in range(n):
        row = np.zeros(nc * n)
        row[x::n] = 1
        a_eq.append(row)
        b_eq.append(float(p[x]))
    res = linprog(cost, A_eq=np.array(a_eq), b_eq=np.array(b_eq), bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    return -res.fun  # type: ignore[no-any-return]  # scipy is untyped


def per_node_optimum_exact(p: Sequence[Number], sets: ChildSets) -> Number:
    """The same optimum in exact arithmetic: min over A subset of V of p(A) + Pr(C not in A)."""
    zero = p[0] * 0
    relevant = sorted(set().union(*sets)) if sets else []
    best = None
    # tokens outside every child set never help A: p(A) only grows
    for k in range(len(relevant) + 1):
        for a in combinations(relevant, k):
            aset = set(a)
            val = sum((p[x] for x in a), zero) + sum((pr for c, pr in sets.items() if not c <= aset), zero)
            if best is None or val < best:
                best = val
    return best if best is not None else zero
