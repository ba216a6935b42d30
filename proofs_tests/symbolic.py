"""A symbolic proof of Theorem 3 on a region (sympy; docs/spec.md §5).

The engine only uses + - * /, integer powers and comparisons on its numbers, so it runs on
``Shadow`` numbers: a sympy expression in the free parameters together with its value at
a rational *witness point*. Arithmetic acts on both; every comparison is decided at the
witness and its sign condition (``expr > 0``, ``expr == 0``, ...) is recorded unless it
holds identically. On the region where all recorded conditions hold, every branch the
engine takes is the same as at the witness, so the enumerated acceptance rate is one
rational function there. ``prove_theorem3`` shows

    enumeration(alpha) - closed_form(alpha)  simplifies to 0

on that region: a proof for every (p, q) in it, not a check at one point. The region is the
open set cut out by the recorded conditions (fixed ranking and sign pattern), returned as
strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Union

import sympy

from rheo.reference.enumerate_classes import class_cycle_law
from rheo.reference.instance import Instance, Table
from rheo.reference.params import Params
from rheo.reference.theorem3 import theorem3_alpha

Operand = Union["Shadow", Fraction, int]  # what a Shadow computes with: another Shadow or an exact number


class Shadow:
    __slots__ = ("expr", "val", "log")

    def __init__(self, expr: sympy.Expr, val: Fraction, log: list[sympy.Basic]) -> None:
        self.expr, self.val, self.log = expr, val, log

    def _lift(self, other: Operand) -> Shadow:
        if isinstance(other, Shadow):
            return other
        v = Fraction(other)
        return Shadow(sympy.Rational(v.numerator, v.denominator), v, self.log)

    def __add__(self, o: Operand) -> Shadow:
        o = self._lift(o)
        return Shadow(self.expr + o.expr, self.val + o.val, self.log)

    __radd__ = __add__

    def __sub__(self, o: Operand) -> Shadow:
        o = self._lift(o)
        return Shadow(self.expr - o.expr, self.val - o.val, self.log)

    def __rsub__(self, o: Operand) -> Shadow:
        return self._lift(o) - self

    def __mul__(self, o: Operand) -> Shadow:
        o = self._lift(o)
        return Shadow(self.expr * o.expr, self.val * o.val, self.log)

    __rmul__ = __mul__

    def __truediv__(self, o: Operand) -> Shadow:
        o = self._lift(o)
        return Shadow(self.expr / o.expr, self.val / o.val, self.log)

    def __rtruediv__(self, o: Operand) -> Shadow:
        return self._lift(o) / self

    def __neg__(self) -> Shadow:
        return Shadow(-self.expr, -self.val, self.log)

    def __pow__(self, k: int) -> Shadow:
        return Shadow(self.expr**k, self.val**k, self.log)

    def __abs__(self) -> Shadow:
        return self if self >= 0 else -self

    def _sign(self, o: Operand) -> int:
        o = self._lift(o)
        diff = sympy.cancel(sympy.together(self.expr - o.expr))
        s = (self.val > o.val) - (self.val < o.val)
        if not diff.free_symbols:
            return s
        rel = {1: sympy.StrictGreaterThan, -1: sympy.StrictLessThan, 0: sympy.Eq}[s](diff, 0)
        if rel is not sympy.true and rel not in self.log:
            self.log.append(rel)
        return s

    def __lt__(self, o: Operand) -> bool:
        return self._sign(o) < 0

    def __le__(self, o: Operand) -> bool:
        return self._sign(o) <= 0

    def __gt__(self, o: Operand) -> bool:
        return self._sign(o) > 0

    def __ge__(self, o: Operand) -> bool:
        return self._sign(o) >= 0

    def __eq__(self, o: Operand) -> bool:  # type: ignore[override]  # compares with numbers only
        return self._sign(o) == 0

    def __ne__(self, o: Operand) -> bool:  # type: ignore[override]  # compares with numbers only
        return self._sign(o) != 0

    def __bool__(self) -> bool:
        return self._sign(0) != 0

    def __hash__(self) -> int:
        return hash(self.val)

    def __repr__(self) -> str:
        return f"Shadow({self.expr} @ {self.val})"


@dataclass
class Theorem3Proof:
    holds: bool  # enumeration - closed form simplified to 0 on the region
    enumerated: sympy.Expr  # alpha from the enumeration
    closed_form: sympy.Expr  # alpha from Theorem 3
    region: list[sympy.Basic]  # the recorded sign conditions (sympy relations)
    symbols: tuple[sympy.Symbol, ...]

    def region_text(self) -> list[str]:
        return [str(r) for r in self.region]


def _symbolic_law(
    name: str, witness: Sequence[Fraction | int], log: list[sympy.Basic]
) -> tuple[tuple[sympy.Symbol, ...], tuple[Shadow, ...]]:
    """Free symbols for every entry but the last, which is 1 minus the others."""
    syms = sympy.symbols(f"{name}0:{len(witness) - 1}", positive=True)
    exprs = list(syms) + [1 - sum(syms)]
    return syms, tuple(Shadow(e, Fraction(w), log) for e, w in zip(exprs, witness))


def prove_theorem3(
    witness_p: Sequence[Fraction | int], witness_q: Sequence[Fraction | int], K: int, m: int, budget: int | None = None
) -> Theorem3Proof:
    """Prove Theorem 3 symbolically on the region of (p, q) around a witness point.

    ``witness_p`` and ``witness_q`` are rational vectors (the same length n); K, m and the
    budget fix the rheo configuration at depth 1, temperature 1.
    """
    log: list[sympy.Basic] = []
    n = len(witness_p)
    ps, p = _symbolic_law("p", witness_p, log)
    qs, q = _symbolic_law("q", witness_q, log)
    config = Params(policy="rheo", K=K, m=m, depth=1, budget=budget or K)
    # Shadows stand in for the Fractions the engine is typed for (the module docstring says why that works)
    inst = Instance(n, Table.constant("target", p), Table.constant("draft", q), config)  # type: ignore[arg-type]
    enumerated: Shadow = class_cycle_law(inst, count_draws=False).root_acceptance()  # type: ignore[assignment]
    closed: Shadow = theorem3_alpha(inst)  # type: ignore[assignment]
    diff = sympy.cancel(sympy.together(enumerated.expr - closed.expr))
    return Theorem3Proof(diff == 0, sympy.simplify(enumerated.expr), sympy.simplify(closed.expr), list(log), ps + qs)
