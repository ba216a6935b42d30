"""Losslessness of a cycle law (docs/spec.md §5, Theorem 1).

The cycle output O is continued by exact target sampling to length L = D + 1; the result
must equal p_T on every sequence of V^L. ``continued_sequence_law`` lists that law for
every sequence (the simple reading, for small cases and tests); ``max_deviation`` finds the
largest |continued - p_T| without visiting subtrees that cannot hold a larger one (same
answer, checked against the simple one in the tests).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .cycle import CycleLaw
from .deadline import Deadline, paced
from .enumerate_classes import class_cycle_law
from .enumerate_naive import naive_cycle_law
from .instance import Instance
from .numbers import Number, fmt_number
from .stack import Call, run_stack
from .verify import Output

FLOAT_TOLERANCE = 1e-12


def target_sequence_probability(inst: Instance, seq: Output) -> Number:
    """p_T(Seq) = prod_i p_T(Seq_i | Seq_<i)."""
    pr = inst.one
    for i, x in enumerate(seq):
        pr = pr * inst.target_law(seq[:i])[x]
    return pr


def continued_sequence_law(inst: Instance, law: Mapping[Output, Number]) -> dict[Output, Number]:
    """Pr(O (+) continuation = Seq) for every Seq in V^L, by direct summation."""
    L = inst.seq_len
    out: dict[Output, Number] = {}
    for seq in itertools.product(range(inst.n), repeat=L):
        total: Number = 0
        for k in range(1, L + 1):
            o = seq[:k]
            pr = law.get(o)
            if pr:
                for i in range(k, L):
                    pr = pr * inst.target_law(seq[:i])[seq[i]]
                total = total + pr
        out[seq] = total
    return out


@dataclass
class Deviation:
    value: Number  # max |continued - p_T| over V^L
    sequence: Output  # the first sequence (lexicographic) attaining it
    continued: Number
    target: Number


def max_deviation(inst: Instance, law: Mapping[Output, Number]) -> Deviation:
    """max over Seq in V^L of |continued(Seq) - p_T(Seq)|, first maximizer in lex order.

    A(s) = Pr(first |s| tokens = s and |O| <= |s|) obeys A(s.x) = A(s) p_T(x|s) + Pr(O = s.x).
    Below a prefix s that no output extends, the deviation is (A(s) - p_T(s)) * p_T(rest|s),
    so that subtree is settled by its best continuation, and skipped when |A(s) - p_T(s)|
    cannot beat the best so far.

    Both searches recurse once per token of the sequence; they run on an explicit stack
    (``stack.run_stack``: ``yield`` is the recursive call), so any depth works, and check
    ``inst.deadline`` as they go.
    """
    L, n = inst.seq_len, inst.n
    zero, one, deadline = inst.zero, inst.one, inst.deadline
    extended: set[Output] = set()  # every proper prefix of an output: a prefix-closed set
    children: dict[Output, set[int]] = {}  # the next tokens of outputs and of their prefixes
    for o in paced(law, deadline, "listing the prefixes of outputs"):
        for k in reversed(range(len(o))):  # the longest proper prefix first
            children.setdefault(o[:k], set()).add(o[k])
            if o[:k] in extended:
                break  # and so are the shorter ones
            extended.add(o[:k])
    best: list[Any] = [zero, None, zero, zero]  # a Deviation's fields, the sequence None until one is found

    def max_path(s: Output, k: int) -> Call[tuple[Number, Output]]:
        """max over continuations of length k of p_T(rest | s), with the lex-first argmax.
        Each s is searched at most once (the subtrees searched are disjoint), so nothing is cached."""
        if k == 0:
            return one, ()
        p = inst.target_law(s)
        top: tuple[Number, Output] | None = None  # the best continuation so far, with its probability
        for x, px in enumerate(paced(p, deadline, "searching the likeliest continuation")):
            # a bound: p[x] * p_T(rest | s.x) <= p[x], so x can beat the best so far only if p[x] is above it
            if px and px > 0 and (top is None or px > top[0]):
                sub, rest = yield max_path(s + (x,), k - 1)
                if top is None or p[x] * sub > top[0]:
                    top = (p[x] * sub, (x,) + rest)
        assert top is not None, f"p_T(. | {s}) has no positive entry"  # p is a law: it has one
        return top

    searched = [0.0]  # the share of the search settled (progress lines): 1 split evenly over each prefix's tokens

    def settled(share: float) -> None:
        searched[0] += share
        if deadline is not None:
            deadline.shares["sequences compared"] = searched[0]

    def rec(s: Output, a: Number, pt: Number, share: float) -> Call[None]:
        if len(s) == L:
            dev: Number = abs(a - pt)  # type: ignore[assignment]  # mypy joins abs(Fraction | float) to object
            if dev > best[0]:
                best[:] = [dev, s, a, pt]
            settled(share)
            return
        if s not in extended:
            diff: Number = abs(a - pt)  # type: ignore[assignment]  # as above
            if diff > best[0]:
                mp, rest = yield max_path(s, L - len(s))
                if diff * mp > best[0]:
                    best[:] = [diff * mp, s + rest, a * mp, pt * mp]
            settled(share)
            return
        p = inst.target_law(s)
        # a token of probability 0 that no output starts with leaves A = p_T = 0 below it: no
        # deviation there, so only the support and the outputs' tokens are visited (the cost
        # follows the support, not V)
        kids = children.get(s, set())
        xs = [x for x, px in enumerate(paced(p, deadline, "comparing sequences with p_T")) if px or x in kids]
        settled(share * (n - len(xs)) / n)
        for x in xs:
            t = s + (x,)
            yield rec(t, a * p[x] + law.get(t, zero), pt * p[x], share / n)

    if deadline is not None:
        deadline.begin("sequences compared")
    run_stack(rec((), zero, one, 1.0), deadline, "sequences compared")
    if best[1] is None:
        seq = (0,) * L
        pt = target_sequence_probability(inst, seq)
        return Deviation(zero, seq, pt, pt)
    return Deviation(best[0], best[1], best[2], best[3])


@dataclass
class Report:
    """What ``rheo exact`` prints: the certificate for one instance."""

    inst: Instance
    cycle: CycleLaw
    deviation: Deviation
    seconds: float
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def lossless(self) -> bool:
        if self.inst.exact:
            return self.deviation.value == 0
        return float(self.deviation.value) <= FLOAT_TOLERANCE

    @property
    def tau(self) -> Number:
        return self.cycle.tau()

    def to_json(self) -> dict[str, Any]:
        ex = self.inst.exact
        f: Callable[[Number], str | float] = lambda x: fmt_number(x, ex)
        law = {" ".join(map(str, o)): f(pr) for o, pr in sorted(self.cycle.law.items()) if pr != 0}
        out = {
            "lossless": self.lossless,
            "max_abs_deviation": f(self.deviation.value),
            "worst_sequence": list(self.deviation.sequence),
            "worst_continued": f(self.deviation.continued),
            "worst_target": f(self.deviation.target),
            "tau": f(self.cycle.tau()),
            "root_acceptance": f(self.cycle.root_acceptance()),
            "joint_draws": self.cycle.joint_draws,
            "classes": self.cycle.classes,
            "enumerator": self.cycle.enumerator,
            "arithmetic": self.inst.config.arithmetic,
            "first_token_law": [f(x) for x in self.cycle.first_token_law(self.inst.n)],
            "cycle_law": law,
        }
        out.update(self.extras)
        return out


def cycle_law(
    inst: Instance,
    enumerator: str = "classes",
    deadline: Deadline | None = None,
    count_draws: bool = True,
    count_seconds: float | None = None,
) -> CycleLaw:
    """Pr(O = o) for every output o, by the class enumerator (default) or the naive one."""
    if enumerator == "naive":
        return naive_cycle_law(inst, deadline)
    if enumerator == "classes":
        return class_cycle_law(inst, count_draws, deadline, count_seconds)
    raise ValueError(f'enumerator must be "classes" or "naive", got {enumerator!r}')


def certify(
    inst: Instance,
    enumerator: str = "classes",
    deadline: Deadline | None = None,
    count_draws: bool = True,
    count_seconds: float | None = None,
) -> Report:
    """Cycle law, deviation from p_T over V^(D+1), tau: everything docs/spec.md §5 certifies.

    With a ``deadline`` every phase checks it (``Instance.bounded``) and raises ``Timeout``."""
    t0 = time.perf_counter()
    with inst.bounded(deadline):
        law = cycle_law(inst, enumerator, deadline, count_draws, count_seconds)
        dev = max_deviation(inst, law.law)
    return Report(inst, law, dev, time.perf_counter() - t0)
