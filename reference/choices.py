"""Where the randomness comes from (SPEC section 7).

Every random decision in the reference is one of two calls on a *chooser*:

- ``draw(name, items)``: pick a token from ``items``, a list of (token, mass) in the order
  the SPEC fixes (rank order for Y, token-id order for bonus/correction tokens);
- ``coin(name, a)``: accept with probability ``a``.

``UniformChooser`` answers them from explicit uniforms (inverse CDF, ``u < a``), which is
what the fastpath and user implementations are compared against decision by decision.
``enumerate_choices`` runs a function under *every* combination of answers and yields each
with its exact probability: the naive enumerator is ``enumerate_choices(build_tree)``.

Names: ("draw", e), ("sample", d), ("det", d, j), ("final", d).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence


@dataclass
class Uniforms:
    """One cycle's uniforms in [0, 1) (SPEC 7). Shapes: u_draw [1+B(D-1)], u_sample [D+1],
    u_det [D+1][K], u_final [D+1]."""

    u_draw: Sequence
    u_sample: Sequence
    u_det: Sequence
    u_final: Sequence

    @staticmethod
    def random(rng, K: int, B: int, D: int) -> "Uniforms":
        """Fresh float64 uniforms from a numpy Generator."""
        return Uniforms(
            list(rng.random(1 + B * (D - 1))),
            list(rng.random(D + 1)),
            [list(row) for row in rng.random((D + 1, K))],
            list(rng.random(D + 1)),
        )

    def lookup(self, name: tuple):
        kind = name[0]
        if kind == "draw":
            return self.u_draw[name[1]]
        if kind == "sample":
            return self.u_sample[name[1]]
        if kind == "det":
            return self.u_det[name[1]][name[2]]
        if kind == "final":
            return self.u_final[name[1]]
        raise KeyError(name)


class UniformChooser:
    """Answers draws by inverse CDF and coins by ``u < a``, recording every decision."""

    def __init__(self, uniforms: Uniforms):
        self.uniforms = uniforms
        self.decisions: list = []

    def draw(self, name, items):
        u = self.uniforms.lookup(name)
        cum = items[0][1] * 0
        chosen = None
        for token, mass in items:
            if mass > 0:
                chosen = token
                cum = cum + mass
                if cum > u:
                    break
        # float rounding can leave cum a hair below u near 1: the last token with mass wins
        self.decisions.append((name, chosen))
        return chosen

    def coin(self, name, a):
        accept = self.uniforms.lookup(name) < a
        self.decisions.append((name, accept))
        return accept


class _Branch(Exception):
    def __init__(self, options):
        self.options = options


class _Replay:
    """Follows a script of option indices; raises _Branch at the first unscripted choice."""

    def __init__(self, script: tuple, one):
        self.script = script
        self.pos = 0
        self.prob = one

    def _choose(self, options):
        if len(options) == 1:
            value, mass = options[0]
            self.prob = self.prob * mass
            return value
        if self.pos >= len(self.script):
            raise _Branch(options)
        value, mass = options[self.script[self.pos]]
        self.pos += 1
        self.prob = self.prob * mass
        return value

    def draw(self, name, items):
        return self._choose([(t, m) for t, m in items if m > 0])

    def coin(self, name, a):
        one = a * 0 + 1
        return self._choose([(v, m) for v, m in ((True, a), (False, one - a)) if m > 0])


def enumerate_choices(fn: Callable, one) -> Iterator[tuple[object, object]]:
    """Yield (probability, fn(chooser)) for every combination of positive-probability answers.

    ``one`` is the number 1 of the arithmetic in use (Fraction(1) or 1.0).
    Depth-first, in option order; a call with a single possible answer is not a branch.
    """
    stack = [()]
    while stack:
        script = stack.pop()
        chooser = _Replay(script, one)
        try:
            result = fn(chooser)
        except _Branch as branch:
            stack.extend(script + (i,) for i in reversed(range(len(branch.options))))
            continue
        yield chooser.prob, result
