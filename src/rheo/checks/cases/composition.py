"""Cases where the two compositions of top-k and top-p give different target laws
(docs/spec.md §0, "Worked compositions"; ``rheo.reference.numbers.FILTER_COMPOSITIONS``):
exact certification takes them for every implementation that supports them, so that a
verifier composing its filters otherwise than its engine's plain sampler (as declared by
``filter_composition``) fails on a proof, not by chance of the drawn cases.

The worked row of §0: p = (2/5, 3/10, 1/5, 1/10), top-k 3, top-p 3/4: top-k first gives
(4/7, 3/7, 0, 0), joint (4/9, 1/3, 2/9, 0). The same law at every target prefix, a
uniform draft, chains of one and two drafts, T = 1.
"""

from __future__ import annotations

from itertools import product

WORKED = ["2/5", "3/10", "1/5", "1/10"]
VOCAB = 4


def _prefixes(depth: int) -> list[str]:
    return [",".join(map(str, p)) for n in range(depth + 1) for p in product(range(VOCAB), repeat=n)]


def composition_cases() -> list[dict]:
    """The cases (module docstring), each named for what it is."""
    out = []
    for depth in (1, 2):
        out.append(
            {
                "name": f"chain K=1 V=4 D={depth} T=1 top_k 3 top_p 3/4 (the compositions differ)",
                "vocab_size": VOCAB,
                "target": {p: list(WORKED) for p in _prefixes(depth)},
                "draft": {p: ["1/4"] * VOCAB for p in _prefixes(depth - 1)},
                "depth": depth,
                "policy": "rheo",
                "K": 1,
                "beam": 1,
                "budget": depth,
                "m": 0,
                "temperature": "1",
                "target_top_k": 3,
                "target_top_p": "3/4",
            }
        )
    return out
