"""How much an exact certification enumerates, from a case's shape, before it starts
(``rheo exact`` says at once when a case is far too big for its ``--timeout``).

Both enumerators branch only where a node draws its sample Y (docs/spec.md §2): an
expansion draws from the residual law's support, the tokens with positive draft mass
beyond the m leads (at most ``draft_top_k`` - m of them; one at T = 0; none under Top-K).
A tree has at most 1 + B(D-1) expansions: the root's, then at most B per layer below.

- **joint draws** (the naive enumerator's unit: one tree each) are at most
  s_root * s^(B(D-1)), s_root the root's draws and s the most any listed law allows. This
  is an upper bound; it is the count itself when every draft law has the same support of
  at least K tokens (every node then has K children and every expansion happens), e.g. a
  case whose draft table is one "*" law of full support.
- **class-enumerator branches** (its unit: one labelled pruned tree, or a set of them, per
  branch): the same product, except that the B expansions of the last layer (whose
  children are never expanded) branch at most f + 1 ways, f = K-m-1 fills (the draws past
  the first f stay one lazy group, docs/spec.md §5; with tie_break "token" or the "self"
  proxy nothing is grouped). An upper bound, often by orders of magnitude: the enumerator
  also skips nodes that cannot survive pruning and keeps lazy groups whole when their
  sample node is not expanded. The distinct classes it finds (``CycleLaw.classes``) are
  at most the joint draws (a branch whose lazy groups survive pruning holds one class per
  token combination, so they can outnumber the branches).

>>> from rheo.reference import make_instance
>>> inst = make_instance(4, ["1/4"] * 4, ["1/4"] * 4, policy="rheo", K=3, m=1, depth=2, budget=4)
>>> e = work_estimate(inst, "naive")
>>> e.what, e.count, e.exact  # 3 draws at the root, 3 at each of the 3 expansions below it
('joint draws', 81.0, True)
>>> work_estimate(inst, "classes").count  # 3 at the root, then 1 fill + 1 group = 2 ways, 3 times
24.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .deadline import Deadline, paced
from .instance import Instance
from .numbers import Number

HUGE = 1e300  # counts past this are written as this (a float: the bounds can have millions of digits)


@dataclass(frozen=True)
class Estimate:
    """The count a certification's enumeration reaches: ``what`` (the Deadline phase it
    counts: "joint draws" or "class-enumerator branches"), at most ``count`` of them
    (``exact``: exactly that many), and at most ``joint_draws`` joint draws."""

    what: str
    count: float
    exact: bool
    joint_draws: float


def _positive(law: Sequence[Number], deadline: Deadline | None) -> int:
    return sum(1 for x in paced(law, deadline, "estimating the work") if x > 0)


def _power(base: int, exponent: int) -> float:
    if base <= 1 or exponent == 0:
        return 1.0
    log = exponent * math.log10(base)
    return HUGE if log >= 300 else float(base**exponent)


def work_estimate(inst: Instance, enumerator: str = "classes", deadline: Deadline | None = None) -> Estimate:
    """An upper bound on what ``enumerator`` ("classes" or "naive") enumerates for ``inst``,
    from its shape (module text); ``deadline`` bounds the pass over the draft laws."""
    c = inst.config
    naive = enumerator == "naive"
    what = "joint draws" if naive else "class-enumerator branches"
    if c.policy == "topk":  # nothing is drawn: one tree
        return Estimate(what, 1.0, True, 1.0)
    m, K, B, D = c.m or 0, c.K, c.B, c.depth
    top_k = c.draft_top_k

    def draws(positive: int) -> int:
        support = max(0, (positive if top_k is None else min(positive, top_k)) - m)
        return min(support, 1) if c.temperature.zero else support

    table = inst.draft
    listed = list(table.laws.values()) + ([table.default] if table.default is not None else [])
    positives = [_positive(law, deadline) for law in listed]
    if table.fn is not None:  # a law for every prefix, from a function: any support up to vocab_size
        positives.append(inst.n)
    root_law = table.laws.get(()) or table.default
    s_root = draws(_positive(root_law, deadline) if root_law is not None else inst.n)
    s = max((draws(p) for p in positives), default=0)
    f = K - m - 1
    grouped = c.tie_break == "slot" and c.proxy.identity_independent
    g = min(s, f + 1) if grouped else s  # the ways a last-layer expansion branches
    g_root = min(s_root, f + 1) if grouped else s_root
    joint = min(HUGE, max(1, s_root) * _power(max(1, s), B * (D - 1)))
    same = len(set(positives)) == 1 and min(positives[0], top_k or positives[0]) >= K
    exact = same and table.fn is None and c.exact
    if naive:
        return Estimate(what, joint, exact, joint)
    if D == 1:
        branches = float(max(1, g_root))
    else:
        branches = min(HUGE, max(1, s_root) * _power(max(1, s), B * (D - 2)) * _power(max(1, g), B))
    return Estimate(what, branches, False, joint)
