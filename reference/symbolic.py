"""A symbolic proof of Theorem 3 on a region (sympy).

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

from dataclasses import dataclass
from fractions import Fraction

import sympy

from .enumerate_classes import class_cycle_law
from .instance import Instance, Table
from .params import Params
from .theorem3 import theorem3_alpha


class Shadow:
    __slots__ = ("expr", "val", "log")

    def __init__(self, expr, val: Fraction, log: list):
        self.expr, self.val, self.log = expr, val, log

    def _lift(self, other):
        if isinstance(other, Shadow):
            return other
        v = Fraction(other)
        return Shadow(sympy.Rational(v.numerator, v.denominator), v, self.log)

    def __add__(self, o):
        o = self._lift(o)
        return Shadow(self.expr + o.expr, self.val + o.val, self.log)

    __radd__ = __add__

    def __sub__(self, o):
        o = self._lift(o)
        return Shadow(self.expr - o.expr, self.val - o.val, self.log)

    def __rsub__(self, o):
        return self._lift(o) - self

    def __mul__(self, o):
        o = self._lift(o)
        return Shadow(self.expr * o.expr, self.val * o.val, self.log)

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = self._lift(o)
        return Shadow(self.expr / o.expr, self.val / o.val, self.log)

    def __rtruediv__(self, o):
        return self._lift(o) / self

    def __neg__(self):
        return Shadow(-self.expr, -self.val, self.log)

    def __pow__(self, k: int):
        return Shadow(self.expr**k, self.val**k, self.log)

    def __abs__(self):
        return self if self >= 0 else -self

    def _sign(self, o) -> int:
        o = self._lift(o)
        diff = sympy.cancel(sympy.together(self.expr - o.expr))
        s = (self.val > o.val) - (self.val < o.val)
        if not diff.free_symbols:
            return s
        rel = {1: sympy.StrictGreaterThan, -1: sympy.StrictLessThan, 0: sympy.Eq}[s](diff, 0)
        if rel is not sympy.true and rel not in self.log:
            self.log.append(rel)
        return s

    def __lt__(self, o):
        return self._sign(o) < 0

    def __le__(self, o):
        return self._sign(o) <= 0

    def __gt__(self, o):
        return self._sign(o) > 0

    def __ge__(self, o):
        return self._sign(o) >= 0

    def __eq__(self, o):
        return self._sign(o) == 0

    def __ne__(self, o):
        return self._sign(o) != 0

    def __bool__(self):
        return self._sign(0) != 0

    def __hash__(self):
        return hash(self.val)

    def __repr__(self):
        return f"Shadow({self.expr} @ {self.val})"


@dataclass
class Theorem3Proof:
    holds: bool  # enumeration - closed form simplified to 0 on the region
    enumerated: object  # sympy expression of alpha from the enumeration
    closed_form: object  # sympy expression of alpha from Theorem 3
    region: list  # the recorded sign conditions (sympy relations)
    symbols: tuple

    def region_text(self) -> list[str]:
        return [str(r) for r in self.region]


def _symbolic_law(name: str, witness, log):
    """Free symbols for every entry but the last, which is 1 minus the others."""
    syms = sympy.symbols(f"{name}0:{len(witness) - 1}", positive=True)
    exprs = list(syms) + [1 - sum(syms)]
    return syms, tuple(Shadow(e, Fraction(w), log) for e, w in zip(exprs, witness))


def prove_theorem3(witness_p, witness_q, K: int, m: int, budget: int | None = None) -> Theorem3Proof:
    """Prove Theorem 3 symbolically on the region of (p, q) around a witness point.

    ``witness_p`` and ``witness_q`` are rational vectors (the same length n); K, m and the
    budget fix the rheo configuration at depth 1, temperature 1.
    """
    log: list = []
    n = len(witness_p)
    ps, p = _symbolic_law("p", witness_p, log)
    qs, q = _symbolic_law("q", witness_q, log)
    config = Params(policy="rheo", K=K, m=m, depth=1, budget=budget or K)
    inst = Instance(n, Table.constant("target", p), Table.constant("draft", q), config)
    enumerated = class_cycle_law(inst, count_draws=False).root_acceptance()
    closed = theorem3_alpha(inst)
    diff = sympy.cancel(sympy.together(enumerated.expr - closed.expr))
    return Theorem3Proof(diff == 0, sympy.simplify(enumerated.expr), sympy.simplify(closed.expr),
                         list(log), ps + qs)
