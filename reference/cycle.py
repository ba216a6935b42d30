"""The law of one cycle's output and what follows from it (docs/spec.md §5)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .numbers import Number
from .tree import LabelledTree
from .verify import Output


class Timeout(RuntimeError):
    """An enumeration ran past its deadline."""


class Deadline:
    """Raises Timeout once ``seconds`` have passed; optional progress callback."""

    def __init__(
        self, seconds: float | None = None, progress: Callable[[str], object] | None = None, every: float = 2.0
    ) -> None:
        self.start = time.perf_counter()
        self.seconds = seconds
        self.progress = progress
        self.every = every
        self._next = self.start + every

    def check(self, count: int, what: str = "joint draws") -> None:
        now = time.perf_counter()
        if self.seconds is not None and now - self.start > self.seconds:
            raise Timeout(f"gave up after {self.seconds:g} s ({count} {what})")
        if self.progress is not None and now >= self._next:
            self._next = now + self.every
            self.progress(f"  ... {count} {what}, {now - self.start:.1f} s")


@dataclass
class CycleLaw:
    """Pr(O = o) for every output o (tuples of token ids), with enumeration statistics.

    ``joint_draws`` counts joint draws of the Y's with r(Y) > 0 (None when not counted);
    ``classes`` the distinct labelled pruned trees.
    """

    law: dict[Output, Number]
    joint_draws: int | None
    classes: int
    enumerator: str = ""
    trees: dict[LabelledTree, Number] = field(default_factory=dict, repr=False)  # labelled tree -> probability

    def total(self) -> Number:
        return sum(self.law.values())

    def tau(self) -> Number:
        """E|O|: the mean number of tokens a cycle emits (accepted + the final token)."""
        return sum(len(o) * pr for o, pr in self.law.items())

    def root_acceptance(self) -> Number:
        """Pr(the first draft token is accepted) = Pr(|O| >= 2)."""
        return sum(pr for o, pr in self.law.items() if len(o) >= 2)

    def first_token_law(self, n: int) -> list[Number]:
        out: list[Number] = [0] * n
        for o, pr in self.law.items():
            out[o[0]] += pr
        return out
