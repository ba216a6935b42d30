"""Numbers, temperature and the target-side filters (docs/spec.md §0 and §1).

Every law in the reference is a tuple of ``vocab_size`` numbers. In exact mode the
numbers are :class:`fractions.Fraction`; in float64 mode they are Python floats. The
functions here only use ``+ - * /``, ``**`` with integer exponents and comparisons, so
they also run on the symbolic shadow numbers of proofs_tests/symbolic.py.

>>> from fractions import Fraction as F
>>> temper((F(1, 2), F(1, 2), F(0)), Temperature.parse("1/2", exact=True))
(Fraction(1, 2), Fraction(1, 2), Fraction(0, 1))
>>> temper((F(1, 4), F(3, 4)), Temperature.parse("0", exact=True))
(Fraction(0, 1), Fraction(1, 1))
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Protocol

from .deadline import Deadline, paced

Number = Fraction | float  # Fraction in exact arithmetic, float in float64
Law = tuple[Number, ...]  # one number per token id


class CaseError(ValueError):
    """Bad input. ``field`` names the offending field, ``str(err)`` says what is expected.

    ``errors`` lists every problem found, one CaseError each, this one's own first: a
    case file's independent errors are all reported at once (``rheo.casefile``); an error
    raised on its own lists just itself."""

    def __init__(self, field: str, message: str, errors: Sequence[CaseError] = ()) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self._errors = tuple(errors)

    @property
    def errors(self) -> list[CaseError]:
        return list(self._errors) if self._errors else [self]


def parse_exact(value: object, field: str) -> Fraction:
    """Read a probability as an exact rational: "3/10", "0.3", 0.3 (read as printed), 1."""
    if isinstance(value, bool):
        raise CaseError(field, f"expected a number or a rational string, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise CaseError(field, f"expected a finite number, got {value}")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CaseError(field, f"expected a finite number, got {value}")
        return Fraction(repr(value))  # the decimal it prints as: 0.1 -> 1/10
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise CaseError(field, f'expected an exact rational like "3/10" or "0.3", got {value!r}') from None
    raise CaseError(field, f"expected a number or a rational string, got {type(value).__name__}")


def normalize(vec: Sequence[Number], deadline: Deadline | None = None) -> Law:
    """Divide by the total mass. The caller guarantees the total is positive.

    ``deadline``, here and below: checked after each entry (``paced``); None: no limit."""
    total = sum((x for x in paced(vec[1:], deadline) if x), vec[0])  # zeros skipped: cost follows the support
    if not total:
        raise ZeroDivisionError("the total mass is 0")  # as dividing by it would (the callers name the cause)
    return tuple(x / total if x else x for x in paced(vec, deadline))


def argmax_lowest(vec: Sequence[Number], deadline: Deadline | None = None) -> int:
    """Index of the largest entry; ties go to the lowest index."""
    best = 0
    for i in paced(range(1, len(vec)), deadline):
        if vec[i] > vec[best]:
            best = i
    return best


def one_hot(n: int, i: int, like: Number) -> Law:
    zero, one = like * 0, like * 0 + 1
    return tuple(one if j == i else zero for j in range(n))


@dataclass(frozen=True)
class Temperature:
    """T >= 0. ``power`` is k when T = 1/k (exact mode); ``value`` is T as a float otherwise.

    T = 0 is the one-hot on the argmax (ties -> lowest id).
    """

    text: str
    zero: bool
    power: int | None  # k for T = 1/k
    value: float

    @staticmethod
    def parse(raw: object, exact: bool, field: str = "temperature") -> Temperature:
        if raw is None:
            raw = "1"
        t = parse_exact(raw, field)
        if t < 0:
            raise CaseError(field, f"must be >= 0, got {raw}")
        if t == 0:
            return Temperature("0", True, None, 0.0)
        inv = 1 / t
        if inv.denominator == 1:
            return Temperature(str(t), False, int(inv), float(t))
        if exact:
            raise CaseError(
                field,
                f"exact arithmetic needs T = 0 or 1/k for an integer k >= 1 (got {raw}); "
                'set "arithmetic": "float64" for any other temperature',
            )
        return Temperature(str(t), False, None, float(t))

    def __str__(self) -> str:
        return self.text


def temper(vec: Sequence[Number], temp: Temperature, deadline: Deadline | None = None) -> Law:
    """p_T = p^(1/T) normalized on the same support; T = 0 -> one-hot on the argmax."""
    if temp.zero:
        return one_hot(len(vec), argmax_lowest(vec, deadline), vec[0])
    if temp.power == 1:
        return normalize(vec, deadline)
    if temp.power is not None:
        return normalize([x**temp.power for x in paced(vec, deadline)], deadline)
    e = 1.0 / temp.value
    return normalize([float(x) ** e if x > 0 else 0.0 for x in paced(vec, deadline)], deadline)


RANK_RUN = 4096  # under a deadline, rank_order sorts runs of this many ids and merges them


def rank_order(vec: Sequence[Number], deadline: Deadline | None = None) -> list[int]:
    """Token ids with positive mass ordered by (mass desc, id asc).

    Under a deadline the same order is found by sorting runs of ``RANK_RUN`` ids and
    merging them, so that the clock is read between runs and during the merge."""
    key = lambda i: (-vec[i], i)
    ids = [i for i in paced(range(len(vec)), deadline) if vec[i] > 0]
    if deadline is None or len(ids) <= RANK_RUN:
        return sorted(ids, key=key)
    starts = paced(range(0, len(ids), RANK_RUN), deadline, "ranking tokens")
    runs = [sorted(ids[a : a + RANK_RUN], key=key) for a in starts]
    return list(paced(heapq.merge(*runs, key=key), deadline))


def keep_top_k(vec: Sequence[Number], k: int, deadline: Deadline | None = None) -> Law:
    """Keep the k largest entries (ties -> lower id), zero the rest, renormalize (docs/spec.md §1)."""
    keep = set(rank_order(vec, deadline)[:k])
    zero = vec[0] * 0
    return normalize([x if i in keep else zero for i, x in enumerate(paced(vec, deadline))], deadline)


def keep_top_p(
    vec: Sequence[Number], top_p: Number, deadline: Deadline | None = None, at_most: int | None = None
) -> Law:
    """Keep the shortest (prob desc, id asc) prefix whose mass reaches top_p (docs/spec.md §0),
    and no more than ``at_most`` tokens (the joint composition's top-k, ``keep_top_k_top_p_joint``)."""
    keep, mass = set(), vec[0] * 0
    for rank, i in enumerate(paced(rank_order(vec, deadline), deadline)):
        if at_most is not None and rank >= at_most:
            break
        keep.add(i)
        mass = mass + vec[i]
        if mass >= top_p:
            break
    zero = vec[0] * 0
    return normalize([x if i in keep else zero for i, x in enumerate(paced(vec, deadline))], deadline)


def keep_min_p(vec: Sequence[Number], min_p: Number, deadline: Deadline | None = None) -> Law:
    """Drop tokens below min_p x (largest probability), renormalize (docs/spec.md §0)."""
    top = max(paced(vec, deadline))
    zero = vec[0] * 0
    return normalize([x if x >= min_p * top else zero for x in paced(vec, deadline)], deadline)


class Filters(Protocol):
    """What ``apply_filters`` reads: a ``rheo.reference.params.TargetFilters`` (not imported
    here, params imports this module). None = off."""

    @property
    def top_k(self) -> int | None: ...

    @property
    def top_p(self) -> Number | None: ...

    @property
    def min_p(self) -> Number | None: ...


# How top-k and top-p compose when both are set (docs/spec.md §0), by FlashInfer's names:
# "top_k_first" top-p reads the law top-k left, renormalised (the spec's order; vLLM,
# transformers); "joint" top-p's run is measured on the law before top-k and the two kept
# sets are intersected (FlashInfer's filter_apply_order="joint", SGLang's sampler).
FILTER_COMPOSITIONS = ("top_k_first", "joint")


def keep_top_k_top_p_joint(vec: Sequence[Number], k: int, top_p: Number, deadline: Deadline | None = None) -> Law:
    """Keep the tokens in both the k largest and the shortest (prob desc, id asc) run of
    ``vec`` itself (not renormalised after top-k) whose mass reaches top_p; renormalize."""
    return keep_top_p(vec, top_p, deadline, at_most=k)


def apply_filters(
    law: Law, filters: Filters, deadline: Deadline | None = None, composition: str = "top_k_first"
) -> Law:
    """The serving-engine filters (a ``rheo.reference.params.TargetFilters``) after
    temperature, in their order: top_k, top_p, min_p (docs/spec.md §0); with both top_k and
    top_p set, composed as ``composition`` says (``FILTER_COMPOSITIONS``)."""
    if composition not in FILTER_COMPOSITIONS:
        raise ValueError(f"composition: expected one of {', '.join(FILTER_COMPOSITIONS)}, got {composition!r}")
    if composition == "joint" and filters.top_k is not None and filters.top_p is not None:
        law = keep_top_k_top_p_joint(law, filters.top_k, filters.top_p, deadline)
    else:
        if filters.top_k is not None:
            law = keep_top_k(law, filters.top_k, deadline)
        if filters.top_p is not None:
            law = keep_top_p(law, filters.top_p, deadline)
    if filters.min_p is not None:
        law = keep_min_p(law, filters.min_p, deadline)
    return law


def positive_part_difference(w: Law, r: Law, deadline: Deadline | None = None) -> list[Number]:
    """(w - r)^+ entrywise."""
    zero = w[0] * 0
    return [a - b if a > b else zero for a, b in paced(zip(w, r), deadline)]


def fmt_number(x: Number, exact: bool) -> str | float:
    """A number for JSON: an exact rational string in exact mode, a float otherwise."""
    if exact:
        x = Fraction(x)
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return float(x)
