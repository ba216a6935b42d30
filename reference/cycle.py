"""The law of one cycle's output and what follows from it (docs/spec.md §5)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .deadline import Deadline as Deadline  # re-exported: its home before deadline.py
from .deadline import Timeout as Timeout
from .numbers import Number
from .tree import LabelledTree
from .verify import Output


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
