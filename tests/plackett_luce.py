"""The Plackett-Luce law of an ordered draw without replacement, written out for the tests of
races and of ``multinomial(replacement=False)``: each place w_j over the weight not drawn yet.

>>> plackett_luce([1, 3], (1, 0))
0.75
>>> ordered_law([0.5, 0.5, 0.0], 3) == {(0, 1): 0.25 * 2, (1, 0): 0.5}
True
"""

from __future__ import annotations

import itertools
from typing import Any


def plackett_luce(w: list, order: tuple[int, ...]) -> Any:
    """P(the first places are ``order``) for weights ``w`` (floats or fractions)."""
    left, p = sum(w), 1
    for j in order:
        p = p * w[j] / left
        left -= w[j]
    return p


def ordered_law(w: list, k: int) -> dict:
    """P(each ordered prefix of k places; fewer where fewer tokens have weight)."""
    live = [j for j in range(len(w)) if w[j] > 0]
    return {o: plackett_luce(w, o) for o in itertools.permutations(live, min(k, len(live)))}
