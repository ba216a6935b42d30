"""Reference decisions with their margins: how close each decision of a reference cycle
came to going the other way (docs/spec.md §7).

Float engines (the fastpath, an ``--impl`` implementation) are compared with the reference
decision by decision on the same uniforms, *wherever no decision is within ``MARGIN`` of
its threshold*: float64 rounding differs between engines by a few ulps, so a uniform within
1e-9 of an acceptance value, a cumulative mass within 1e-9 of a draw's u, or two different
path scores within 1e-9 could legitimately go either way. Those requests are reported as
"near" and not compared; exact ties (equal scores, equal probabilities) are compared,
because every engine computes them from identical operands.
"""

from __future__ import annotations

from dataclasses import dataclass

from rheo.reference import UniformChooser, Uniforms
from rheo.reference.numbers import temper
from rheo.reference.tree import build_tree
from rheo.reference.verify import walk

MARGIN = 1e-9


class MarginChooser(UniformChooser):
    """A ``UniformChooser`` that also records how close each decision came to flipping."""

    def __init__(self, uniforms):
        super().__init__(uniforms)
        self.margin = float("inf")

    def draw(self, name, items):
        u = float(self.uniforms.lookup(name))
        cum = 0.0
        for _, mass in items:
            if mass > 0:
                cum += float(mass)
                self.margin = min(self.margin, abs(cum - u))
        return super().draw(name, items)

    def coin(self, name, a):
        a = float(a)
        if 0 < a < 1:
            self.margin = min(self.margin, abs(float(self.uniforms.lookup(name)) - a))
        return super().coin(name, a)


def _relative_gap(xs) -> float:
    """The smallest relative gap between two different values of ``xs``."""
    vals = sorted(set(float(x) for x in xs))
    gap = float("inf")
    for a, b in zip(vals, vals[1:]):
        gap = min(gap, (b - a) / max(abs(b), 1e-300))
    return gap


def _near_ties(inst, tree, prefixes) -> float:
    """Smallest relative gap among path scores, draft probabilities at expanded nodes, and
    target-filter thresholds at ``prefixes``."""
    gap = _relative_gap(n.score for n in tree.recorded)
    for _, prefix, _ in tree.expansions:
        gap = min(gap, _relative_gap(inst.node_laws(prefix).q))
    f = inst.config.target_filters
    if f.active:
        for prefix in prefixes:
            p = temper(inst.target(prefix), inst.config.temperature)
            gap = min(gap, _relative_gap(p))
            if f.top_p is not None:
                cum = 0.0
                for x in sorted(p, reverse=True):
                    cum += x
                    gap = min(gap, abs(cum - float(f.top_p)))
            if f.min_p is not None:
                top = max(p)
                gap = min(gap, min(abs(x - float(f.min_p) * top) for x in p))
    return gap


@dataclass
class RequestCheck:
    status: str  # "equal" | "differs" | "near"
    detail: str = ""


def reference_cycle(inst, uniforms: Uniforms):
    """The reference cycle on explicit uniforms, with the smallest decision margin."""
    chooser = MarginChooser(uniforms)
    tree = build_tree(inst, chooser)
    output, accepted = walk(inst, tree.labelled, chooser)
    visited = [()] + [output[:i] for i in range(1, len(output))]
    margin = min(chooser.margin, _near_ties(inst, tree, visited))
    return tree, output, accepted, margin
