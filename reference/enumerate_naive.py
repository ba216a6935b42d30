"""The naive enumerator (docs/spec.md §5): every joint draw of the Y's, one tree and one
verification each.

This is the specification in code; ``enumerate_classes`` must agree with it exactly.
"""

from __future__ import annotations

from .choices import enumerate_choices
from .cycle import CycleLaw
from .deadline import Deadline, paced
from .instance import Instance
from .numbers import Number
from .tree import LabelledTree, build_tree
from .verify import Output, verification_law


def naive_cycle_law(inst: Instance, deadline: Deadline | None = None) -> CycleLaw:
    """E over every joint draw (r(Y) > 0) of Pr(O = o | tree), summed draw by draw."""
    law: dict[Output, Number] = {}
    trees: set[LabelledTree] = set()
    draws = 0
    if deadline is not None:
        deadline.begin("joint draws")
    with inst.bounded(deadline):
        for prob, tree in enumerate_choices(lambda ch: build_tree(inst, ch), inst.one):
            draws += 1
            if deadline is not None:
                deadline.check(draws)
            labelled = tree.labelled
            trees.add(labelled)
            for seq, pr in paced(verification_law(inst, labelled).items(), deadline, "summing the verified laws"):
                law[seq] = law.get(seq, 0) + prob * pr
    return CycleLaw(law, joint_draws=draws, classes=len(trees), enumerator="naive")
