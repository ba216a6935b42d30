"""Deterministic generated instances: prefix-dependent exact tables from a seed (the models
of docs/spec.md §0, also written as §8 case dicts).

Used by ``rheo bench exact`` and by tests that need many reproducible instances; the
whole instance is reproducible from (vocab_size, seed, max_weight, zero_share) alone.

>>> law = hashed_law(3, seed=7, prefix=(1,), max_weight=9)
>>> sum(law)
Fraction(1, 1)
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

from .instance import Instance, Table, make_instance
from .params import Prefix


def hashed_law(
    n: int, seed: int, prefix: Prefix, max_weight: int = 20, zero_share: int = 0, salt: str = ""
) -> tuple[Fraction, ...]:
    """Integer weights in 1..max_weight from a hash of (seed, salt, prefix), normalized.

    With zero_share = z > 0 each weight is zeroed with probability about z/16 (never all).
    The hash is part of the contract (a generated case is named by its seed): the bytes h are
    SHAKE-256 of "salt|seed|p1,p2,..." (the prefix's token ids), and weight i is
    1 + h[2i] mod max_weight, zeroed when z > 0 and h[2i+1] mod 16 < z; if every weight is
    zeroed, the law is all on token 0.
    """
    h = hashlib.shake_256(f"{salt}|{seed}|{','.join(map(str, prefix))}".encode()).digest(2 * n)
    weights = []
    for i in range(n):
        b = h[2 * i]
        w = 1 + b % max_weight
        if zero_share and (h[2 * i + 1] & 15) < zero_share:
            w = 0
        weights.append(w)
    if not any(weights):
        weights[0] = 1
    total = sum(weights)
    return tuple(Fraction(w, total) for w in weights)


def hashed_tables(n: int, seed: int, max_weight: int = 20, zero_share: int = 0) -> tuple[Table, Table]:
    """(target, draft) tables that differ at every prefix and from each other."""
    target = Table("target", {}, fn=lambda pre: hashed_law(n, seed, pre, max_weight, zero_share, "target"))
    draft = Table("draft", {}, fn=lambda pre: hashed_law(n, seed, pre, max_weight, zero_share, "draft"))
    return target, draft


def hashed_instance(n: int, seed: int, max_weight: int = 20, zero_share: int = 0, **config: Any) -> Instance:
    """An Instance over generated tables; ``config`` as for ``make_instance``."""
    target, draft = hashed_tables(n, seed, max_weight, zero_share)
    if config.get("arithmetic", "exact") != "exact":
        t0, d0 = target.fn, draft.fn
        assert t0 is not None and d0 is not None  # hashed_tables makes tables of functions
        target = Table("target", {}, fn=lambda pre: tuple(float(x) for x in t0(pre)))
        draft = Table("draft", {}, fn=lambda pre: tuple(float(x) for x in d0(pre)))
    return make_instance(n, target, draft, **config)


def hashed_case(
    n: int, seed: int, depth: int, max_weight: int = 20, zero_share: int = 0, **config: Any
) -> dict[str, Any]:
    """The same generated tables as a docs/spec.md §8 case dict (every prefix a cycle can reach
    listed), so a generated instance can be saved, replayed and read by ``rheo exact``.

    >>> case = hashed_case(2, seed=0, depth=1, policy="topk", K=1, budget=1)
    >>> sorted(case["target"]), sorted(case["draft"])
    (['', '0', '1'], [''])
    """
    import itertools

    def law(prefix: Prefix, salt: str) -> list[str]:
        return [f"{x.numerator}/{x.denominator}" for x in hashed_law(n, seed, prefix, max_weight, zero_share, salt)]

    target: dict[str, list[str]]
    draft: dict[str, list[str]]
    target, draft = {}, {}
    for length in range(depth + 1):
        for prefix in itertools.product(range(n), repeat=length):
            key = ",".join(map(str, prefix))
            target[key] = law(prefix, "target")
            if length < depth:
                draft[key] = law(prefix, "draft")
    case = {"vocab_size": n, "target": target, "draft": draft, "depth": depth}
    case.update({k: v for k, v in config.items() if v is not None})
    return case
