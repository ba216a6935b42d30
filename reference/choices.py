"""Where the randomness comes from (docs/spec.md §7).

Every random decision in the reference is one of two calls on a *chooser*:

- ``draw(name, items)``: pick a token from ``items``, a list of (token, mass) in the order
  docs/spec.md §7 fixes (rank order for Y, token-id order for bonus/correction tokens);
- ``coin(name, a)``: accept with probability ``a``.

``UniformChooser`` answers them from explicit uniforms (inverse CDF, ``u < a``), which is
what the fastpath and user implementations are compared against decision by decision.
``enumerate_choices`` runs a function under *every* combination of answers and yields each
with its exact probability: the naive enumerator is ``enumerate_choices(build_tree)``.

Names: ("draw", e), ("sample", d), ("det", d, j), ("final", d).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from .numbers import Number

if TYPE_CHECKING:
    import numpy as np

Name = tuple[str, int] | tuple[str, int, int]  # ("draw", e), ("sample", d), ("det", d, j), ("final", d)
T = TypeVar("T")
R = TypeVar("R")


class Chooser(Protocol):
    """What the tree builder and the walk ask for: a token from ``items`` or a coin."""

    def draw(self, name: Name, items: Sequence[tuple[int, Number]]) -> int: ...

    def coin(self, name: Name, a: Number) -> bool: ...


@dataclass
class Uniforms:
    """One cycle's uniforms in [0, 1) (docs/spec.md §7). Shapes: u_draw [1+B(D-1)], u_sample [D+1],
    u_det [D+1][K], u_final [D+1]."""

    u_draw: Sequence[float]
    u_sample: Sequence[float]
    u_det: Sequence[Sequence[float]]
    u_final: Sequence[float]

    @staticmethod
    def random(rng: np.random.Generator, K: int, B: int, D: int) -> Uniforms:
        """Fresh float64 uniforms from a numpy Generator."""
        return Uniforms(
            list(rng.random(1 + B * (D - 1))),
            list(rng.random(D + 1)),
            [list(row) for row in rng.random((D + 1, K))],
            list(rng.random(D + 1)),
        )

    def lookup(self, name: Name) -> float:
        kind = name[0]
        if kind == "draw":
            return self.u_draw[name[1]]
        if kind == "sample":
            return self.u_sample[name[1]]
        if kind == "det":
            return self.u_det[name[1]][name[2]]  # type: ignore[misc]  # a "det" name has three entries
        if kind == "final":
            return self.u_final[name[1]]
        raise KeyError(name)


class UniformChooser:
    """Answers draws by inverse CDF and coins by ``u < a``, recording every decision."""

    def __init__(self, uniforms: Uniforms) -> None:
        self.uniforms = uniforms
        self.decisions: list[tuple[Name, int | bool]] = []

    def draw(self, name: Name, items: Sequence[tuple[int, Number]]) -> int:
        u = self.uniforms.lookup(name)
        cum = items[0][1] * 0
        chosen: int = None  # type: ignore[assignment]  # items is a law: some token has mass and is chosen
        for token, mass in items:
            if mass > 0:
                chosen = token
                cum = cum + mass
                if cum > u:
                    break
        # float rounding can leave cum a hair below u near 1: the last token with mass wins
        self.decisions.append((name, chosen))
        return chosen

    def coin(self, name: Name, a: Number) -> bool:
        accept = self.uniforms.lookup(name) < a
        self.decisions.append((name, accept))
        return accept


class _Branch(Exception):
    def __init__(self, options: Sequence[tuple[object, Number]]) -> None:
        self.options = options


class _Replay:
    """Follows a script of option indices; raises _Branch at the first unscripted choice."""

    def __init__(self, script: tuple[int, ...], one: Number) -> None:
        self.script = script
        self.pos = 0
        self.prob = one

    def _choose(self, options: list[tuple[T, Number]]) -> T:
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

    def draw(self, name: Name, items: Sequence[tuple[int, Number]]) -> int:
        return self._choose([(t, m) for t, m in items if m > 0])

    def coin(self, name: Name, a: Number) -> bool:
        one = a * 0 + 1
        return self._choose([(v, m) for v, m in ((True, a), (False, one - a)) if m > 0])


def enumerate_choices(fn: Callable[[Chooser], R], one: Number) -> Iterator[tuple[Number, R]]:
    """Yield (probability, fn(chooser)) for every combination of positive-probability answers.

    ``one`` is the number 1 of the arithmetic in use (Fraction(1) or 1.0).
    Depth-first, in option order; a call with a single possible answer is not a branch.
    """
    stack: list[tuple[int, ...]] = [()]
    while stack:
        script = stack.pop()
        chooser = _Replay(script, one)
        try:
            result = fn(chooser)
        except _Branch as branch:
            stack.extend(script + (i,) for i in reversed(range(len(branch.options))))
            continue
        yield chooser.prob, result
